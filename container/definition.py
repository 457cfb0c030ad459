"""Static checks of the Apptainer definition: it must install exactly what CI installs.

The definition is parsed with spython (the same parser `spython recipe` uses); the runscript is
read from the raw text, since spython rewrites multi-line sections into echo commands.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from container.image_check import GPU_ADDITIONS, canonical, read_lock

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
DEFINITION = HERE / "mlm_vs_clm.def"
LOCK = REPO_ROOT / "requirements.lock"
IMAGE_ROOT = "/opt/mlm_vs_clm"  # where %files puts the exported source tree
STAGING_SOURCE = "src"  # the exported tree's folder name in the staging folder
GIT_SHA_PLACEHOLDER = "@GIT_SHA@"
STAGES = ("pretraining", "benchmarks", "analysis", "paper_figures", "reproduce")
OFFLINE_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
# Label -> the distribution whose locked (or added) version it must state.
VERSION_LABELS = {
    "mlm_vs_clm.torch": "torch",
    "mlm_vs_clm.composer": "mosaicml",
    "mlm_vs_clm.streaming": "mosaicml-streaming",
    "mlm_vs_clm.transformers": "transformers",
    "mlm_vs_clm.flash_attn": "flash-attn",
}
DIGEST_FROM = re.compile(r"[a-z0-9][a-z0-9._/-]*@sha256:[0-9a-f]{64}")


def parse_recipe(path: Path = DEFINITION):
    """The spython Recipe of a (single-stage) definition file."""
    from spython.logger import bot
    from spython.main.parse.parsers import SingularityParser

    level, bot.level = bot.level, 0  # its warnings are about converting to a Dockerfile: not ours
    try:
        parser = SingularityParser(str(path))
    finally:
        bot.level = level
    (recipe,) = parser.recipe.values()
    return recipe


def sections(text: str) -> dict[str, list[str]]:
    """Raw lines of each %section, dedented, blank lines dropped ('header' holds the lines before)."""
    result: dict[str, list[str]] = {"header": []}
    current = "header"
    for line in text.splitlines():
        if line.startswith("%"):
            current = line[1:].split()[0].lower()
            result[current] = []
        elif line.strip():
            result[current].append(line.strip() if current == "header" else line)
    for name, lines in result.items():
        indent = min((len(text) - len(text.lstrip()) for text in lines), default=0)
        result[name] = [text[indent:] for text in lines]
    return result


def pip_installs(install_lines: list[str]) -> list[list[str]]:
    """Arguments after ``pip install`` of each install command of %post (continuations joined)."""
    joined, buffer = [], ""
    for line in install_lines:
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        joined.append(buffer + line)
        buffer = ""
    commands = []
    for line in joined:
        if line.lstrip().startswith("#"):
            continue
        words = shlex.split(line)
        for i in range(len(words) - 1):
            if words[i] == "pip" or words[i].endswith("/pip"):
                if words[i + 1] == "install":
                    commands.append(words[i + 2 :])
                    break
            if words[i] == "-m" and words[i + 1] == "pip" and words[i + 2 : i + 3] == ["install"]:
                commands.append(words[i + 3 :])
                break
    return commands


def _requirements(args: list[str]) -> tuple[set[str], list[str]]:
    """Flags and requirement words of one ``pip install`` (``-r FILE`` kept as one word)."""
    flags, reqs, skip = set(), [], False
    for i, word in enumerate(args):
        if skip:
            skip = False
            continue
        if word in ("-r", "--requirement"):
            reqs.append(f"-r {args[i + 1]}")
            skip = True
        elif word.startswith("-"):
            flags.add(word)
        else:
            reqs.append(word)
    return flags, reqs


def _wheel_name(url: str) -> str:
    return url.split("#", 1)[0].rsplit("/", 1)[-1].replace("%2B", "+").replace("%2b", "+")


def check_definition(path: Path = DEFINITION, lock_path: Path = LOCK) -> list[str]:
    """Every way the definition departs from the pinned lock and the image's contract ([] = fine)."""
    text = path.read_text()
    lock = read_lock(lock_path.read_text())
    recipe = parse_recipe(path)
    raw = sections(text)
    problems = []

    if not any(re.fullmatch(r"bootstrap:\s*docker", line, re.IGNORECASE) for line in raw["header"]):
        problems.append("the definition must start from a docker image (Bootstrap: docker)")
    if not DIGEST_FROM.fullmatch(recipe.fromHeader or ""):
        problems.append(f"base image not pinned by digest: {recipe.fromHeader!r}")
    if not any(re.fullmatch(rf"(/\S*/)?{STAGING_SOURCE} {IMAGE_ROOT}", line) for line in recipe.files):
        problems.append(f"%files must copy the exported tree: '{STAGING_SOURCE} {IMAGE_ROOT}'")

    installs = pip_installs(recipe.install)
    lock_in_image = f"-r {IMAGE_ROOT}/requirements.lock"
    kinds = []
    for args in installs:
        flags, reqs = _requirements(args)
        if flags & {"-U", "--upgrade", "--pre", "-i", "--index-url", "--extra-index-url", "-e", "--editable"}:
            problems.append(f"pip install with a flag that could move a pin: {' '.join(args)}")
        if reqs == [lock_in_image]:
            kinds.append("lock")
        elif reqs == [IMAGE_ROOT]:
            kinds.append("project")
            if not {"--no-deps", "--no-build-isolation"} <= flags:
                problems.append("the project must be installed as CI does: --no-deps --no-build-isolation")
        elif len(reqs) == 1 and canonical(reqs[0].split("==")[0]) == "pip" and "==" in reqs[0]:
            kinds.append("pip")
        else:
            kinds.append("additions")
            problems += _addition_problems(flags, reqs, lock)
    if kinds.count("lock") != 1 or kinds.count("project") != 1:
        problems.append(f"expected one '{lock_in_image}' install and one project install, got {kinds}")
    elif kinds.index("lock") > kinds.index("project") or "additions" in kinds[: kinds.index("project")]:
        problems.append(f"install order must be lock, project, then GPU additions; got {kinds}")
    post = [line.strip() for line in recipe.install]
    if not any(re.search(r"pip check$", line) for line in post):
        problems.append("%post must run pip check")
    if not any("image_check.py" in line and "--packages-only" in line for line in post):
        problems.append("%post must verify the installed set (image_check.py --packages-only)")

    labels = dict(line.split(None, 1) for line in recipe.labels if len(line.split(None, 1)) == 2)
    versions = {**lock, **{canonical(k): v for k, v in GPU_ADDITIONS.items()}}
    for label, dist in VERSION_LABELS.items():
        if labels.get(label) != versions.get(canonical(dist)):
            pinned = versions.get(canonical(dist))
            problems.append(f"label {label} is {labels.get(label)!r}, {dist} is pinned at {pinned}")
    if labels.get("org.opencontainers.image.revision") != GIT_SHA_PLACEHOLDER:
        problems.append(f"label org.opencontainers.image.revision must hold {GIT_SHA_PLACEHOLDER} (filled at build)")

    environ = dict(e.split("=", 1) for e in recipe.environ)
    problems += [f"%environment must set {name}=1" for name in OFFLINE_ENV if environ.get(name) != "1"]

    runscript = "\n".join(raw.get("runscript", []))
    if 'exec python -m "$stage" "$@"' not in runscript or not all(s in runscript for s in STAGES):
        problems.append("%runscript must forward `run IMAGE STAGE ARGS` to `python -m STAGE ARGS`")
    if "image_check.py" not in "\n".join(raw.get("test", [])):
        problems.append("%test must run container/image_check.py")
    return problems


def _addition_problems(flags: set[str], reqs: list[str], lock: dict[str, str]) -> list[str]:
    """GPU additions: --no-deps, pinned exactly (a version or a hash-checked URL), none in the lock."""
    problems = [] if "--no-deps" in flags else [f"additions must be installed with --no-deps: {reqs}"]
    expected = {canonical(k): v for k, v in GPU_ADDITIONS.items()}
    seen = {}
    for req in reqs:
        if req.startswith("https://"):
            name, version = _wheel_name(req).split("-")[:2]
            version = version.split("+")[0]
            if not re.search(r"#sha256=[0-9a-f]{64}$", req):
                problems.append(f"wheel URL without a #sha256= hash: {req}")
        elif "==" in req:
            name, version = req.split("==", 1)
        else:
            problems.append(f"unpinned addition: {req}")
            continue
        seen[canonical(name)] = version
    if seen != expected:
        problems.append(f"additions {seen} differ from image_check.GPU_ADDITIONS {expected}")
    problems += [f"addition {name} is in the lock: the image would not match CI" for name in seen if name in lock]
    return problems
