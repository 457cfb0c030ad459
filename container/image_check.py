"""Checks the Python stack inside the image: exactly the lock, plus the GPU additions.

Runs at the end of the image's %post (``--packages-only``) and as its %test (`apptainer test
[--nv] IMAGE`). Standard library only until the package imports, so it also runs against CI's
venv. Exit status 1 lists every problem found.
"""

from __future__ import annotations

import argparse
import re
import sys
from importlib import metadata
from pathlib import Path

# Installed in the image on top of the lock, with --no-deps (flash-attn's only other requirement
# is torch). Never listed in requirements.lock: CI cannot install flash-attn (no CUDA).
GPU_ADDITIONS = {"einops": "0.8.1", "flash-attn": "2.8.0.post2", "liger-kernel": "0.8.5"}
PROJECT = "mlm-vs-clm"
INSTALLER = "pip"
# Import name -> distribution name of the packages every stage relies on.
KEY_IMPORTS = {
    "torch": "torch",
    "composer": "mosaicml",
    "streaming": "mosaicml-streaming",
    "transformers": "transformers",
}
DEFAULT_LOCK = Path(__file__).resolve().parent.parent / "requirements.lock"


def canonical(name: str) -> str:
    """PEP 503 name: case and runs of -_. do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


class LockError(ValueError):
    pass


def read_lock(text: str) -> dict[str, str]:
    """``{canonical name: version}`` of a fully pinned lock; anything but ``name==version`` is an error."""
    pins = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)", line)
        if match is None:
            raise LockError(f"lock line {number} is not an exact pin: {raw!r}")
        pins[canonical(match.group(1))] = match.group(2)
    if not pins:
        raise LockError("the lock pins no package; pass requirements.lock (name==version lines)")
    return pins


def installed_versions() -> dict[str, str]:
    return {canonical(dist.metadata["Name"]): dist.version for dist in metadata.distributions()}


def package_problems(
    lock: dict[str, str], installed: dict[str, str], additions: dict[str, str] | None = None, strict: bool = True
) -> list[str]:
    """Differences between the installed set and the lock (+ additions, the project and pip).

    ``strict=False`` only checks that every pin of the lock is installed at its version.
    """
    problems = [
        f"{name}: lock pins {version}, installed {installed.get(name, 'nothing')}"
        for name, version in sorted(lock.items())
        if installed.get(name) != version
    ]
    if not strict:
        return problems
    additions = {canonical(k): v for k, v in (additions if additions is not None else GPU_ADDITIONS).items()}
    problems += [f"{name}: addition overrides the lock pin {lock[name]}" for name in additions if name in lock]
    # A prebuilt wheel may carry a local tag (2.8.0.post2+cu12torch2.7...): compare public versions.
    problems += [
        f"{name}: expected addition {version}, installed {installed.get(name, 'nothing')}"
        for name, version in sorted(additions.items())
        if installed.get(name, "").split("+")[0] != version
    ]
    allowed = set(lock) | set(additions) | {PROJECT, INSTALLER}
    problems += [
        f"{name}=={installed[name]}: installed but neither locked nor an addition"
        for name in sorted(set(installed) - allowed)
    ]
    if PROJECT not in installed:
        problems.append(f"{PROJECT}: the project itself is not installed")
    return problems


def runtime_problems(lock: dict[str, str]) -> list[str]:
    """Python 3.11 final, the key imports at their locked versions, flash-attn on a visible GPU."""
    problems = []
    if sys.version_info[:2] != (3, 11) or sys.version_info.releaselevel != "final":
        problems.append(f"Python is {sys.version.split()[0]}, expected a final 3.11 release")
    for module, dist in KEY_IMPORTS.items():
        try:
            __import__(module)
        except Exception as error:  # report every broken import, not just the first
            problems.append(f"import {module} failed: {error!r}")
            continue
        if metadata.version(dist) != lock.get(canonical(dist)):
            problems.append(f"{dist} {metadata.version(dist)} != locked {lock.get(canonical(dist))}")
    try:
        import torch
    except Exception:
        return problems
    if not (torch.version.cuda or "").startswith("12."):
        problems.append(f"torch is built for CUDA {torch.version.cuda}, expected 12.x")
    if torch.cuda.is_available():
        problems += flash_attn_problems(torch)
    else:
        print("image_check: no GPU visible, flash-attn not exercised (use `apptainer test --nv IMAGE`)")
    return problems


def flash_attn_problems(torch) -> list[str]:
    try:
        from flash_attn import flash_attn_func
        from transformers.utils import is_flash_attn_2_available
    except Exception as error:  # an ABI mismatch shows up here as an undefined symbol
        return [f"import flash_attn failed: {error!r}"]
    q = torch.randn(1, 16, 2, 64, device="cuda", dtype=torch.bfloat16)
    out = flash_attn_func(q, q, q, causal=False)
    reference = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, q, q))).transpose(
        1, 2
    )
    problems = []
    if not torch.allclose(out.float(), reference.float(), atol=2e-2):
        problems.append("flash_attn_func disagrees with scaled_dot_product_attention")
    if not is_flash_attn_2_available():
        problems.append("transformers does not see flash-attn 2")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lock", type=Path, default=DEFAULT_LOCK)
    parser.add_argument("--packages-only", action="store_true", help="skip the imports (build time)")
    args = parser.parse_args(argv)
    from container.one_line import run_command

    return run_command("image_check", lambda: _check(args))


def _check(args) -> int:
    from container.one_line import read_small_text

    try:
        lock = read_lock(read_small_text(args.lock))
    except LockError as exc:
        raise LockError(f"{args.lock}: {exc}") from None
    problems = package_problems(lock, installed_versions())
    if not args.packages_only:
        problems += runtime_problems(lock)
    for problem in problems:
        print(f"image_check: {problem}", file=sys.stderr)
    if not problems:
        print(f"image_check: OK ({len(lock)} locked packages + {', '.join(GPU_ADDITIONS)})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
