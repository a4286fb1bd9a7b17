"""What every CPU benchmark here shares: two real rank processes over one FileStore, and the
size ladder's labels."""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile


def _local_rank(target, rank: int, world: int, *args) -> None:
    # What a launcher (torchrun, nccl-migrate run) tells each rank: code that sizes its thread
    # use by the cores per rank reads it.
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
    target(rank, world, *args)


def run_two_ranks(target, *args, timeout: float = 3600):
    """Runs target(rank, 2, store_path, *args, out) in two spawned processes, each with the
    environment a launcher gives its ranks; returns the one thing a rank puts on `out` (rank 0,
    by convention)."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=_local_rank, args=(target, r, 2, os.path.join(tmp, "store"), *args, out))
                 for r in range(2)]
        for p in procs:
            p.start()
        try:
            return out.get(timeout=timeout)
        finally:
            for p in procs:
                p.join(timeout=60)
                if p.is_alive():
                    p.kill()


def human_size(size: int) -> str:
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
