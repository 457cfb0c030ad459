import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from contracts.config import ConfigError, load_config, save_resolved_config
from contracts.provenance import atomic_write_text, stable_hash


@dataclass(frozen=True)
class Optim:
    lr: float = 5e-4
    betas: tuple[float, ...] = (0.9, 0.95)


@dataclass(frozen=True)
class Run:
    name: str
    steps: int = 10
    optim: Optim = field(default_factory=Optim)
    data: Path | None = None


def test_yaml_with_overrides_becomes_frozen_dataclass(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("name: a\noptim:\n  lr: 1e-3\n")
    cfg = load_config(Run, path, ["steps=20", "optim.betas=[0.8, 0.9]", "data=/x"])
    assert cfg == Run("a", 20, Optim(1e-3, (0.8, 0.9)), Path("/x"))
    with pytest.raises(AttributeError):
        cfg.steps = 3  # frozen


@pytest.mark.parametrize(
    "text, message",
    [
        ("name: a\noptim:\n  lrr: 1\n", r"run.yaml.optim.lrr: unknown key"),
        ("steps: 3\n", r"run.yaml.name: missing required key"),
        ("name: a\nsteps: many\n", r"run.yaml.steps: expected int"),
    ],
)
def test_config_errors_name_file_and_field(tmp_path, text, message):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(Run, path)


def test_resolved_config_is_saved_with_provenance(tmp_path):
    out = save_resolved_config(Run("a"), tmp_path)
    saved = yaml.safe_load(out.read_text())
    assert saved["config"]["optim"]["betas"] == [0.9, 0.95]
    assert saved["config_hash"] == stable_hash(saved["config"])
    assert "torch" in saved["package_versions"]


def test_a_full_disk_is_an_error_naming_the_file_and_leaves_the_old_file(tmp_path, monkeypatch):
    import errno

    from contracts import provenance

    target = atomic_write_text(tmp_path / "record.json", "complete")

    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(provenance.os, "fsync", no_space)
    with pytest.raises(provenance.DiskFullError, match=f"{target}: not written, no space left on the device"):
        atomic_write_text(target, "new")
    assert target.read_text() == "complete" and [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_atomic_write_leaves_no_temp_files(tmp_path):
    target = atomic_write_text(tmp_path / "sub" / "f.txt", "x")
    assert target.read_text() == "x"
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]
    umask = os.umask(0o022)
    try:
        assert stat.S_IMODE(atomic_write_text(tmp_path / "g.txt", "y").stat().st_mode) == 0o644
    finally:
        os.umask(umask)


def _one_line(exc_info) -> str:
    message = str(exc_info.value)
    assert "\n" not in message, message
    return message


def test_a_broken_config_file_is_one_line_naming_it_and_where(tmp_path):
    """Issue 35 item 14: PyYAML's message spans four lines; a folder given as the config was a
    traceback (IsADirectoryError)."""
    broken = tmp_path / "run.yaml"
    broken.write_text("name: a\noptim: [1,\n")
    with pytest.raises(ConfigError) as caught:
        load_config(Run, broken)
    assert _one_line(caught).startswith(f"{broken}: not valid YAML: ") and "at line 3, column 1" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        load_config(Run, tmp_path)
    assert _one_line(caught) == f"{tmp_path}: not a file; give a YAML config file"


def test_a_python_tag_in_an_override_is_refused_in_one_line_and_never_run(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("name: a\n")
    marker = tmp_path / "ran"
    override = f'steps=!!python/object/apply:os.system ["touch {marker}"]'
    with pytest.raises(ConfigError) as caught:
        load_config(Run, path, [override])
    assert _one_line(caught).startswith(f"override {override!r}: the value is not plain YAML (could not determine")
    assert not marker.exists()


def test_a_huge_or_deeply_nested_config_is_one_line(tmp_path):
    """Issue 56: a 200 MB YAML config was parsed with no cap (no answer in 10 minutes), a
    100,000-deep one gave a RecursionError traceback of thousands of lines."""
    from contracts.config import CONFIG_BYTES_LIMIT, ConfigError, read_yaml_mapping

    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 100_000 + "]" * 100_000)
    big = tmp_path / "big.yaml"
    big.write_text("a: 1\n" + "#" * CONFIG_BYTES_LIMIT)
    for path, message in ((deep, "nested too deeply"), (big, "more than the 8,388,608")):
        with pytest.raises(ConfigError, match=message) as caught:
            read_yaml_mapping(path)
        assert str(path) in str(caught.value) and "\n" not in str(caught.value)
