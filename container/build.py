"""Build the Apptainer image of the committed tree, or only check its definition.

    python -m container.build --check            # parse the definition, compare it with the lock
    python -m container.build [--image PATH]     # build (needs apptainer or singularity)

The build exports the commit (``git archive``, so untracked and uncommitted files stay out), fills
the commit into the definition's labels, and builds through spython in a staging folder. Exit
status: 0 built or checked, 1 the definition does not match the lock, 2 no apptainer/singularity,
3 the build itself failed.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from container.definition import (
    DEFINITION,
    GIT_SHA_PLACEHOLDER,
    IMAGE_ROOT,
    LOCK,
    REPO_ROOT,
    STAGING_SOURCE,
    check_definition,
)

EXIT_MISMATCH, EXIT_NO_BUILDER, EXIT_BUILD_FAILED = 1, 2, 3
DEFAULT_IMAGE = REPO_ROOT / "mlm_vs_clm.sif"


def find_builder() -> str | None:
    """Path of apptainer (preferred) or singularity, None when neither is installed."""
    return shutil.which("apptainer") or shutil.which("singularity")


def git(*args: str, repo: Path = REPO_ROOT) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def stage_commit(staging: Path, sha: str, repo: Path = REPO_ROOT) -> Path:
    """Export commit ``sha`` to ``staging/src`` and write its definition, with the sha filled in, beside it."""
    archive = subprocess.run(["git", "archive", "--format=tar", sha], cwd=repo, capture_output=True, check=True).stdout
    source = staging / STAGING_SOURCE
    source.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        # The "data" filter exists from Python 3.12 and in security releases of older ones.
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(source, **safe)
    definition = source / DEFINITION.relative_to(REPO_ROOT)
    staged = staging / DEFINITION.name
    text = definition.read_text().replace(GIT_SHA_PLACEHOLDER, sha)
    # An absolute %files source: no reliance on the builder's working folder.
    text = re.sub(
        rf"^(\s*){STAGING_SOURCE} {IMAGE_ROOT}$",
        lambda m: f"{m.group(1)}{source} {IMAGE_ROOT}",
        text,
        flags=re.MULTILINE,
    )
    staged.write_text(text)
    return staged


def report(problems: list[str], what: str) -> int:
    for problem in problems:
        print(f"container: {problem}", file=sys.stderr)
    if problems:
        print(f"container: {what} does not match requirements.lock / the image contract", file=sys.stderr)
        return EXIT_MISMATCH
    print(f"container: {what} OK (installs exactly requirements.lock, base pinned by digest)")
    return 0


def build(image: Path, sudo: bool, fakeroot: bool, extra: list[str], repo: Path = REPO_ROOT) -> int:
    builder = find_builder()
    if builder is None:
        print(
            "container: neither apptainer nor singularity is installed here; build on a machine that "
            "has one (an HPC login node), e.g. `make container` there.",
            file=sys.stderr,
        )
        return EXIT_NO_BUILDER
    sha = git("rev-parse", "HEAD", repo=repo)
    if git("status", "--porcelain", "--untracked-files=no", repo=repo):
        print(f"container: uncommitted changes are NOT in the image; it is built from {sha}", file=sys.stderr)
    image = image.resolve()
    with tempfile.TemporaryDirectory(prefix="mlm_vs_clm-build-") as tmp:
        staging = Path(tmp)
        definition = stage_commit(staging, sha, repo)
        source = staging / STAGING_SOURCE  # the commit's own definition and lock, before filling in
        lock_bytes = (source / LOCK.name).read_bytes()  # for the build record (the staging folder goes)
        code = report(
            check_definition(source / DEFINITION.relative_to(REPO_ROOT), source / LOCK.name),
            f"definition at {sha[:12]}",
        )
        if code:
            return code
        # spython always calls `singularity`; Apptainer installs that name too, but not everywhere.
        shims = staging / "bin"
        shims.mkdir()
        if Path(builder).name != "singularity":
            (shims / "singularity").symlink_to(builder)
        options = ["--fakeroot"] if fakeroot else []
        partial = image.with_name(image.name + ".partial")
        partial.unlink(missing_ok=True)  # only this build's output may be renamed into place
        previous = (os.getcwd(), os.environ.get("PATH", ""))
        os.environ["PATH"] = f"{shims}{os.pathsep}{previous[1]}"
        os.chdir(staging)
        try:
            from spython.main import Client

            built = Client.build(
                recipe=str(definition),
                image=str(partial),
                sudo=sudo,
                force=True,
                options=options + extra,
                return_result=True,
            )
        finally:
            os.chdir(previous[0])
            os.environ["PATH"] = previous[1]
    if not built or not partial.exists():
        print("container: the build failed (see the builder's output above)", file=sys.stderr)
        return EXIT_BUILD_FAILED
    partial.replace(image)
    write_build_record(image, sha, lock_bytes)
    print(f"container: built {image} from {sha} (build record {build_record_path(image)})")
    return 0


BUILD_RECORD_SUFFIX = ".build.json"  # = contracts.image_record (container/ imports no package of ours)


def build_record_path(image: Path) -> Path:
    """`IMAGE.build.json`: what the image was built from, read by the submission's preflight."""
    image = Path(image)
    return image.with_name(image.name + BUILD_RECORD_SUFFIX)


def write_build_record(image: Path, commit: str, lock: Path | bytes) -> Path:
    """The commit, the sha256 of its requirements.lock and the image's size, beside the image: the
    preflight of `reproduce --slurm` refuses an image whose lock is not the checkout's (the jobs run
    the checkout's code on the image's packages) or that changed since (another file copied over it)."""
    import datetime
    import hashlib
    import json

    body = {
        "commit": commit,
        "requirements_lock_sha256": hashlib.sha256(
            lock if isinstance(lock, bytes) else Path(lock).read_bytes()
        ).hexdigest(),
        "image_bytes": Path(image).stat().st_size,
        "built": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    path = build_record_path(image)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(body, indent=1) + "\n")
    partial.replace(path)  # whole or absent, as the image itself
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m container.build", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the definition against the lock")
    parser.add_argument("--image", type=Path, default=DEFAULT_IMAGE, help="output .sif (default: %(default)s)")
    parser.add_argument("--definition", type=Path, default=DEFINITION, help=argparse.SUPPRESS)
    parser.add_argument("--lock", type=Path, default=LOCK, help=argparse.SUPPRESS)
    parser.add_argument("--sudo", action="store_true", help="build through sudo (default: as yourself)")
    parser.add_argument(
        "--fakeroot",
        action=argparse.BooleanOptionalAction,
        default=os.geteuid() != 0,
        help="pass --fakeroot to the builder (default: on unless root)",
    )
    parser.add_argument(
        "--builder-option",
        action="append",
        default=[],
        metavar="OPT",
        help="extra option for `apptainer build`, repeatable (e.g. --builder-option=--notest)",
    )
    args = parser.parse_args(argv)
    from container.one_line import run_command

    if args.check:
        return run_command("build", lambda: report(check_definition(args.definition, args.lock), str(args.definition)))
    return run_command(
        "build", lambda: build(args.image, args.sudo, args.fakeroot and not args.sudo, args.builder_option)
    )


if __name__ == "__main__":
    sys.exit(main())
