"""`python -m pretraining fetch-model NAME|REPO --out DIR`: a checkpoint from the Hub, once, loadable offline.

NAME is one of the paper's 50 released checkpoints (`python -m pretraining configs --list`; the
repo is `MLMvsCLM/<NAME>`), REPO any Hub model repo (`org/name`). The revision (default main) is
resolved to its commit sha first and every file is fetched at that sha with huggingface_hub
(resumable: an interrupted fetch leaves `DIR.partial`, which records the repo and commit it holds,
and the next run continues it; one of another repo or commit, or a link there, is refused; progress
bars are huggingface_hub's), checked against the Hub's hashes and only then moved into
`DIR.partial`, under the containment rule. The folder gets `fetch_manifest.json`
(repo, requested revision, commit sha, sha256 and size of every file) and appears only when
complete (`DIR.partial` renamed). Model code a checkpoint ships (`auto_map` in config.json /
tokenizer_config.json, `--trust-remote-code` in the harness) is in the folder already; code that
`auto_map` takes from another repo (`other/repo--module.Class`) is fetched too, pinned, copied in
and `auto_map` pointed at the copy, so the folder loads with HF_HUB_OFFLINE=1 anywhere.

`--cache` fetches into the Hugging Face cache ($HF_HOME/hub) instead, for what the jobs load by
hub id (the Llama-3 tokenizer of the pretraining configs); `--include` limits the files
(e.g. `--include 'tokenizer*' --include '*.json'`). `check_model(DIR)` verifies a folder offline.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from contracts.bounded import LARGE, SMALL, BoundedReadError, read_json_object
from contracts.hub import (
    DOWNLOAD_STATE_DIR,
    MODEL_MANIFEST,
    HubError,
    bytes_to_download,
    check_fetched_model,
    check_free_space,
    check_writable,
    differing_files,
    download,
    download_to_cache,
    endpoint,
    resolve,
    sha256_file,
    verify_file,
)
from contracts.paths import UnsafeNameError, contained, move_inside
from contracts.provenance import atomic_write_json, utc_now

HUB_ORG = "MLMvsCLM"  # the paper's released checkpoints: hf.co/MLMvsCLM/<name>
MANIFEST_FILE = MODEL_MANIFEST
# What a partial folder (`<out>.partial`) holds: its repo and revision; gone with the download state.
PARTIAL_RECORD = f"{DOWNLOAD_STATE_DIR}/fetch-model.json"
_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
_CODE_CONFIGS = ("config.json", "tokenizer_config.json")  # where transformers reads `auto_map`


class FetchModelError(ValueError):
    """A name that is no checkpoint, an output folder that holds something else; one line."""


def repo_for(name: str) -> str:
    """The Hub repo of a released name (`610m-mlm40-42k` -> `MLMvsCLM/610m-mlm40-42k`) or a repo id."""
    from pretraining.registry import released_checkpoints

    name = name.strip().rstrip("/")
    if "/" in name:
        if not _REPO_ID.match(name):
            raise FetchModelError(f"{name!r} is not a Hub repo id (org/name)")
        return name
    if name in released_checkpoints():
        return f"{HUB_ORG}/{name}"
    raise FetchModelError(
        f"{name!r} is neither one of the paper's 50 checkpoints (`python -m pretraining configs --list`) "
        "nor a Hub repo id (org/name)"
    )


def _selected(files: Sequence[str], include: Sequence[str]) -> list[str]:
    from huggingface_hub.utils import filter_repo_objects

    chosen = sorted(filter_repo_objects(files, allow_patterns=list(include) or None))
    if not chosen:
        raise FetchModelError(f"--include {' '.join(include)} matches none of the repo's files: {', '.join(files)}")
    return chosen


def _read_json(path: Path) -> dict:
    """A JSON object of a fetched folder (config.json, its manifest: at most 1 MiB; tokenizer_config.json,
    which may list many added tokens: at most 256 MiB), or a FetchModelError in one line naming it."""
    try:
        return read_json_object(path, LARGE if path.name == "tokenizer_config.json" else SMALL)
    except BoundedReadError as exc:
        raise FetchModelError(str(exc)) from None


def _code_refs(folder: Path) -> dict[str, list[str]]:
    """config file -> the `auto_map` references in it (`module.Class` or `repo--module.Class`)."""
    refs = {}
    for name in _CODE_CONFIGS:
        path = folder / name
        if path.is_file():
            auto_map = _read_json(path).get("auto_map") or {}
            values = [v for value in auto_map.values() for v in (value if isinstance(value, list) else [value])]
            refs[name] = [v for v in values if v]
    return refs


def _bundle_remote_code(folder: Path, log: Callable[[str], None]) -> dict[str, str]:
    """Copy model code that `auto_map` takes from other repos into `folder` and point `auto_map`
    at the copies; returns {repo: commit sha} of the repos the code came from."""
    pinned: dict[str, str] = {}
    for config_name, refs in _code_refs(folder).items():
        foreign = sorted({ref.partition("--")[0] for ref in refs if "--" in ref})
        for repo in foreign:
            snapshot = resolve(repo, "model")
            code = [p for p in snapshot.files if p.endswith(".py")]
            staging = folder / DOWNLOAD_STATE_DIR / "code" / repo
            download(snapshot, code, staging)
            for path in code:
                name, source = Path(path).name, f"the model code of {repo}"
                try:
                    target = contained(folder, name, source)
                    if target.exists() and target.read_bytes() != (staging / path).read_bytes():
                        raise FetchModelError(f"{repo}: its {path} differs from the checkpoint's own {name}")
                    move_inside(staging / path, folder, name, source)
                except UnsafeNameError as exc:
                    raise FetchModelError(str(exc)) from None
            pinned[repo] = snapshot.sha
            log(f"fetch-model: model code from {repo}@{snapshot.sha[:12]}: {', '.join(code)}")
        if foreign:
            path = folder / config_name
            config = _read_json(path)
            config["auto_map"] = {
                key: [v.partition("--")[2] if v and "--" in v else v for v in value]
                if isinstance(value, list)
                else (value.partition("--")[2] if "--" in value else value)
                for key, value in config["auto_map"].items()
            }
            atomic_write_json(path, config)
    for config_name, refs in _code_refs(folder).items():
        for ref in refs:
            module = ref.rsplit(".", 1)[0]
            if not (folder / f"{module}.py").is_file():
                raise FetchModelError(f"{config_name} names model code {module}.py (auto_map), which the repo lacks")
    return pinned


def _file_records(folder: Path, files: Sequence[str]) -> dict[str, dict]:
    """The manifest's record of each file, each reached through the containment rule: a link
    swapped into the folder during the download is refused, never certified (issue 88)."""
    records = {}
    for name in files:
        try:
            path = contained(folder, name, f"the fetched folder {folder}")
        except UnsafeNameError as exc:
            raise FetchModelError(str(exc)) from None
        records[name] = {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
    return records


def fetch_model(
    name: str,
    out: str | os.PathLike | None,
    revision: str | None = None,
    include: Sequence[str] = (),
    cache: bool = False,
    log: Callable[[str], None] = print,
) -> dict:
    """Fetch a checkpoint (see the module docstring); returns its manifest."""
    repo = repo_for(name)
    snapshot = resolve(repo, "model", revision)
    files = _selected(list(snapshot.files), include)
    size = sum(snapshot.files[f].size or 0 for f in files)
    if cache:
        return _fetch_to_cache(snapshot, files, size, log)
    out = Path(out)
    partial = out.with_name(out.name + ".partial")
    source = f"{repo}@{snapshot.sha[:12]}"
    if partial.is_symlink():  # a name the package derives itself: never followed (issue 88)
        raise FetchModelError(
            f"{partial} is a link (fetch-model keeps its partial download in a folder of its own, never through a "
            "link): remove the link, or give another --out; nothing was written"
        )
    existing = read_model_manifest(out) if out.is_dir() else None
    if existing is not None:
        if (existing["repo"], existing["revision"]) != (repo, snapshot.sha):
            raise FetchModelError(
                f"{out} holds {existing['repo']}@{existing['revision'][:12]}, not {source}: "
                "choose another --out or delete it"
            )
        # the sha256 too: a file changed in place keeps its size
        damaged = differing_files(out, existing["files"])
        if not damaged:
            log(f"fetch-model: {out}: up to date ({source})")
            return existing
        _check_only_listed(out, existing)
        log(f"fetch-model: {out}: {len(damaged)} file(s) differ from its manifest ({damaged[0][1]}); refetching")
        _reopen(out, partial, snapshot)
    if out.exists() and any(out.iterdir()):
        raise FetchModelError(f"{out} exists and holds no {MANIFEST_FILE}: choose an empty or new --out")
    if partial.is_dir():
        _check_partial_is_ours(partial, repo, snapshot.sha)
    check_writable(partial)
    _record_partial(partial, repo, snapshot)
    staging = partial / DOWNLOAD_STATE_DIR / "files"  # where huggingface_hub writes; kept files are moved out
    missing, have = bytes_to_download(snapshot, files, partial, staging)  # a rerun resumes: what is there counts
    check_free_space(partial, missing, source, have)
    log(f"fetch-model: {source}: {len(files)} files, {size / 1e6:.1f} MB -> {out}")
    download(snapshot, files, partial, staging)
    code_from = _bundle_remote_code(partial, log)
    names = sorted({*files, *(p.relative_to(partial).as_posix() for p in _payload(partial))})
    manifest = {
        "format": "mlm-vs-clm/fetched-model",
        "repo": repo,
        "requested": revision or "main",
        "revision": snapshot.sha,
        "endpoint": endpoint(),
        "files": _file_records(partial, names),
        "code_from": code_from,
        "fetched": utc_now(),
    }
    atomic_write_json(partial / MANIFEST_FILE, manifest)
    shutil.rmtree(partial / DOWNLOAD_STATE_DIR, ignore_errors=True)
    if out.exists():
        out.rmdir()  # empty (checked above)
    os.replace(partial, out)
    return manifest


def _record_partial(partial: Path, repo: str, snapshot) -> None:
    """Say in the partial folder what it holds, so that a later run resumes only that (issue 88)."""
    record = partial / PARTIAL_RECORD
    if not record.is_file():
        record.parent.mkdir(exist_ok=True)
        atomic_write_json(record, {"repo": repo, "revision": snapshot.sha, "requested": snapshot.requested})


def _check_partial_is_ours(partial: Path, repo: str, sha: str) -> None:
    """Refuse a partial folder of another repo or revision (issue 88: it was resumed, and `--check`
    certified its files), or one that does not say what it holds and is not empty."""
    record = partial / PARTIAL_RECORD
    fix = "remove it (or give another --out) and rerun; nothing was written"
    if record.is_file() and not record.is_symlink():
        held = _read_json(record)
        if (held.get("repo"), held.get("revision")) != (repo, sha):
            revision = held.get("revision")
            shown = f"{held.get('repo')}@{revision[:12] if isinstance(revision, str) else revision}"
            raise FetchModelError(f"{partial} holds a partial download of {shown}, not of {repo}@{sha[:12]}: {fix}")
    elif any(partial.iterdir()):
        raise FetchModelError(
            f"{partial} holds files but no {PARTIAL_RECORD} saying which repo they are of (left by an older "
            f"version or by something else): {fix}"
        )


def _check_only_listed(out: Path, manifest: dict) -> None:
    """Refuse to refetch a folder holding files its manifest does not list (a user's notes, an
    adapter): the refetch would delete them (issue 88). Nothing is changed."""
    listed = {*manifest["files"], MANIFEST_FILE}
    extra = sorted(
        rel
        for p in out.rglob("*")
        if (p.is_file() or p.is_symlink()) and (rel := p.relative_to(out).as_posix()) not in listed
    )
    if extra:
        shown = ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
        raise FetchModelError(
            f"{out} needs a refetch but holds files its {MANIFEST_FILE} does not list ({shown}), which a refetch "
            "would delete: move them out of the folder and rerun; nothing was deleted"
        )


def _reopen(out: Path, partial: Path, snapshot) -> None:
    """Turn a fetched folder back into its `.partial`, keeping only the files that are the Hub's
    (the damaged ones go, and so do the manifest and what bundling wrote, which is redone), so that
    the fetch downloads the rest again and renames it back. The folder holds only files its
    manifest lists (`_check_only_listed`)."""
    if partial.exists() or partial.is_symlink():
        raise FetchModelError(f"{out} is damaged and {partial} exists too: delete one of them and rerun")
    os.replace(out, partial)
    _record_partial(partial, snapshot.repo_id, snapshot)
    for path in [p for p in _payload(partial) if p.is_file()] + [partial / MANIFEST_FILE]:
        remote = snapshot.files.get(path.relative_to(partial).as_posix())
        if remote is None or verify_file(path, remote) is not None:
            path.unlink(missing_ok=True)


def _payload(folder: Path) -> list[Path]:
    """The files of a fetched folder, without the download state and the manifest."""
    return [
        p
        for p in folder.rglob("*")
        if p.is_file() and DOWNLOAD_STATE_DIR not in p.relative_to(folder).parts[:1] and p.name != MANIFEST_FILE
    ]


def _fetch_to_cache(snapshot, files: list[str], size: int, log) -> dict:
    """Into the Hugging Face cache (`contracts.hub.download_to_cache`), with the revision asked for
    recorded (refs/main -> the commit), so that `from_pretrained(repo_id)` finds it offline."""
    from huggingface_hub import constants

    check_free_space(Path(constants.HF_HUB_CACHE), size, f"{snapshot.repo_id}@{snapshot.sha[:12]}")
    log(
        f"fetch-model: {snapshot.repo_id}@{snapshot.sha[:12]}: {len(files)} files -> the cache {constants.HF_HUB_CACHE}"
    )
    download_to_cache(snapshot, files)
    return {"repo": snapshot.repo_id, "revision": snapshot.sha, "cache": constants.HF_HUB_CACHE, "files": files}


def read_model_manifest(folder: Path) -> dict | None:
    path = Path(folder) / MANIFEST_FILE
    return _read_json(path) if path.is_file() else None


def check_model(folder: str | os.PathLike, hashes: bool = True) -> list[str]:
    """Problems of a fetched folder against its manifest (offline), one line each; [] if it verifies."""
    return check_fetched_model(Path(folder), hashes)


# --- CLI ------------------------------------------------------------------------------------------
def _cli(args) -> int:
    from contracts.provenance import DiskFullError

    try:
        if args.check:
            problems = check_model(args.check)
            for line in problems:
                print(f"fetch-model: FAILED: {line}", file=sys.stderr)
            if problems:
                return 1
            manifest = read_model_manifest(Path(args.check))
            source = f"{manifest['repo']}@{manifest['revision'][:12]}"
            print(f"fetch-model: {args.check}: OK: {len(manifest['files'])} files of {source} match (sha256)")
            return 0
        if not args.name or not (args.out or args.cache):
            print("fetch-model: give NAME|REPO and --out DIR (or --cache)", file=sys.stderr)
            return 2
        if args.no_progress:
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
        manifest = fetch_model(args.name, args.out, args.revision, args.include or (), cache=args.cache)
    except (FetchModelError, HubError, DiskFullError) as exc:
        print(f"fetch-model: {exc}", file=sys.stderr)
        return 2
    if args.cache:
        print(f"fetch-model: {manifest['repo']}@{manifest['revision'][:12]} in the cache {manifest['cache']}")
        return 0
    code = " --trust-remote-code" if any(_code_refs(Path(args.out)).values()) else ""
    print(
        f"fetch-model: {manifest['repo']}@{manifest['revision'][:12]} in {args.out}; offline: "
        f"`python -m benchmarks run --model {args.out}{code} ...`"
    )
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "fetch-model",
        help="download a released checkpoint (or any Hub model) once, pinned, for offline jobs",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("name", nargs="?", help="a released name (610m-mlm40-42k; see `configs --list`) or a repo id")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", help="the model folder to write (appears when complete)")
    where.add_argument("--cache", action="store_true", help="into the Hugging Face cache ($HF_HOME) instead")
    where.add_argument("--check", metavar="DIR", help="verify a fetched folder against its manifest, offline")
    p.add_argument("--revision", help="branch, tag or commit (default main, resolved to its commit)")
    p.add_argument("--include", action="append", metavar="PATTERN", help="only files matching (repeatable)")
    p.add_argument("--no-progress", action="store_true", help="no download progress bars")
    p.set_defaults(func=_cli)
