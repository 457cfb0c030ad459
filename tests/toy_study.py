"""One finished toy study per pytest run (issue 77): the reduced toy reproduction of Figure 3
(`python -m reproduce --reduced`: toy_s MLM-20, MLM-40 and CLM pretrained 250 steps on the toy
world, and the untrained toy_s, x 12 tasks x 1 LR x 1 seed = 48 fine-tuning runs), built by the
session fixture `toy_study` (tests/conftest.py) and never changed. A test that changes a study
works on `copy_toy_study(toy_study, folder)`. tests/conftest.py puts every module that uses it in
one xdist group, so a run builds it once."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path


def build_toy_study(folder: Path) -> tuple:
    """(config, out folder, stage timings, log lines) of the reduced reproduction into `folder`."""
    from reproduce import cli, local

    cfg = cli.config_from_args(cli.build_parser().parse_args(["--out", str(folder), "--reduced", "--reps", "200"]))
    lines: list[str] = []
    timings = local.reproduce(cfg, log=lines.append)
    return cfg, folder, timings, lines


def copy_toy_study(study: tuple, folder: Path) -> tuple:
    """(config, out) of a copy of the finished study in `folder` (links copied as links)."""
    cfg, out, _, _ = study
    shutil.copytree(out, folder, symlinks=True)
    return dataclasses.replace(cfg, out=str(folder)), folder
