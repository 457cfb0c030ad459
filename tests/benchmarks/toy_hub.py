"""The committed toy mirror (benchmarks/datasets/toy) laid out as the Hub serves it, for tests that
fetch it from tests.hub_server: parquet repos with `configs` in their README (as push_to_hub
writes them; GLUE with a config whose files are never fetched), and the script-based repos as raw
files beside their loading script: BeIR corpus/queries `.jsonl.gz` and qrels `.tsv` (dev.tsv),
OntoNotes as tner's `dataset/train00.json ... label.json` with a label.json in another id order
than ours (so the conversion must renumber the tags)."""

from __future__ import annotations

import base64
import gzip
import io
import json
import random
from pathlib import Path

from benchmarks.datasets import TOY_DATA_ROOT
from benchmarks.datasets.schemas import schema_of
from benchmarks.tasks import ONTONOTES5_TAGS


def _rows(hub_id: str, config_dir: str, split: str) -> list[dict]:
    path = TOY_DATA_ROOT / hub_id / config_dir / f"{split}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _parquet(rows: list[dict], hub_id: str, config: str | None) -> bytes:
    from datasets import Dataset

    features = schema_of(hub_id, config).features
    columns = list(rows[0])
    ds = Dataset.from_list(rows, features=type(features)({c: features[c] for c in columns}))
    buffer = io.BytesIO()
    ds.to_parquet(buffer)
    return buffer.getvalue()


def _readme(configs: dict[str, dict[str, str]]) -> str:
    lines = ["---", "configs:"]
    for name, splits in configs.items():
        lines += [f"- config_name: {name}", "  data_files:"]
        lines += [f"  - split: {split}\n    path: {path}" for split, path in splits.items()]
    return "\n".join(lines + ["---", "# toy", ""])


def _gz(text: str) -> bytes:
    return gzip.compress(text.encode(), mtime=0)


def _jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _tsv(rows) -> str:
    return "query-id\tcorpus-id\tscore\n" + "".join(f"{r['query-id']}\t{r['corpus-id']}\t{r['score']}\n" for r in rows)


def parquet_repo(hub_id: str, layout: dict[str | None, dict[str, str]]) -> dict[str, bytes | str]:
    """{config: {split: repo path}} -> the repo's files (README configs + one parquet file per split)."""
    files: dict[str, bytes | str] = {}
    configs = {}
    for config, splits in layout.items():
        configs[config or "default"] = {s: p.replace("00000-of-00001", "*") for s, p in splits.items()}
        for split, path in splits.items():
            files[path] = _parquet(_rows(hub_id, config or "default", split), hub_id, config)
    files["README.md"] = _readme(configs)
    return files


def toy_hub(big_nq_corpus_bytes: int = 0) -> dict[tuple[str, str], dict[str, bytes | str]]:
    """(repo type, repo id) -> files. `big_nq_corpus_bytes` pads BeIR/nq's corpus.jsonl.gz with
    incompressible documents (ids `pad*`, judged by no query) to at least that size."""
    import datasets

    datasets.disable_progress_bars()
    repos: dict[tuple[str, str], dict] = {}
    glue = {
        c: {s: f"{c}/{s}-00000-of-00001.parquet" for s in splits}
        for c, splits in {
            "sst2": ("train", "validation", "test"),
            "qqp": ("train", "validation", "test"),
            "mnli": ("train", "validation_matched", "validation_mismatched", "test_matched", "test_mismatched"),
        }.items()
    }
    repos["dataset", "nyu-mll/glue"] = parquet_repo("nyu-mll/glue", glue)
    # a config whose files are never fetched (datasets must not need them)
    repos["dataset", "nyu-mll/glue"]["README.md"] = repos["dataset", "nyu-mll/glue"]["README.md"].replace(
        "configs:\n", "configs:\n- config_name: cola\n  data_files:\n  - split: train\n    path: cola/train-*\n", 1
    )
    for hub_id, splits in {
        "hgissbkh/conll2003-en": ("train", "validation", "test"),
        "hgissbkh/uner_en": ("train", "validation", "test"),
        "hgissbkh/record": ("train", "validation"),
        "hgissbkh/msmarco-pairs": ("train",),
    }.items():
        repos["dataset", hub_id] = parquet_repo(hub_id, {None: {s: f"data/{s}-00000-of-00001.parquet" for s in splits}})
    repos["dataset", "rajpurkar/squad"] = parquet_repo(
        "rajpurkar/squad",
        {"plain_text": {s: f"plain_text/{s}-00000-of-00001.parquet" for s in ("train", "validation")}},
    )
    repos["dataset", "rajpurkar/squad_v2"] = parquet_repo(
        "rajpurkar/squad_v2", {"squad_v2": {s: f"squad_v2/{s}-00000-of-00001.parquet" for s in ("train", "validation")}}
    )
    repos["dataset", "hgissbkh/mldr-en"] = parquet_repo(
        "hgissbkh/mldr-en",
        {
            "default": {s: f"data/{s}-00000-of-00001.parquet" for s in ("dev", "test")},
            "corpus": {"corpus": "corpus/corpus-00000-of-00001.parquet"},
        },
    )
    # script-based repos: raw files + the script datasets >= 4 refuses to run
    for name in ("msmarco", "nq"):
        corpus = _jsonl(_rows(f"BeIR/{name}", "corpus", "corpus"))
        if name == "nq" and big_nq_corpus_bytes:
            rng = random.Random(0)
            pad, size = [], len(_gz(corpus))
            while size < big_nq_corpus_bytes:  # base64 text: about 0.75 bytes of gzip per character
                more = int((big_nq_corpus_bytes - size) / 0.74 / 1000) + 1
                pad += [
                    {"_id": f"pad{len(pad) + i}", "title": "", "text": base64.b64encode(rng.randbytes(750)).decode()}
                    for i in range(more)
                ]
                size = len(_gz(corpus + _jsonl(pad)))
            corpus += _jsonl(pad)
        repos["dataset", f"BeIR/{name}"] = {
            f"{name}.py": "# loading script (datasets < 4)\n",
            "README.md": f"# BeIR {name}\n",
            "corpus.jsonl.gz": _gz(corpus),
            "queries.jsonl.gz": _gz(_jsonl(_rows(f"BeIR/{name}", "queries", "queries"))),
        }
    repos["dataset", "BeIR/msmarco-qrels"] = {
        "README.md": "# qrels\n",
        **{
            f"{'dev' if s == 'validation' else s}.tsv": _tsv(_rows("BeIR/msmarco-qrels", "default", s))
            for s in ("train", "validation", "test")
        },
    }
    repos["dataset", "BeIR/nq-qrels"] = {
        "README.md": "# qrels\n",
        "test.tsv": _tsv(_rows("BeIR/nq-qrels", "default", "test")),
    }
    # OntoNotes as tner ships it, with label ids in reverse order of ours
    theirs = {name: len(ONTONOTES5_TAGS) - 1 - i for i, name in enumerate(ONTONOTES5_TAGS)}

    def tner(split: str) -> list[dict]:
        return [
            {"tokens": r["tokens"], "tags": [theirs[ONTONOTES5_TAGS[t]] for t in r["tags"]]}
            for r in _rows("hgissbkh/ontonotes5", "default", split)
        ]

    train = tner("train")
    half = len(train) // 2
    repos["dataset", "hgissbkh/ontonotes5"] = {
        "ontonotes5.py": "# loading script (datasets < 4)\n",
        "dataset/train00.json": _jsonl(train[:half]),
        "dataset/train01.json": _jsonl(train[half:]),
        "dataset/valid.json": _jsonl(tner("validation")),
        "dataset/test.json": _jsonl(tner("test")),
        "dataset/label.json": json.dumps(theirs),
    }
    return repos


def serve(hub, repos) -> None:
    for (repo_type, repo_id), files in repos.items():
        hub.add(repo_type, repo_id, files)


def model_repo(folder: Path) -> dict[str, bytes]:
    """The files of a saved model folder, as a Hub model repo."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
