"""One process of a shared-memory prefix race (tests/pretraining/test_shm_prefix.py launches them).

`python -m tests.pretraining.shm_prefix_race MODE DATA SYNC [--streaming-prefix]`, then
`build_train_dataset` on the prepared DATA; the prefix it got is written to SYNC/prefix.<id>.
Events between processes are files in SYNC, so the interleaving is forced, not timed:

- `ranks` (2 ranks of one node, gloo; RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_* in the
  environment): rank 1 first holds a `locals` block at the first free prefix (another dataset of the
  node); the local leader (rank 0) scans with it there, rank 1 then frees it, and only then may rank 1
  scan. Streaming's own prefix choice then has rank 1 attach to the freed prefix, which its leader
  never registered (mosaicml/streaming#901).
- `single` (two single-rank jobs, ID 0 and 1 in $RACE_ID): each waits after its first scan until the
  other has scanned too, so both pick one prefix and both try to create it (#884).

`--streaming-prefix` builds the dataset with streaming's own `get_shm_prefix` (to show the race);
`--leader-fails` makes rank 0's claim fail.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from streaming.base.constant import LOCALS, SHM_TO_CLEAN
from streaming.base.shared import SharedMemory
from streaming.base.shared import prefix as streaming_prefix

EVENT_TIMEOUT_S = 120.0


def wait_for(path: Path) -> None:
    """Until another process creates `path` (an event), failing after EVENT_TIMEOUT_S, not hanging."""
    deadline = time.monotonic() + EVENT_TIMEOUT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.01)


def signal(path: Path, text: str = "") -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_text(text)
    partial.replace(path)


def hook_first_scan(before=None, after=None) -> None:
    """Run `before()` / `after(prefix)` around this process's first scan for a free prefix (one
    scan per kind of block, in SHM_TO_CLEAN's order, as streaming and pretraining.data.shm_prefix
    both scan; `prefix` is the largest found, the one both choose)."""
    real = streaming_prefix._check_and_find_retrying
    found_in_first_scan: list[int] = []

    def scan(streams_local, streams_remote, shm_name, retry):
        in_first_scan = len(found_in_first_scan) < len(SHM_TO_CLEAN)
        if in_first_scan and not found_in_first_scan and before:
            before()
        found = real(streams_local, streams_remote, shm_name, retry)
        if in_first_scan:
            found_in_first_scan.append(found)
            if len(found_in_first_scan) == len(SHM_TO_CLEAN) and after:
                after(max(found_in_first_scan))
        return found

    streaming_prefix._check_and_find_retrying = scan


def hold_other_dataset_block() -> SharedMemory:
    """A `locals` block at the first prefix free of every block (as streaming scans), as another
    dataset of the node would hold."""
    while True:
        free = max(streaming_prefix._check_and_find(["/elsewhere"], [None], name) for name in SHM_TO_CLEAN)
        try:
            return SharedMemory(streaming_prefix._get_path(free, LOCALS), True, 64)
        except FileExistsError:
            continue


def main() -> None:
    mode, data, sync = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    if "--streaming-prefix" in sys.argv:
        from pretraining.data import shm_prefix

        shm_prefix.leader_chosen_prefix = streaming_prefix.get_shm_prefix  # the context installs this name
    if "--leader-fails" in sys.argv and os.environ.get("RANK") == "0":
        from pretraining.data import shm_prefix

        def no_prefix(*args, **kwargs):
            raise RuntimeError("no free shared-memory prefix (forced)")

        shm_prefix.claim_free_prefix = no_prefix

    if mode == "ranks":
        import torch.distributed as dist

        me = int(os.environ["RANK"])
        dist.init_process_group("gloo")
        if me == 1:
            other = hold_other_dataset_block()
            signal(sync / "other_made")

            def free_after_leader_scanned() -> None:
                wait_for(sync / "leader_scanned")
                other.cleanup()
                signal(sync / "other_freed")

            threading.Thread(target=free_after_leader_scanned, daemon=True).start()
            hook_first_scan(before=lambda: wait_for(sync / "other_freed"))
        else:
            hook_first_scan(
                before=lambda: wait_for(sync / "other_made"),
                after=lambda found: signal(sync / "leader_scanned", str(found)),
            )
    else:
        me = int(os.environ["RACE_ID"])
        hook_first_scan(
            after=lambda found: (signal(sync / f"scanned.{me}", str(found)), wait_for(sync / f"scanned.{1 - me}"))
        )

    from pretraining.data import DataConfig
    from pretraining.data.loader import build_train_dataset

    try:
        dataset = build_train_dataset(DataConfig(path=data, seq_len=16, min_window=4), 2)
    except BaseException:
        signal(sync / f"done.{me}")
        raise
    signal(sync / f"prefix.{me}", str(dataset._shm_prefix_int))
    signal(sync / f"done.{me}")
    # Neither frees its blocks (at exit) before the other has made its claim.
    wait_for(sync / f"done.{1 - me}")


if __name__ == "__main__":
    main()
