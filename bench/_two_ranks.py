"""What every CPU benchmark here shares: two real rank processes over one FileStore, and the
size ladder's labels."""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile


def run_two_ranks(target, *args, timeout: float = 3600):
    """Runs target(rank, 2, store_path, *args, out) in two spawned processes; returns the one
    thing a rank puts on `out` (rank 0, by convention)."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=target, args=(r, 2, os.path.join(tmp, "store"), *args, out)) for r in range(2)]
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
