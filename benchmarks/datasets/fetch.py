"""`python -m benchmarks fetch-data`: the 12 tasks' data from the Hub into a local mirror, once.

On a cluster only the login node reaches the Hub; the fine-tuning jobs run offline and read the
mirror (`--data-root DIR`, benchmarks.datasets.loading, docs/cluster.md). For each task this fetches
every (repo, config, split) it reads (`task_units`) and writes the layout the loader reads,
`DIR/<hub_id>/<config or default>/<split>.<ext>`, with `DIR/manifest.json`:

- `sources`: per Hub repo the revision asked for, the commit sha it resolved to (every download
  pins it), how it was converted and its downloaded files with the Hub's hashes;
- `mirror`: per mirror file its repo, config, split, row count, size and sha256, and the source
  files it was made from;
- `tasks`: the tasks whose every file is in the mirror.

Two ways to convert. Repos the Hub serves as data files (parquet, json) are read with
`datasets.load_dataset(<builder>, data_files=...)` after their files are resolved with datasets'
own rules (the README's `configs`, else its default split patterns) and downloaded with
huggingface_hub; the split is written as `<split>.parquet` (the Hub's features, ClassLabel names
included). Script-based repos (loading scripts do not run with datasets >= 4: hgissbkh/ontonotes5,
BeIR/msmarco, BeIR/nq and the BeIR qrels repos) are fetched as their raw files (`RAW_LAYOUTS`) and
converted: BeIR corpus/queries `.jsonl.gz` and qrels `.tsv` files are the mirror files as they are
(hard links, `dev.tsv` -> `validation.tsv`), tner-style OntoNotes JSON lines are remapped to the
tner label order of `benchmarks.tasks.ONTONOTES5_TAGS` through the repo's `label.json`. The raw
file names are assumptions that could not be checked offline (docs/cluster.md lists them); a repo
whose files do not match fails with a line listing what it holds.

Downloads go to `DIR/.downloads/<repo>/` (resumable; removed once the repo is converted unless
`keep_downloads`); mirror files and the manifest are written aside and renamed, the manifest after
each repo, so an interrupted fetch keeps what it finished and a rerun continues. `check_mirror`
verifies a mirror against its manifest offline.
"""

from __future__ import annotations

import errno
import fnmatch
import gzip
import json
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from benchmarks.tasks import ONTONOTES5_TAGS, TASKS, HubSource, TaskSpec, get_task, with_ir_training
from contracts.bounded import LARGE, SMALL, BoundedReadError, read_text
from contracts.hub import (
    HubError,
    Snapshot,
    bytes_to_download,
    check_files,
    check_free_space,
    check_writable,
    download,
    resolve,
    sha256_file,
)
from contracts.paths import UnsafeNameError, contained
from contracts.provenance import DiskFullError, atomic_write_json, disk_full_cause, git_sha, package_versions, utc_now

MANIFEST_FILE = "manifest.json"
FORMAT = "mlm-vs-clm/task-mirror"
FORMAT_VERSION = 1
DOWNLOADS_DIR = ".downloads"
MIRROR_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet", ".tsv")  # benchmarks.datasets.loading reads these


class FetchError(ValueError):
    """Bad input (a repo whose files are not what the conversion expects, a bad --revision); one line."""


@dataclass(frozen=True)
class Unit:
    """One split of one (repo, config): one file of the mirror."""

    hub_id: str
    config: str | None
    split: str

    @property
    def config_dir(self) -> str:
        return self.config or "default"

    def label(self) -> str:
        return f"{self.hub_id}/{self.config_dir}/{self.split}"


def task_units(spec: TaskSpec) -> list[Unit]:
    """Every split of every repo the task reads (the loader's view, benchmarks.datasets.loading)."""
    if spec.task_type != "IR":
        return [Unit(spec.hub_id, spec.hub_config, split) for split in dict.fromkeys(spec.splits.values())]
    ir = spec.ir
    units = [Unit(spec.train_source.hub_id, spec.train_source.config, spec.train_source.split)]
    units += [Unit(ir.corpus.hub_id, ir.corpus.config, ir.corpus.split)]
    if ir.queries is not None:
        units.append(Unit(ir.queries.hub_id, ir.queries.config, ir.queries.split))
    qrels = dict.fromkeys(spec.splits[role] for role in ("validation", "test"))
    units += [Unit(ir.qrels.hub_id, ir.qrels.config, split) for split in qrels]
    return units


def units_of(tasks: Sequence[str]) -> dict[str, list[Unit]]:
    """hub id -> its units over `tasks` (unknown task names raise UnknownTaskError)."""
    out: dict[str, list[Unit]] = {}
    for name in tasks:
        for unit in task_units(get_task(name)):
            if unit not in out.setdefault(unit.hub_id, []):
                out[unit.hub_id].append(unit)
    return out


# --- script-based repos: their raw files ------------------------------------------------------------
@dataclass(frozen=True)
class RawLayout:
    """Where a script-based repo keeps each split: (config, split) -> file-name patterns (matched
    against the base name, first pattern with a match wins; every file it matches is read, in path
    order). `kind`: `copy` (the file is the mirror file) or `tner` (JSON lines of tokens + integer
    tags, renumbered through `label_file`)."""

    kind: str
    files: dict[tuple[str | None, str], tuple[str, ...]]
    label_file: str | None = None


_BEIR_TEXT = {
    ("corpus", "corpus"): ("corpus.jsonl.gz", "corpus.jsonl"),
    ("queries", "queries"): ("queries.jsonl.gz", "queries.jsonl"),
}
RAW_LAYOUTS: dict[str, RawLayout] = {
    "BeIR/msmarco": RawLayout("copy", _BEIR_TEXT),
    "BeIR/nq": RawLayout("copy", _BEIR_TEXT),
    "BeIR/msmarco-qrels": RawLayout(
        "copy",
        {
            (None, "train"): ("train.tsv",),
            (None, "validation"): ("dev.tsv", "validation.tsv"),
            (None, "test"): ("test.tsv",),
        },
    ),
    "BeIR/nq-qrels": RawLayout("copy", {(None, "test"): ("test.tsv",)}),
    # tner/ontonotes5 layout (dataset/train00-03.json, valid.json, test.json, label.json), which the
    # released harness's hgissbkh/ontonotes5 is assumed to mirror.
    "hgissbkh/ontonotes5": RawLayout(
        "tner",
        {
            (None, "train"): ("train*.json", "train*.jsonl"),
            (None, "validation"): ("valid*.json", "dev*.json", "validation*.json", "valid*.jsonl"),
            (None, "test"): ("test*.json", "test*.jsonl"),
        },
        label_file="label.json",
    ),
    # Only used if the repo turns out to be script-based (MLDR's own raw layout).
    "hgissbkh/mldr-en": RawLayout(
        "copy",
        {
            ("default", "dev"): ("dev.jsonl.gz", "dev.jsonl"),
            ("default", "test"): ("test.jsonl.gz", "test.jsonl"),
            ("corpus", "corpus"): ("corpus.jsonl.gz", "corpus.jsonl"),
        },
    ),
}
# Repos fetched as raw files unless they hold Parquet files: their Hub copies are script-based
# (the BeIR org has converted some of its repos to Parquet, e.g. BeIR/nfcorpus and BeIR/fever).
SCRIPT_BASED = ("hgissbkh/ontonotes5", "BeIR/msmarco", "BeIR/nq", "BeIR/msmarco-qrels", "BeIR/nq-qrels")


def _is_script_based(snapshot: Snapshot) -> bool:
    """Raw files, converted here: a repo with a loading script at its top, or one of
    `SCRIPT_BASED` as long as it holds no Parquet file (a converted repo is read with datasets)."""
    if any("/" not in path and path.endswith(".py") for path in snapshot.files):
        return True
    return snapshot.repo_id in SCRIPT_BASED and not any(path.endswith(".parquet") for path in snapshot.files)


def _raw_files(snapshot: Snapshot, layout: RawLayout, unit: Unit) -> list[str]:
    patterns = layout.files.get((unit.config, unit.split))
    if patterns is None:
        raise FetchError(f"{unit.label()}: no raw layout known for this split of {snapshot.repo_id}")
    for pattern in patterns:
        found = sorted(p for p in snapshot.files if fnmatch.fnmatch(PurePosixPath(p).name, pattern))
        if found:
            return found if layout.kind == "tner" else found[:1]
    raise FetchError(
        f"{snapshot.repo_id}@{snapshot.sha[:12]}: no file named {' or '.join(patterns)} for "
        f"{unit.label()}; the repo holds {', '.join(sorted(snapshot.files)) or 'nothing'} "
        "(benchmarks/datasets/fetch.py RAW_LAYOUTS assumes the layout; see docs/cluster.md)"
    )


# --- repos with data files: datasets' own resolution -----------------------------------------------
def _data_file_patterns(snapshot: Snapshot, local: Path, config: str | None) -> dict[str, list[str]]:
    """split -> data-file patterns of `config`, as datasets reads them: the README's `configs`
    (MetadataConfigs), else the default split patterns over the repo."""
    from datasets.data_files import get_data_patterns, sanitize_patterns
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    if "README.md" in snapshot.files:
        download(snapshot, ["README.md"], local)
        configs = MetadataConfigs.from_dataset_card_data(DatasetCard.load(local / "README.md").data)
        if configs:
            name = config or ("default" if "default" in configs else next(iter(configs)))
            if name not in configs:
                raise FetchError(
                    f"{snapshot.repo_id}@{snapshot.sha[:12]}: no config {name!r} in its README "
                    f"(configs: {', '.join(configs)})"
                )
            return sanitize_patterns(configs[name]["data_files"])
    return get_data_patterns(_hf_base(snapshot))


def _hf_base(snapshot: Snapshot) -> str:
    return f"hf://datasets/{snapshot.repo_id}@{snapshot.sha}"


def _data_files(snapshot: Snapshot, local: Path, unit: Unit) -> list[str]:
    """Repo paths of the data files of one split (datasets' pattern resolution, on the Hub)."""
    from datasets.data_files import DataFilesDict

    patterns = _data_file_patterns(snapshot, local, unit.config)
    if unit.split not in patterns:
        raise FetchError(
            f"{snapshot.repo_id}@{snapshot.sha[:12]} (config {unit.config_dir}): no split {unit.split!r} "
            f"(splits: {', '.join(patterns)})"
        )
    try:
        resolved = DataFilesDict.from_patterns({unit.split: patterns[unit.split]}, base_path=_hf_base(snapshot))
    except Exception as exc:  # noqa: BLE001 - datasets' resolution failed on the Hub
        raise HubError(f"{snapshot.repo_id}: resolving the {unit.label()} files failed: {exc}") from exc
    prefix = _hf_base(snapshot) + "/"
    return sorted(str(url)[len(prefix) :] for url in resolved[unit.split])


_BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv", ".tsv": "csv", ".arrow": "arrow"}


def _builder(paths: Sequence[str]) -> tuple[str, dict]:
    suffixes = {next((s for s in _BUILDERS if p.endswith(s) or p.endswith(s + ".gz")), None) for p in paths}
    if len(suffixes) != 1 or None in suffixes:
        raise FetchError(f"data files of mixed or unknown types: {', '.join(paths)}")
    suffix = suffixes.pop()
    return _BUILDERS[suffix], ({"sep": "\t"} if suffix == ".tsv" else {})


def _schema_differences(unit: Unit, features) -> list[str]:
    """How the fetched features differ from benchmarks/datasets/schemas.py (which was partly
    inferred: docs/benchmarks.md, "Facts inferred, not read")."""
    from benchmarks.datasets.schemas import HUB_SCHEMAS

    schema = HUB_SCHEMAS.get((unit.hub_id, unit.config))
    if schema is None:
        return []
    out = []
    for name, feature in schema.features.items():
        if name not in features:
            out.append(f"column {name!r} missing")
        elif repr(features[name]) != repr(feature):
            out.append(f"column {name!r} is {features[name]!r}, the schema says {feature!r}")
    return out


# --- writing the mirror ---------------------------------------------------------------------------
def _target(root: Path, unit: Unit, suffix: str) -> Path:
    return root / unit.hub_id / unit.config_dir / f"{unit.split}{suffix}"


def _install(root: Path, unit: Unit, suffix: str, write: Callable[[Path], None]) -> Path:
    """Write the unit's mirror file aside, rename it in place, and remove the same split under the
    other suffixes (the loader takes the first suffix it finds)."""
    target = _target(root, unit, suffix)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.partial")
    tmp.unlink(missing_ok=True)
    try:
        write(tmp)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    for other in MIRROR_SUFFIXES:
        if other != suffix:
            _target(root, unit, other).unlink(missing_ok=True)
    return target


def _link_or_copy(src: Path) -> Callable[[Path], None]:
    def write(tmp: Path) -> None:
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)

    return write


def _count_rows(path: Path) -> int:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        rows = sum(1 for line in handle if line.strip())
    return rows - 1 if path.name.endswith(".tsv") else rows  # the header row


def _tner_rows(paths: Sequence[Path], label_file: Path | None, unit: Unit):
    """tner-style OntoNotes rows with tags renumbered to the order of ONTONOTES5_TAGS."""
    index = {name: i for i, name in enumerate(ONTONOTES5_TAGS)}
    by_id = None
    if label_file is not None:
        try:
            label2id = json.loads(read_text(label_file, SMALL))
        except BoundedReadError as exc:
            raise FetchError(f"{exc} ({label_file.name} of {unit.hub_id})") from None
        unknown = sorted(set(label2id) - set(index))
        if unknown:
            raise FetchError(f"{label_file.name} of {unit.hub_id}: tags {unknown[:5]} are not OntoNotes tner tags")
        by_id = {int(i): index[name] for name, i in label2id.items()}
    for path in paths:
        text = path.read_text(encoding="utf-8")
        rows = (
            json.loads(text)
            if text.lstrip().startswith("[")
            else (json.loads(x) for x in text.splitlines() if x.strip())
        )
        for row in rows:
            tags = row["tags"]
            if tags and isinstance(tags[0], str):
                tags = [index[t] for t in tags]
            elif by_id is not None:
                tags = [by_id[int(t)] for t in tags]
            else:
                raise FetchError(
                    f"{unit.label()}: integer tags but no {RAW_LAYOUTS[unit.hub_id].label_file} in the repo"
                )
            yield {"tokens": row["tokens"], "tags": tags}


def _write_jsonl(rows: Iterable[dict]) -> Callable[[Path], None]:
    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")

    return write


def _convert_raw(root: Path, snapshot: Snapshot, local: Path, unit: Unit, files: list[str]) -> tuple[Path, list[str]]:
    layout = RAW_LAYOUTS[snapshot.repo_id]
    if layout.kind == "copy":
        src = local / files[0]
        suffix = next((s for s in MIRROR_SUFFIXES if src.name.endswith(s)), None)
        if suffix is None:
            raise FetchError(f"{snapshot.repo_id}: {files[0]} is not one of {', '.join(MIRROR_SUFFIXES)}")
        return _install(root, unit, suffix, _link_or_copy(src)), []
    label = next((p for p in snapshot.files if PurePosixPath(p).name == layout.label_file), None)
    rows = _tner_rows([local / f for f in files], local / label if label else None, unit)
    return _install(root, unit, ".jsonl", _write_jsonl(rows)), []


def _convert_data_files(root: Path, local: Path, unit: Unit, files: list[str], cache: Path) -> tuple[Path, list[str]]:
    import datasets

    builder, kwargs = _builder(files)
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        ds = datasets.load_dataset(
            builder,
            data_files={unit.split: [str(local / f) for f in files]},
            split=unit.split,
            cache_dir=str(cache),
            **kwargs,
        )
        target = _install(root, unit, ".parquet", lambda tmp: ds.to_parquet(str(tmp)))
    finally:
        if bars:
            datasets.enable_progress_bars()
    return target, _schema_differences(unit, ds.features)


# --- the manifest -----------------------------------------------------------------------------------
def read_manifest(root: Path) -> dict | None:
    path = Path(root) / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        manifest = json.loads(read_text(path, LARGE))  # lists every file of the mirror
    except BoundedReadError as exc:
        raise FetchError(f"{exc}; remove it and fetch again") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise FetchError(f"{path}: not valid JSON ({exc}); remove it and fetch again") from None
    if manifest.get("format") != FORMAT:
        raise FetchError(f"{path}: not a fetch-data manifest (format {manifest.get('format')!r})")
    return manifest


def _entry_of(manifest: dict, unit: Unit) -> tuple[str, dict] | None:
    for rel, entry in manifest.get("mirror", {}).items():
        if (entry["hub_id"], entry["config"], entry["split"]) == (unit.hub_id, unit.config_dir, unit.split):
            return rel, entry
    return None


def _unit_present(root: Path, manifest: dict, unit: Unit, requested: str | None) -> bool:
    found = _entry_of(manifest, unit)
    if found is None:
        return False
    rel, entry = found
    source = manifest["sources"].get(unit.hub_id, {})
    if requested is not None and requested not in (source.get("requested"), source.get("revision")):
        return False
    try:  # a name read from the manifest: the containment rule (issue 78); an unsafe one is no file of ours
        path = contained(root, rel, f"{root / MANIFEST_FILE}: mirror")
    except UnsafeNameError:
        return False
    # the sha256 too: a file changed in place (same size) is fetched again, not "up to date"
    return path.is_file() and path.stat().st_size == entry["bytes"] and sha256_file(path) == entry["sha256"]


def _write_manifest(root: Path, manifest: dict) -> None:
    manifest["tasks"] = {}
    for name in manifest.get("requested_tasks", []):
        rels = [_entry_of(manifest, u) for u in task_units(get_task(name))]
        if all(rels):
            manifest["tasks"][name] = [rel for rel, _ in rels]
    manifest["updated"] = utc_now()
    atomic_write_json(root / MANIFEST_FILE, manifest)


# --- fetch ----------------------------------------------------------------------------------------------
_SPACE_FACTOR = {"copy": 1.1, "tner": 2.2, "datasets": 3.5}  # download + conversion (+ datasets' Arrow cache)


def fetch_data(
    out: str | os.PathLike,
    tasks: Sequence[str],
    revisions: dict[str, str] | None = None,
    keep_downloads: bool = False,
    log: Callable[[str], None] = print,
) -> dict:
    """Fetch `tasks` into the mirror `out` (see the module docstring); returns the manifest.
    NQ and MLDR bring MS MARCO: their runs evaluate the model MS MARCO's runs train."""
    root = Path(out).absolute()
    revisions = dict(revisions or {})
    tasks = with_ir_training(tasks)  # checks the task names first
    groups = units_of(tasks)
    unknown = sorted(set(revisions) - set(groups))
    if unknown:
        raise FetchError(
            f"--revision for {', '.join(unknown)}: no task asked for reads it (repos: {', '.join(groups)})"
        )
    check_writable(root)
    manifest = read_manifest(root) or {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "sources": {},
        "mirror": {},
        "requested_tasks": [],
        "created": utc_now(),
    }
    manifest["requested_tasks"] = list(dict.fromkeys([*manifest.get("requested_tasks", []), *tasks]))
    manifest["code"] = {"git_sha": git_sha(), "package_versions": package_versions(("datasets", "huggingface-hub"))}
    for hub_id, units in groups.items():
        requested = revisions.get(hub_id)
        todo = [u for u in units if not _unit_present(root, manifest, u, requested)]
        if not todo:
            log(f"fetch-data: {hub_id}: up to date (revision {manifest['sources'][hub_id]['revision'][:12]})")
            continue
        try:
            _fetch_repo(root, manifest, hub_id, todo, requested or "main", keep_downloads, log)
        except Exception as exc:
            full = disk_full_cause(exc)
            if full is not None and not isinstance(exc, DiskFullError):
                raise DiskFullError(
                    full.errno,
                    f"{full.filename or root}: no space left on the device while fetching {hub_id}; the finished "
                    "repos are kept: free space and rerun (downloads resume)",
                ) from exc
            if isinstance(exc, PermissionError) or getattr(exc, "errno", None) == errno.EROFS:
                raise FetchError(  # a folder inside --out that turned read-only, a file of another user
                    f"{exc.filename or root}: cannot write there ({exc.strerror}) while fetching {hub_id}; the "
                    "finished repos are kept: make it writable (or choose another --out) and rerun"
                ) from exc
            raise
        _write_manifest(root, manifest)
    _write_manifest(root, manifest)
    return manifest


def _fetch_repo(root: Path, manifest: dict, hub_id: str, units: list[Unit], requested: str, keep: bool, log) -> None:
    snapshot = resolve(hub_id, "dataset", requested)
    local = root / DOWNLOADS_DIR / hub_id
    raw = _is_script_based(snapshot)
    if raw and hub_id not in RAW_LAYOUTS:
        scripts = [p for p in snapshot.files if "/" not in p and p.endswith(".py")]
        raise FetchError(
            f"{hub_id}@{snapshot.sha[:12]} is script-based ({', '.join(scripts)}) and datasets >= 4 cannot run it; "
            "no raw layout is known for it (benchmarks/datasets/fetch.py RAW_LAYOUTS)"
        )
    method = RAW_LAYOUTS[hub_id].kind if raw else "datasets"
    plan = {
        u: (_raw_files(snapshot, RAW_LAYOUTS[hub_id], u) if raw else _data_files(snapshot, local, u)) for u in units
    }
    needed = list(dict.fromkeys(f for files in plan.values() for f in files))
    if raw and RAW_LAYOUTS[hub_id].label_file:
        needed += [p for p in snapshot.files if PurePosixPath(p).name == RAW_LAYOUTS[hub_id].label_file][:1]
    remaining, have = bytes_to_download(snapshot, needed, local)
    log(
        f"fetch-data: {hub_id}@{snapshot.sha[:12]} ({method}): {len(needed)} files, "
        f"{remaining / 1e6:.1f} MB to download -> {', '.join(u.label() for u in units)}"
    )
    # what is left to download, and the conversion of all of it (what is downloaded already counts)
    conversion = (remaining + have) * (_SPACE_FACTOR[method] - 1)
    check_free_space(root, int(remaining + conversion), f"fetching {hub_id}", have)
    download(snapshot, needed, local)
    source = manifest["sources"].setdefault(hub_id, {"files": {}})
    if source.get("revision") not in (None, snapshot.sha):  # another revision: its units are refetched
        manifest["mirror"] = {k: v for k, v in manifest["mirror"].items() if v["hub_id"] != hub_id}
        source["files"] = {}
    source.update(repo_type="dataset", requested=requested, revision=snapshot.sha, method=method, fetched=utc_now())
    for path in needed:
        remote = snapshot.files[path]
        source["files"][path] = {"bytes": remote.size, "sha256": remote.sha256, "git_sha1": remote.git_sha1}
    cache = root / DOWNLOADS_DIR / ".datasets-cache"
    for unit in units:
        if raw:
            target, differences = _convert_raw(root, snapshot, local, unit, plan[unit])
        else:
            target, differences = _convert_data_files(root, local, unit, plan[unit], cache)
        rel = target.relative_to(root).as_posix()
        found = _entry_of(manifest, unit)
        if found:
            manifest["mirror"].pop(found[0])
        manifest["mirror"][rel] = {
            "hub_id": hub_id,
            "config": unit.config_dir,
            "split": unit.split,
            "from": plan[unit],
            "rows": _rows(target),
            "bytes": target.stat().st_size,
            "sha256": sha256_file(target),
        }
        for line in differences:
            log(f"fetch-data: warning: {unit.label()}: {line}")
        if differences:
            manifest["mirror"][rel]["schema_differences"] = differences
        log(f"fetch-data: {rel}: {manifest['mirror'][rel]['rows']} rows")
    if not keep:
        shutil.rmtree(local, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
        for folder in [*local.parents][: len(local.relative_to(root).parts) - 1]:  # empty parents, .downloads too
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()


def _rows(path: Path) -> int:
    if path.name.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    return _count_rows(path)


# --- checks ---------------------------------------------------------------------------------------------
def check_mirror(root: str | os.PathLike, tasks: Sequence[str] | None = None, hashes: bool = True) -> list[str]:
    """Problems of a mirror against its manifest (offline), one line each; [] when it verifies.

    `tasks` limits the check to their files (default: every file the manifest lists); `hashes=False`
    checks presence and sizes only (the fast check before submitting jobs)."""
    root = Path(root)
    manifest = read_manifest(root)
    if manifest is None:
        fix = f"python -m benchmarks fetch-data --out {root}"
        return [f"{root}: no {MANIFEST_FILE}: not a fetch-data mirror (write one with `{fix}`)"]
    problems, wanted = [], None
    if tasks is None:  # the tasks a fetch was asked for and did not finish
        for name in manifest.get("requested_tasks", []):
            if name not in manifest.get("tasks", {}):
                fix = f"python -m benchmarks fetch-data --out {root} --tasks {name}"
                problems.append(f"{root}: task {name} was asked for but is incomplete (a fetch stopped): `{fix}`")
    else:
        wanted = set()
        for name in with_ir_training(tasks):
            if name not in manifest.get("tasks", {}):
                fix = f"python -m benchmarks fetch-data --out {root} --tasks {name}"
                problems.append(f"{root}: task {name} is not in this mirror: `{fix}`")
            else:
                wanted.update(manifest["tasks"][name])
    entries = {rel: e for rel, e in manifest.get("mirror", {}).items() if wanted is None or rel in wanted}
    return problems + check_files(root, entries, hashes)


def mirror_problems(
    root: str | os.PathLike | None, tasks: Sequence[str], hashes: bool = False, given_as: str = "--data-root"
) -> list[str]:
    """What the offline jobs of `tasks` would miss in the mirror `root` (preflight): with a
    manifest, `check_mirror`; a mirror without one (laid out by hand, the toy mirror) must hold a
    file for every split the tasks read. `given_as` says where the mirror is named (the fix)."""
    from benchmarks.datasets.loading import mirror_path

    tasks = sorted({get_task(t).name for t in tasks}, key=list(TASKS).index)  # in the paper's order
    fix = f"python -m benchmarks fetch-data --out {root or 'DIR'} --tasks {','.join(tasks)}"
    if root is None:
        return [
            "no task data: the jobs run offline (HF_HUB_OFFLINE=1) and cannot read the Hub; fetch a mirror "
            f"with `{fix}` and give it as {given_as}"
        ]
    if not Path(root).is_dir():
        return [f"task data {root} does not exist: fetch it with `{fix}`"]
    if read_manifest(root) is not None:
        return check_mirror(root, tasks, hashes=hashes)
    problems = []
    for name in tasks:
        for unit in task_units(get_task(name)):
            source = HubSource(unit.hub_id, unit.config)
            if mirror_path(Path(root), source, unit.split) is None:
                problems.append(f"task data {root}: no file for {unit.label()} (task {name}): fetch it with `{fix}`")
    return problems
