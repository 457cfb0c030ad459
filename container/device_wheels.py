"""Downloads the wheels that the GPU machine's image lacks, for Python 3.12 manylinux x86_64.

The lent GPU machine (see docs/timings.md, "On a GPU") has a bare image: Python 3.12, CUDA torch
2.11, transformers 5.x and no network. ``container/device_wheels.txt`` pins what our code imports
there and the image does not have (or has in a version the lock's packages refuse);
``container/device_image.txt`` lists what the image has. This script fetches exactly the pinned
wheels into a git-ignored folder, which travels with the working tree and is installed there with

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD

Usage: ``python -m container.device_wheels [--out .whl] [--list container/device_wheels.txt]``.
Exit status 0: every pin has exactly one wheel and the folder is within ``LIMIT_MIB``; 2: a
refusal (stray wheels in the folder, a pin without exactly one wheel, over the size limit), said
in one line; 1: pip failed (its output is shown). Standard library only (plus pip, run as a
subprocess), so it runs from any Python that has pip; the pure logic is in functions that need
no network.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LIST = REPO_ROOT / "container" / "device_wheels.txt"
DEFAULT_IMAGE = REPO_ROOT / "container" / "device_image.txt"
DEFAULT_OUT = REPO_ROOT / ".whl"
LIMIT_MIB = 40.0
PYTHON_VERSION = "3.12"
IMPLEMENTATION = "cp"
# The image is Python 3.12.3 (Ubuntu 24.04, glibc 2.39); pip matches manylinux_2_N tags exactly,
# so every N up to 35 is named, newest first, then the legacy aliases.
PLATFORMS = tuple(f"manylinux_2_{n}_x86_64" for n in range(35, 4, -1)) + (
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
)
# Pure-Python packages published only as an sdist: built into a wheel here with `pip wheel
# --no-deps`, and refused unless the wheel comes out py3-none-any (platform independent).
PURE_PYTHON_SDISTS = frozenset({"seqeval"})
# Packages the image has that the list carries anyway, in the lock's version, and why.
REPLACES_IMAGE = {
    "transformers": "the lock's 4.57.6: mosaicml-streaming 0.13 needs transformers < 5; our code is written for 4.57",
    "tokenizers": "transformers 4.57.6 checks tokenizers >=0.22,<=0.23.0 at import; the image has 0.23.2",
    "huggingface-hub": "transformers 4.57.6 checks huggingface-hub >=0.34,<1.0 at import; the image has 1.33.0",
    "sentence-transformers": (
        "the image's 6.0.1 needs transformers >= 5 and huggingface-hub >= 1.3; the lock's 5.7.0 fits 4.57.6"
    ),
}

_PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)")
_WHEEL = re.compile(
    r"(?P<name>[^-]+)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl"
)


class Refused(Exception):
    """A check failed; the message is the one line printed before exiting with status 2."""


def canonical(name: str) -> str:
    """PEP 503 name: case and runs of -_. do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


def normal_version(version: str) -> str:
    """PEP 440 normal form where `packaging` is importable (wheel names carry it), else as written."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - pip vendors it, most environments have it
        return version.lower()
    try:
        return str(Version(version))
    except InvalidVersion:
        return version.lower()


def parse_pins(text: str, *, allow_bare: bool = False) -> dict[str, str | None]:
    """``{canonical name: version}`` of a pin list: ``name==version`` lines, ``#`` comments.

    A name listed twice or a line that is not an exact pin is an error (``ValueError``);
    ``allow_bare`` accepts a bare name (version ``None``), as ``device_image.txt`` has.
    """
    pins: dict[str, str | None] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _PIN.fullmatch(line)
        if match is not None:
            name, version = canonical(match.group(1)), match.group(2)
        elif allow_bare and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", line):
            name, version = canonical(line), None
        else:
            raise ValueError(f"line {number} is not an exact pin name==version: {raw!r}")
        if name in pins:
            raise ValueError(f"line {number}: {name} is listed twice")
        pins[name] = version
    return pins


LIST_BYTES_LIMIT = 1 << 20  # a pin list is a few kB


def read_pins(path: Path) -> dict[str, str]:
    """The pins of a list file: a regular file of at most 1 MiB (issue 66: `--list /dev/zero` read until
    memory ran out; a FIFO would wait for a writer), refused before it is opened otherwise."""
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError("not a regular file (a device, FIFO or folder); give the pinned list")
    if info.st_size > LIST_BYTES_LIMIT:
        raise ValueError(f"{info.st_size:,} bytes, more than the {LIST_BYTES_LIMIT:,} a pin list may hold")
    return parse_pins(Path(path).read_text(errors="replace"))  # type: ignore[return-value]


def wheel_name_version(filename: str) -> tuple[str, str] | None:
    """(canonical name, version) of a wheel file name, or None when it is not one."""
    match = _WHEEL.fullmatch(Path(filename).name)
    if match is None:
        return None
    return canonical(match.group("name")), normal_version(match.group("version"))


def is_pure_python(filename: str) -> bool:
    match = _WHEEL.fullmatch(Path(filename).name)
    return match is not None and match.group("abi") == "none" and match.group("plat") == "any"


def match_wheels(pins: dict[str, str], filenames: Iterable[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Assigns wheel files to pins: ``({name: [files]}, [files matching no pin])``."""
    wanted = {name: normal_version(version) for name, version in pins.items()}
    matched: dict[str, list[str]] = {name: [] for name in pins}
    stray = []
    for filename in sorted(filenames):
        parsed = wheel_name_version(filename)
        if parsed is not None and parsed[0] in wanted and wanted[parsed[0]] == parsed[1]:
            matched[parsed[0]].append(filename)
        else:
            stray.append(filename)
    return matched, stray


def stray_wheels(pins: dict[str, str], folder: Path) -> list[str]:
    """Wheels in ``folder`` that the list does not pin (another package or another version)."""
    if not folder.is_dir():
        return []
    return match_wheels(pins, [p.name for p in folder.glob("*.whl")])[1]


def check_one_each(pins: dict[str, str], filenames: Iterable[str]) -> None:
    """Refuses unless every pin has exactly one wheel and no wheel is left over."""
    matched, stray = match_wheels(pins, filenames)
    if stray:
        raise Refused(f"wheels not in the list: {', '.join(stray)}")
    missing = sorted(name for name, files in matched.items() if not files)
    if missing:
        raise Refused(f"no wheel for: {', '.join(f'{n}=={pins[n]}' for n in missing)}")
    several = sorted(name for name, files in matched.items() if len(files) > 1)
    if several:
        raise Refused(f"more than one wheel for: {', '.join(f'{n} ({len(matched[n])})' for n in several)}")


def total_mib(sizes: Iterable[int]) -> float:
    return sum(sizes) / 2**20


def check_size(sizes: Iterable[int], limit_mib: float = LIMIT_MIB) -> float:
    """Total in MiB; refuses above ``limit_mib``."""
    total = total_mib(sizes)
    if total > limit_mib:
        raise Refused(f"the wheels take {total:.2f} MiB, over the {limit_mib:g} MiB limit")
    return total


def pip_download_command(pins: dict[str, str], out: Path, python: str = sys.executable) -> list[str]:
    """`pip download` of the pinned binary wheels for CPython 3.12 manylinux x86_64, no dependencies."""
    command = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check"]
    command += ["--python-version", PYTHON_VERSION, "--implementation", IMPLEMENTATION]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    command += ["-d", str(out)]
    command += [f"{name}=={version}" for name, version in sorted(pins.items())]
    return command


def pip_wheel_command(pins: dict[str, str], out: Path, python: str = sys.executable) -> list[str]:
    """`pip wheel` of pure-Python sdists (no dependencies); the result must be py3-none-any."""
    command = [python, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check"]
    command += ["--no-binary", ",".join(sorted(pins)), "-w", str(out)]
    command += [f"{name}=={version}" for name, version in sorted(pins.items())]
    return command


def split_pins(pins: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(pins downloaded as binary wheels, pure-Python sdists built here)."""
    binary = {n: v for n, v in pins.items() if n not in PURE_PYTHON_SDISTS}
    built = {n: v for n, v in pins.items() if n in PURE_PYTHON_SDISTS}
    return binary, built


def _run(command: Sequence[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        raise subprocess.CalledProcessError(result.returncode, command)


def download(pins: dict[str, str], out: Path) -> list[Path]:
    """Fetches (or builds) every pinned wheel into ``out``; returns the wheels there."""
    out.mkdir(parents=True, exist_ok=True)
    binary, built = split_pins(pins)
    if binary:
        _run(pip_download_command(binary, out))
    if built:
        with tempfile.TemporaryDirectory() as scratch:
            _run(pip_wheel_command(built, Path(scratch)))
            for wheel in Path(scratch).glob("*.whl"):
                if not is_pure_python(wheel.name):
                    raise Refused(f"{wheel.name} was built for one platform; only py3-none-any travels")
                (out / wheel.name).write_bytes(wheel.read_bytes())
    return sorted(out.glob("*.whl"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m container.device_wheels", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder for the wheels (default: .whl)")
    parser.add_argument("--list", type=Path, default=DEFAULT_LIST, help="pinned list (default: %(default)s)")
    parser.add_argument("--limit-mib", type=float, default=LIMIT_MIB, help="size limit (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        pins = read_pins(args.list)
    except (OSError, ValueError) as error:
        print(f"device_wheels: {args.list}: {error}", file=sys.stderr)
        return 2
    try:
        stray = stray_wheels(pins, args.out)
        if stray:
            raise Refused(f"{args.out} holds wheels not in {args.list.name}: {', '.join(stray)}; empty it first")
        try:
            wheels = download(pins, args.out)
        except subprocess.CalledProcessError as error:
            print(
                f"device_wheels: pip failed (exit {error.returncode}): {' '.join(error.cmd[:4])} ...", file=sys.stderr
            )
            return 1
        check_one_each(pins, [w.name for w in wheels])
        sizes = {w.name: w.stat().st_size for w in wheels}
        for name, size in sorted(sizes.items(), key=lambda item: -item[1]):
            print(f"{size / 2**20:8.2f} MiB  {name}")
        total = check_size(sizes.values(), args.limit_mib)
    except Refused as refusal:
        print(f"device_wheels: refused: {refusal}", file=sys.stderr)
        return 2
    print(f"{len(sizes)} wheels, {total:.2f} MiB in {args.out} (limit {args.limit_mib:g} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
