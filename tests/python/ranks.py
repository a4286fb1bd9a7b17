"""Runs a test function in N real processes (spawned, like torch's MultiProcessTestCase) that
rendezvous through a FileStore, and returns what each rank returned. A rank that raises fails
the test with its traceback; ranks that outlive `timeout` are killed and the test fails; a
reporting rank that then exits non-zero (an abort at exit) or has not exited EXIT_GRACE seconds
after returning (a hang in shutdown) fails it too."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import tempfile
import traceback
from typing import Any, Callable

# How long a rank that returned may take to exit before it counts as hung in shutdown. A hang
# never ends, so the bound only has to outlast a slow exit: torch's teardown of a few ranks takes
# well over 10 s on two cores shared with the suite's other workers (tools/test.sh runs them in
# parallel), which is not a hang.
EXIT_GRACE = 30.0


def _rank_main(fn, rank, world_size, store_path, results, env):
    os.environ.update(env)
    try:
        import torch.distributed as dist

        store = dist.FileStore(store_path, world_size)
        results.put((rank, "ok", fn(rank, world_size, store)))
    except BaseException:  # noqa: BLE001 - every failure must reach the parent
        results.put((rank, "error", traceback.format_exc()))


def run_ranks(fn: Callable[[int, int, Any], Any], world_size: int = 2, timeout: float = 120.0,
              env: dict[str, str] | None = None, reporting: list[int] | None = None) -> list[Any]:
    """`reporting`: the ranks expected to return (default all); ranks that die on purpose are
    left out and killed at the end. Returns the reporting ranks' results in rank order."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    fd, store_path = tempfile.mkstemp(prefix="nccl_migrate_store_")
    os.close(fd)
    os.unlink(store_path)
    procs = [ctx.Process(target=_rank_main, args=(fn, r, world_size, store_path, results, env or {}))
             for r in range(world_size)]
    for p in procs:
        p.start()
    collected: dict[int, Any] = {}
    errors: list[str] = []
    expected = list(range(world_size)) if reporting is None else reporting
    try:
        for _ in range(len(expected)):
            rank, status, value = results.get(timeout=timeout)
            if status == "ok":
                collected[rank] = value
            else:
                errors.append(f"rank {rank} raised:\n{value}")
    except queue.Empty:
        errors.append(f"ranks {sorted(set(expected) - set(collected))} did not finish within {timeout} s")
    finally:
        # The reporting ranks first, each given EXIT_GRACE to exit on its own; a rank left out
        # of `reporting` is not waited for (it dies on purpose, or sleeps to stay silent): once
        # the reporting ranks are gone it has nothing left to show, and is killed.
        for rank in sorted(range(world_size), key=lambda r: r not in expected):
            p = procs[rank]
            p.join(timeout=EXIT_GRACE if rank in expected else 0)
            if p.is_alive():
                p.kill()
                p.join()
                if rank in collected:
                    errors.append(f"rank {rank} returned but did not exit within {EXIT_GRACE:.0f} s (killed)")
            elif rank in collected and p.exitcode != 0:
                errors.append(f"rank {rank} returned but exited with code {p.exitcode}")
        if os.path.exists(store_path):
            os.unlink(store_path)
    if errors:
        raise AssertionError("\n".join(errors))
    return [collected[r] for r in expected]
