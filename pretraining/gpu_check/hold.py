"""A Composer callback for the GPU check's resume test: stop a real `pretraining train` at a known
step so that it can be killed there, and report the run's peak GPU memory.

Killing a run "somewhere after its checkpoint" by watching its log races the run on a fast GPU;
holding it at the end of step `hold_at` (after its loss line is written) makes the kill land at
the same step on every machine. The hold happens once: it writes `marker` first, and a run that
finds the marker (the resumed one) goes on.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import torch
from composer import Callback
from composer.utils import dist

from contracts.provenance import atomic_write_text


class HoldAt(Callback):
    def __init__(self, marker: str, report: str, hold_at: int | None = None):
        self.marker, self.report, self.hold_at = Path(marker), Path(report), hold_at
        self.started_at = 0

    def fit_start(self, state, logger) -> None:
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        self.started_at = int(state.timestamp.batch.value)  # > 0: the step this run resumed from

    def batch_end(self, state, logger) -> None:
        step = int(state.timestamp.batch.value)
        if self.hold_at is None or step != self.hold_at or self.marker.exists() or dist.get_global_rank() != 0:
            return
        self._write_report(step)  # what the killed run reached, before it is killed
        atomic_write_text(self.marker, json.dumps({"pid": os.getpid(), "step": step}))
        threading.Event().wait()  # until the GPU check kills this process (SIGKILL: no cleanup)

    def fit_end(self, state, logger) -> None:
        if dist.get_global_rank() == 0:
            self._write_report(int(state.timestamp.batch.value))

    def _write_report(self, step: int) -> None:
        peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None
        body = {"started_at": self.started_at, "step": step, "peak_gpu_memory_gib": peak}
        atomic_write_text(self.report, json.dumps(body))
