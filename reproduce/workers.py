"""The local executor's processes (reproduce/local.py): the worker pool a reproduction's stages
share (spawned once, each worker importing torch, Composer and transformers once), the functions the
workers run (one pretraining run, a chunk of fine-tuning jobs), `_map` with its progress bar, and the
interrupt handling that ends a reproduction with one line and its workers with it."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from contracts.config import config_from_dict
from contracts.layout import FINISHED_FILE, export_dir
from reproduce.plan import (
    ReproduceConfig,
)

TRAIN_LOG = "train.log"  # in each pretraining run folder: what its training printed


def _init_worker(threads: int) -> None:
    """Before a process (a pool worker, or this one with --workers 1) runs pretraining or fine-tuning."""
    import torch

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    torch.set_num_threads(threads)
    import logging

    logging.getLogger("composer").setLevel(logging.ERROR)
    _keep_signal_handlers_over_composer()


def _keep_signal_handlers_over_composer() -> None:
    """Importing Composer (composer.core.engine) replaces the SIGINT and SIGTERM handlers with its
    own, which call sys.exit: in this process `reproduce` then ended without its "interrupted" line,
    and a pool worker, which ignores SIGINT, exited at a Ctrl-C. Every run imports it anyway: import
    it here and put back the handlers that were there (Interrupted here, SIGINT ignored and SIGTERM's
    default in a worker)."""
    held = (signal.SIGINT, signal.SIGTERM)
    before = {each: signal.getsignal(each) for each in held}
    import composer.core.engine  # noqa: F401

    for each, handler in before.items():
        if handler is not None:  # None: a handler not set from Python, which Composer's import leaves
            signal.signal(each, handler)


def _pretrain_one(body: dict) -> tuple[str, str]:
    from pretraining.config import PretrainConfig
    from pretraining.export import export_checkpoint
    from pretraining.train import train

    run_cfg = config_from_dict(PretrainConfig, body, f"pretraining config of {body['name']}")
    run_dir = Path(run_cfg.run_dir)
    state = "skipped" if (run_dir / FINISHED_FILE).exists() else "done"
    if state == "done":
        run_dir.mkdir(parents=True, exist_ok=True)
        # what training prints (the data budget line) goes to the run's log, not between the bars
        with open(run_dir / TRAIN_LOG, "a") as log, contextlib.redirect_stdout(log):
            train(run_cfg)
    final = export_dir(run_dir, run_cfg.train.max_steps)
    if not (final / "config.json").exists():  # written by training; redone from the last checkpoint if lost
        export_checkpoint(run_dir, final)
    return body["name"], state


def _finetune_chunk(jobs: list[dict]) -> dict[str, list[str]]:
    from benchmarks.matrix import run_local

    return run_local(jobs, progress=False)


_SHARED_POOL: dict = {}  # the worker pool of the running `reproduce`, shared by its stages (`_worker_pool`)


@contextlib.contextmanager
def _worker_pool(cfg: ReproduceConfig):
    """One pool of `cfg.workers` spawned processes for every stage of a reproduction, started when a
    stage first needs it: each worker imports torch, Composer and transformers once (seconds), not
    once per stage. Closed (or, on an error or Ctrl-C, terminated) when the reproduction ends."""
    _SHARED_POOL.clear()
    _SHARED_POOL["cfg"] = (cfg.workers, cfg.threads)
    try:
        yield
    except BaseException:
        if "pool" in _SHARED_POOL:
            _SHARED_POOL["pool"].terminate()
        raise
    else:
        if "pool" in _SHARED_POOL:
            _SHARED_POOL["pool"].close()  # let the workers exit
            _SHARED_POOL["pool"].join()
    finally:
        _SHARED_POOL.clear()


def _init_shared_worker(threads: int) -> None:
    """A shared worker imports what its runs need (torch, Composer, transformers: seconds) as it
    starts, so that a pool started before the data stage imports while that stage runs."""
    _init_worker(threads)
    import benchmarks.run  # noqa: F401
    import pretraining.train  # noqa: F401


def _in_pool_worker(initializer, threads: int, parent: int) -> None:
    """A pool worker dies with its parent (contracts.processes.die_with_parent: kill -9 of a local
    `reproduce` left its two workers training, holding run locks, issue 66) and leaves Ctrl-C to it
    (a terminal sends SIGINT to the whole foreground group: each worker would print its own traceback); the
    parent ends the workers (SIGTERM). It starts with SIGINT and SIGTERM blocked (_new_pool): a
    pending SIGINT is dropped here, once ignored; SIGTERM keeps its default action, a pending one
    ends the worker here."""
    from contracts.processes import die_with_parent

    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    initializer(threads)


def _new_pool(cfg: ReproduceConfig, initializer=_init_worker):
    import multiprocessing as mp

    # Long-lived workers: a run frees its Trainer (pretraining.train.close_trainer), so memory
    # stays flat over hundreds of runs (tests/benchmarks/test_memory.py).
    # SIGINT and SIGTERM are held while Pool() starts the workers, two ways. Blocked in this thread:
    # the spawned workers inherit the mask, so a Ctrl-C to the group (or the SIGTERM of
    # pool.terminate()) waits during their seconds of imports, where it would print a traceback or
    # a "Fatal Python error"; _in_pool_worker then ignores SIGINT and unblocks both. Deferred by
    # our handler: raised inside Pool(), which cleans up only after an Exception, an interrupt left
    # started workers behind, which printed multiprocessing.spawn tracebacks (SemLock._rebuild
    # FileNotFoundError, EOFError) once this process had exited; a signal the kernel gives another
    # thread of this process, which does not block it, runs the Python handler here all the same.
    # Once `pool` exists the held signal goes to the previous handler (reproduce: Interrupted) and
    # the pool is terminated (tests/reproduce/test_interrupt.py). The resource tracker is started
    # first: starting it blocks and then UNBLOCKS SIGINT.
    from multiprocessing import resource_tracker

    _quiet_resource_tracker_cleanup()
    resource_tracker.ensure_running()
    held, pool = (signal.SIGINT, signal.SIGTERM), None
    try:
        # the first deferred signal reaches the previous handler (Interrupted) as the block ends
        with signals_deferred():
            signal.pthread_sigmask(signal.SIG_BLOCK, held)
            try:
                pool = mp.get_context("spawn").Pool(
                    cfg.workers, initializer=_in_pool_worker, initargs=(initializer, cfg.threads, os.getpid())
                )
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, held)  # a pending signal is deferred here
    except BaseException:
        if pool is not None:
            pool.terminate()
        raise
    return pool


# The multiprocessing resource tracker (its own process) unlinks the shared memory that
# mosaicml-streaming made in workers killed at an interrupt, and warns "resource_tracker: There
# appear to be N leaked shared_memory objects to clean up at shutdown" after our last line: that is
# the cleanup (nothing is left in /dev/shm), not a leak (issue 65's interrupt stress). The tracker
# takes its warning filters from PYTHONWARNINGS; the message's own colon limits the filter to its
# prefix, in that module only.
TRACKER_CLEANUP_FILTER = "ignore:resource_tracker:UserWarning:multiprocessing.resource_tracker"


def _quiet_resource_tracker_cleanup() -> None:
    """Give the resource tracker (started next, inheriting the environment) TRACKER_CLEANUP_FILTER."""
    present = [f for f in os.environ.get("PYTHONWARNINGS", "").split(",") if f]
    if TRACKER_CLEANUP_FILTER not in present:
        os.environ["PYTHONWARNINGS"] = ",".join([*present, TRACKER_CLEANUP_FILTER])


class Interrupted(BaseException):  # noqa: N818 (not an error: the user stopped the run)
    """SIGINT or SIGTERM reached `reproduce`: raised in the main thread so that every `with` block
    unwinds (the worker pool terminated, the output lock released) before it exits."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signal_name = signal.Signals(signum).name
        self.exit_code = 128 + signum


def _interrupt(signum, frame):
    # one unwinding: a second Ctrl-C while the workers end must not raise inside the cleanup
    for each in (signal.SIGINT, signal.SIGTERM):
        signal.signal(each, signal.SIG_IGN)
    raise Interrupted(signum)


@contextlib.contextmanager
def interruptible():
    """SIGINT and SIGTERM end the run cleanly (Interrupted), the previous handlers restored after."""
    previous = {each: signal.signal(each, _interrupt) for each in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)


CURRENT_STAGE: dict[str, str] = {}  # the stage `reproduce` is in (the interrupted line names it)

# What each stage imports in this process, torch and the other C extensions behind it (tokenizers,
# pandas, scipy) among them: imported before the first stage, with signals deferred, since an
# exception raised inside torch's import aborted the interpreter (SIGABRT and a C stack trace, no
# "interrupted" line: issue 65's interrupt stress, at `python -m reproduce`'s own imports).
# pretraining.train imports Composer, whose import replaces the SIGINT and SIGTERM handlers with its
# own sys.exit (a finished run is checked and exported in this process): imported here, its
# replacement is undone; later imports of it change nothing (the stress found a SIGINT in the
# fine-tuning stage ending the run with exit 130 and no line, after such an import).
STAGE_IMPORTS = {
    "data": ("torch", "pretraining.data.format", "pretraining.data.prepare", "reproduce.world"),
    "pretraining": ("torch", "pretraining.export", "pretraining.train"),
    "fine-tuning": ("torch", "benchmarks.run", "composer.core.engine"),
    "analysis": ("analysis.aggregate", "analysis.audit", "analysis.tables", "benchmarks.chance"),
}


@contextlib.contextmanager
def signals_deferred():
    """SIGINT and SIGTERM are only recorded inside the block; the first recorded one is raised again
    after it, for the handler that was there before (Interrupted under `reproduce`). The block gets a
    function that puts the recording handler back (after an import that replaced it)."""
    held, deferred = (signal.SIGINT, signal.SIGTERM), []

    def record(signum, frame):
        deferred.append(signum)

    def keep_recording():
        for each in held:
            signal.signal(each, record)

    previous = {each: signal.signal(each, record) for each in held}
    try:
        yield keep_recording
    finally:
        for each, handler in previous.items():
            signal.signal(each, handler)
    if deferred:
        signal.raise_signal(deferred[0])


def import_stage_modules(stages) -> None:
    """Import what `stages` import in this process, signals deferred (STAGE_IMPORTS)."""
    import importlib

    with signals_deferred() as keep_recording:
        for name in dict.fromkeys(m for stage in stages for m in STAGE_IMPORTS.get(stage, ())):
            importlib.import_module(name)
            keep_recording()  # Composer's import puts its own handlers in


def _start_shared_pool(cfg: ReproduceConfig) -> None:
    """Start the reproduction's shared pool now (else the first stage that maps starts it)."""
    if cfg.workers > 1 and _SHARED_POOL.get("cfg") == (cfg.workers, cfg.threads) and "pool" not in _SHARED_POOL:
        _SHARED_POOL["pool"] = _new_pool(cfg, _init_shared_worker)


def _map(fn, items: list, cfg: ReproduceConfig, desc: str, unit: str, weights=None):
    """fn over items, in this process (workers 1) or worker processes (the reproduction's shared
    pool, else one for this call); one tqdm bar; results in the order they finish."""
    from tqdm import tqdm

    weights = weights or [1] * len(items)
    bar = tqdm(total=sum(weights), desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True)
    results = []
    try:
        if cfg.workers == 1 or len(items) <= 1:
            _init_worker(cfg.threads)
            for item, weight in zip(items, weights):
                results.append(fn(item))
                bar.update(weight)
        else:
            shared = _SHARED_POOL.get("cfg") == (cfg.workers, cfg.threads)
            if shared:
                _start_shared_pool(cfg)
            pool = _SHARED_POOL["pool"] if shared else _new_pool(cfg)
            try:
                pending = {pool.apply_async(fn, (item,)): weight for item, weight in zip(items, weights)}
                while pending:
                    for handle in [h for h in pending if h.ready()]:
                        results.append(handle.get())
                        bar.update(pending.pop(handle))
                    time.sleep(0.05)
            except BaseException:
                if not shared:
                    pool.terminate()
                raise
            if not shared:
                pool.close()  # let the workers exit (terminating would SIGTERM them)
                pool.join()
    finally:
        bar.close()
    return results
