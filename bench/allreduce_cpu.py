"""All-reduce latency on CPU: the toolkit's backends against torch's own Gloo, same run.

Two real processes; each size is timed on every backend in turn (median of --iters calls),
and the table gives each toolkit backend's time as a ratio of Gloo's. The toolkit forwards
CPU ops to Gloo communicators, so ratios near 1.0 mean the engine adds little.

    .venv/bin/python bench/allreduce_cpu.py [--iters 30] [--max-mib 16]
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

PEER = "gloo"
CANDIDATES = ["migrate-nccl2", "migrate-legacy"]


def _rank(rank: int, world: int, store_path: str, sizes: list[int], iters: int, out) -> None:
    import torch.distributed as dist

    import nccl_migrate  # noqa: F401

    store = dist.FileStore(store_path, world)
    dist.init_process_group(PEER, store=store, rank=rank, world_size=world)
    groups = {PEER: dist.group.WORLD}
    for name in CANDIDATES:
        groups[name] = dist.new_group(backend=name)
    rows = []
    for size in sizes:
        tensor = torch.ones(size // 4, dtype=torch.float32)
        times = {}
        for name, group in groups.items():
            dist.all_reduce(tensor, group=group)  # warm-up: connections, lazy communicators
            samples = []
            for _ in range(iters):
                dist.barrier(group=dist.group.WORLD)
                start = time.perf_counter()
                dist.all_reduce(tensor, group=group)
                samples.append(time.perf_counter() - start)
            times[name] = statistics.median(samples)
        rows.append((size, times))
    if rank == 0:
        out.put(rows)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--max-mib", type=int, default=16)
    args = parser.parse_args()
    sizes, size = [], 1024
    while size <= args.max_mib * 1024 * 1024:
        sizes.append(size)
        size *= 8
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        store_path = os.path.join(tmp, "store")
        procs = [ctx.Process(target=_rank, args=(r, 2, store_path, sizes, args.iters, out)) for r in range(2)]
        for p in procs:
            p.start()
        rows = out.get(timeout=600)
        for p in procs:
            p.join(timeout=60)
    header = f"{'bytes':>10} {PEER + ' us':>10} " + " ".join(f"{c + ' us':>18} {'ratio':>6}" for c in CANDIDATES)
    print("all_reduce, 2 ranks, CPU, median of", args.iters)
    print(header)
    for size, times in rows:
        peer = times[PEER]
        cells = " ".join(f"{times[c] * 1e6:>18.1f} {times[c] / peer:>6.2f}" for c in CANDIDATES)
        print(f"{size:>10} {peer * 1e6:>10.1f} {cells}")


if __name__ == "__main__":
    main()
