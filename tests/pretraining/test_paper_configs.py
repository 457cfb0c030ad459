"""The 50 paper configs are pinned: every setting is written out, and a golden file holds them all.

A changed default of the config classes (pretraining/config.py, pretraining/data/config.py) must not
change a paper run silently. If a change to a paper run is intended, rewrite the golden file with
`python -m tests.pretraining.test_paper_configs` and review its diff.
"""

import sys
from pathlib import Path

import pytest
import yaml

from contracts.config import config_from_dict, config_to_dict
from pretraining import registry
from pretraining.config import PretrainConfig, run_identity

GOLDEN = Path(__file__).parent / "fixtures" / "paper_configs.yaml"


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def written(name: str) -> dict:
    run, _ = registry.run_for(name)
    return _flat(registry.config_dict(run, "paper"))


def resolved(name: str) -> dict:
    """The resolved config without `loggers` and `monitor`: they change what a run shows, not the run
    (pretraining.config.WATCH_SECTIONS; docs/watching.md)."""
    run, _ = registry.run_for(name)
    return _flat(
        run_identity(config_to_dict(config_from_dict(PretrainConfig, registry.config_dict(run, "paper"), name)))
    )


def golden_document() -> dict:
    """{common: settings equal in all 50 configs, configs: name -> the settings that differ}."""
    configs = {name: resolved(name) for name in sorted(registry.released_checkpoints())}
    first = next(iter(configs.values()))
    common = {k: v for k, v in first.items() if all(c.get(k, object()) == v for c in configs.values())}
    rest = {name: {k: v for k, v in c.items() if k not in common} for name, c in configs.items()}
    return {"common": common, "configs": rest}


def test_golden_file_holds_the_50_paper_configs():
    golden = yaml.safe_load(GOLDEN.read_text())
    assert len(golden["configs"]) == 50
    for key in ("data.windows", "data.min_window", "model.attention_scope", "optimizer.no_decay"):
        assert key in golden["common"], key  # the settings the issue named are pinned
    assert golden == golden_document(), (
        "a paper config changed; if intended, run `python -m tests.pretraining.test_paper_configs` and review the diff"
    )


@pytest.mark.parametrize("name", ["610m-mlm40-42k", "610m-clm-10k-mlm40-42k", "610m-clm-dec42k-mlm40-64k"])
def test_every_setting_is_written_out(name):
    assert written(name) == resolved(name)  # same keys (nothing left to a default) and same values


if __name__ == "__main__":
    from contracts.provenance import atomic_write_text

    atomic_write_text(GOLDEN, yaml.safe_dump(golden_document(), sort_keys=True))
    print(f"wrote {GOLDEN}", file=sys.stderr)
