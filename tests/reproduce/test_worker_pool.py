"""The reproduction's shared worker pool: on a new output folder it starts before the data stage, so
that its workers import torch, Composer and transformers while that stage runs (docs/timings.md)."""

from reproduce import cli, local, plan
from reproduce import workers as pool_module


class _FakePool:
    def close(self):
        pass

    def join(self):
        pass

    def terminate(self):
        pass


def _run(tmp_path, monkeypatch, workers):
    cfg = cli.config_from_args(
        cli.build_parser().parse_args(["--out", str(tmp_path), "--reduced", "--workers", str(workers)])
    )
    events = []

    def new_pool(cfg, initializer=pool_module._init_worker):
        events.append(("pool", initializer.__name__))
        return _FakePool()

    def stage(name):
        return lambda cfg: events.append(name) or f"{name}: done"

    monkeypatch.setattr(pool_module, "_new_pool", new_pool)
    monkeypatch.setattr(local, "_check_reuse", lambda cfg, stages: None)
    monkeypatch.setattr(local, "STAGES", tuple((name, stage(name)) for name in ("data", "pretraining")))
    local.reproduce(cfg, log=lambda line: None, stages=("data", "pretraining"))
    return cfg, events


def test_a_new_folder_starts_the_workers_before_the_data_stage(tmp_path, monkeypatch):
    _, events = _run(tmp_path, monkeypatch, workers=2)
    assert events == [("pool", "_init_shared_worker"), "data", "pretraining"]


def test_prepared_data_or_one_worker_start_no_pool_early(tmp_path, monkeypatch):
    from pretraining.data.format import MANIFEST

    cfg, _ = _run(tmp_path / "one", monkeypatch, workers=1)
    _, events = _run(tmp_path / "one", monkeypatch, workers=1)
    assert events == ["data", "pretraining"]  # one worker: runs go in this process
    prepared = tmp_path / "prepared"
    cfg, _ = _run(prepared, monkeypatch, workers=2)
    plan.data_dir(cfg).mkdir(parents=True, exist_ok=True)
    (plan.data_dir(cfg) / MANIFEST).write_text("{}")
    _, events = _run(prepared, monkeypatch, workers=2)
    assert events == ["data", "pretraining"]  # a rerun: the pool waits for a stage that maps
