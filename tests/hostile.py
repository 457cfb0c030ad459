"""The hostile corpus (issue 78): names and values from outside that every reader of an outside name
or file must refuse in one line, leaving everything outside the folder it was given as it was.

Used by tests/test_hostile_corpus.py (every reader x every case) and tests/contracts/test_paths.py
(the containment rule itself, with Hypothesis). docs/reliability.md lists the readers.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

# Names that would leave their root, or cannot be one file name under it. The absolute one is made
# absolute under the sandbox at use (`name_cases`), so that a reader which follows it hits a victim
# file the test watches, never the machine's own files.
TRAVERSAL_NAMES = {
    "parent": "../victim.txt",
    "parent-twice": "../../victim.txt",
    "inner-parent": "shards/../../victim.txt",
    "dot": ".",
    "dot-dot": "..",
    "empty": "",
    "empty-part": "a//victim.txt",
    "trailing-slash": "victim.txt/",
    "backslash": "..\\victim.txt",
    "nul": "victim\x00.txt",
    "newline": "victim\n.txt",
    "escape-sequence": "\x1b[31mvictim.txt",
    "overlong-part": "v" * 300,
    "overlong-path": "a/" * 2100 + "victim.txt",
    "lone-surrogate": "victim\udc80.txt",
}
ABSOLUTE = "absolute"  # "/<sandbox>/victim.txt"
LINK_ON_THE_WAY = "link-on-the-way"  # "<root>/escape/victim.txt", escape -> the sandbox
NOT_A_STRING = "not-a-string"  # 7 (a JSON number where a name belongs)

CASES = [*TRAVERSAL_NAMES, ABSOLUTE, LINK_ON_THE_WAY, NOT_A_STRING]


def name_case(case: str, sandbox: Path, root: Path):
    """The hostile name of `case` for a reader whose root is `root` inside `sandbox` (the link case
    creates `root/escape` -> `sandbox`)."""
    if case == ABSOLUTE:
        return str(sandbox / "victim.txt")
    if case == LINK_ON_THE_WAY:
        root.mkdir(parents=True, exist_ok=True)
        (root / "escape").symlink_to(sandbox, target_is_directory=True)
        return "escape/victim.txt"
    if case == NOT_A_STRING:
        return 7
    return TRAVERSAL_NAMES[case]


# A 341-byte YAML alias bomb: 9 levels of 9 aliases, 387 million values once expanded.
ALIAS_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "\n".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(8)
)
RECURSIVE_YAML = "a: &a [1, *a]\n"
DEEP_YAML = "[" * 100_000 + "]" * 100_000
HOSTILE_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "0", "-1", "1e400", "ten", "0x10", "1" * 5000]


def plant_victims(sandbox: Path) -> None:
    """The files a traversal would reach: beside the given folder, and a start-up file it could plant."""
    (sandbox / "victim.txt").write_text("the user's own file\n")
    (sandbox / "thesis.tex").write_text("\\documentclass{article}\n")


def snapshot(tree: Path, skip: Path | None = None) -> dict[str, tuple]:
    """Every entry under `tree` but those under `skip` (the folder the reader was given): its
    kind, size, mode and content hash; links as their target, never followed."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(tree, followlinks=False):
        here = Path(dirpath)
        if skip is not None and (here == skip or skip in here.parents):
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            path = here / name
            if skip is not None and path == skip:
                continue
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                out[str(path.relative_to(tree))] = ("link", os.readlink(path))
            elif stat.S_ISREG(info.st_mode):
                out[str(path.relative_to(tree))] = ("file", info.st_size, hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                out[str(path.relative_to(tree))] = ("other", stat.S_IFMT(info.st_mode))
    return out


def study_with_plan(out: Path, run_name, run_dir) -> Path:
    """A toy study folder (reproduce.yaml and the plan.json written for it: one pretraining run, one
    fine-tuning run) whose first pretraining run is renamed `run_name` at folder `run_dir` in
    plan.json; returns the folder."""

    from reproduce.plan import ReproduceConfig, build_plan, write_study_config

    cfg = ReproduceConfig(out=str(out), scale="toy", sizes=("toy_s",), ratios=(0.4,), clm=False, tasks=("sst2",))
    write_study_config(build_plan(cfg))

    def forge(body):
        old = body["runs"][0]["config"]["run_dir"]
        body["runs"][0]["name"] = run_name
        body["runs"][0]["config"]["run_dir"] = run_dir
        for item in body["inventory"]:  # the forger keeps the inventory and digest consistent
            if item["path"] == old:
                item.update(path=run_dir, shared=not str(run_dir).startswith("$OUT"))

    forge_plan(out, forge)
    return out


def forge_plan(out: Path, change) -> None:
    """Rewrite OUT/plan.json with `change(body)` applied and its digest made again (a forger who
    knows the format: the checks beyond the digest must refuse it)."""
    import json

    from reproduce.plan import PLAN_FILE
    from reproduce.plan.study_plan import sign_plan_text

    body = json.loads((out / PLAN_FILE).read_text())
    body.pop("plan_sha256")
    change(body)
    (out / PLAN_FILE).write_text(sign_plan_text(json.dumps(body, separators=(",", ":"))))
