"""The shared-memory prefix of a StreamingDataset, chosen by each node's local leader alone.

mosaicml-streaming 0.13.0 (`streaming.base.shared.prefix.get_shm_prefix`) lets every rank of a node
scan /dev/shm for the first free prefix; the local leader registers the one it found and the other
ranks attach to the one *they* found. A dataset that another process of the node creates or frees
between two ranks' scans makes them disagree, and a rank fails at start-up with `RuntimeError:
Internal error: shared memory prefix=N was not registered by local leader` (upstream
mosaicml/streaming#901). Two single-rank jobs that scan at the same moment both pick one prefix, and
the second to create it fails with `FileExistsError` (#884).

Here the local leader alone scans (with streaming's own scan), claims the prefix by creating its
`locals` block (an exclusive create: `FileExistsError` means another process claimed it first, so it
scans again), and every rank learns its leader's prefix from one `all_gather_object` over the job's
process group; the other ranks attach to it and check it as streaming does. `build_train_dataset`
installs this for its own constructions only (`leader_chosen_shm_prefix`). docs/pretraining.md,
"The shared-memory prefix".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from streaming.base import dataset as streaming_dataset
from streaming.base.constant import LOCALS, SHM_TO_CLEAN
from streaming.base.shared import SharedMemory
from streaming.base.shared import prefix as streaming_prefix
from streaming.base.world import World
from torch import distributed as dist

# Each failed claim means another dataset of the node took the prefix in the moment between our
# scan and our create; 100 in a row would mean something else is wrong.
CLAIM_ATTEMPTS = 100


def claim_free_prefix(
    streams_local: list[str], streams_remote: list[str | None], retry: int
) -> tuple[int, SharedMemory]:
    """The first prefix that no dataset of this node uses, claimed by creating its `locals` block
    (holding our local directories, as streaming's registration does)."""
    for _ in range(CLAIM_ATTEMPTS):
        prefix_int = max(
            streaming_prefix._check_and_find_retrying(streams_local, streams_remote, shm_name=name, retry=retry)
            for name in SHM_TO_CLEAN
        )
        data = streaming_prefix._pack_locals(streams_local, prefix_int)
        try:
            shm = SharedMemory(streaming_prefix._get_path(prefix_int, LOCALS), True, len(data))
        except FileExistsError:
            continue  # another process claimed it after our scan: the next scan sees it taken
        shm.buf[: len(data)] = data
        return prefix_int, shm
    raise RuntimeError(
        f"no free shared-memory prefix after {CLAIM_ATTEMPTS} claims: other processes keep taking each "
        "prefix found free; check /dev/shm for a runaway job"
    )


def _attach(prefix_int: int, streams_local: list[str]) -> SharedMemory:
    """A non-leader's view of its leader's `locals` block, checked as streaming checks it."""
    try:
        shm = SharedMemory(streaming_prefix._get_path(prefix_int, LOCALS), False)
    except FileNotFoundError:
        raise RuntimeError(
            f"shared memory prefix={prefix_int}, registered by this node's local leader, is gone: another "
            "process removed /dev/shm blocks of a live job (clean_stale_shared_memory while it ran?)"
        ) from None
    their_locals, their_prefix_int = streaming_prefix._unpack_locals(bytes(shm.buf))
    if their_locals != streams_local or their_prefix_int != prefix_int:
        raise RuntimeError(
            f"shared memory prefix={prefix_int} holds local directories {their_locals} (prefix "
            f"{their_prefix_int}) but this rank's are {streams_local}: every rank of a node must give "
            "the dataset the same data.path / cache_dir"
        )
    return shm


def leader_chosen_prefix(
    streams_local: list[str], streams_remote: list[str | None], world: World, retry: int = 100
) -> tuple[int, SharedMemory]:
    """Drop-in for streaming's `get_shm_prefix(streams_local, streams_remote, world, retry)`.

    Collective when a process group of more than one rank exists (streaming's constructor has
    created one by now if the environment names several ranks): every rank of the job calls it
    at the same point, as it calls streaming's barriers. A leader that fails (e.g. a local
    directory that a live dataset already uses) makes every rank fail with its message, instead of
    leaving the others waiting for it.
    """
    streaming_prefix._check_self(streams_local)
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return claim_free_prefix(streams_local, streams_remote, retry)

    claimed: tuple[int, SharedMemory] | None = None
    failure: BaseException | None = None
    if world.is_local_leader:
        try:
            claimed = claim_free_prefix(streams_local, streams_remote, retry)
        except Exception as exc:  # shared below, so that no rank waits for a leader that gave up
            failure = exc
    # Each rank's (prefix claimed, failure); only local leaders fill them in.
    mine = (claimed[0] if claimed else None, None if failure is None else f"{type(failure).__name__}: {failure}")
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    if failure is not None:
        raise failure
    failed = [(rank, message) for rank, (_, message) in enumerate(everyone) if message is not None]
    if failed:
        rank, message = failed[0]
        raise RuntimeError(
            f"rank {rank} (a local leader) could not choose the dataset's shared-memory prefix: {message}"
        )
    if claimed is not None:
        return claimed
    leader_prefix = everyone[world.node * world.ranks_per_node][0]  # the node's rank 0 (streaming's World)
    return leader_prefix, _attach(leader_prefix, streams_local)


@contextlib.contextmanager
def leader_chosen_shm_prefix() -> Iterator[None]:
    """StreamingDatasets constructed inside this block choose their prefix with
    `leader_chosen_prefix` (streaming's dataset module calls the name it imported)."""
    original = streaming_dataset.get_shm_prefix
    streaming_dataset.get_shm_prefix = leader_chosen_prefix
    try:
        yield
    finally:
        streaming_dataset.get_shm_prefix = original
