"""What the A/B recorder adds to an op: all_reduce from 1 KiB to 64 MiB on two real CPU ranks
(the toolkit's rewritten backend over Gloo), recorder off and on alternately in the same run,
median of --iters each; the table gives the ratio on/off (target: < 1.05 at 1 MiB and above).

    .venv/bin/python bench/ab_overhead.py [--iters 10] [--max-mib 64] [--backend gloo]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))


def _timed(tensor, iters: int) -> float:
    import torch.distributed as dist

    samples = []
    for _ in range(iters):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(tensor)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _rank(rank: int, world: int, store_path: str, record_dir: str, sizes, iters: int, backend: str, out) -> None:
    import torch.distributed as dist

    import nccl_migrate  # noqa: F401
    from nccl_migrate.ab import recorder

    rec = recorder.install(os.path.join(record_dir, str(rank)))
    dist.init_process_group(backend, store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    rows = []
    for size in sizes:
        tensor = torch.ones(size // 4)
        recorder._recorder = None  # the wrappers pass straight through
        dist.all_reduce(tensor)  # warm-up
        off, on = [], []
        for _ in range(3):  # alternate, so drift on a shared machine hits both alike
            recorder._recorder = None
            off.append(_timed(tensor, iters))
            recorder._recorder = rec
            on.append(_timed(tensor, iters))
        rows.append((size, min(off), min(on)))
    recorder._recorder = None
    if rank == 0:
        out.put(rows)
    dist.destroy_process_group()


def _human(size: int) -> str:
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--max-mib", type=int, default=64)
    parser.add_argument("--backend", default="migrate-nccl2", help="the ranks' backend (default migrate-nccl2)")
    args = parser.parse_args()
    sizes, size = [], 1 << 10
    while size <= args.max_mib << 20:
        sizes.append(size)
        size <<= 2 if size < 1 << 20 else 1
    with tempfile.TemporaryDirectory() as tmp:
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        procs = [ctx.Process(target=_rank, args=(r, 2, os.path.join(tmp, "store"), tmp, sizes, args.iters,
                                                       args.backend, out))
                 for r in range(2)]
        for p in procs:
            p.start()
        rows = out.get(timeout=1800)
        for p in procs:
            p.join(timeout=60)
    print(f"{'size':>8} {'off (ms)':>10} {'on (ms)':>10} {'on/off':>7}")
    for size, off, on in rows:
        print(f"{_human(size):>8} {off * 1e3:10.3f} {on * 1e3:10.3f} {on / off:7.2f}")


if __name__ == "__main__":
    main()
