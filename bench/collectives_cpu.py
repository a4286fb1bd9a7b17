"""Latency and bandwidth of the toolkit's CPU backends against torch's own Gloo, same run.

Two real processes. For each op (all_reduce, all_gather, reduce_scatter, send/recv) and each size
from 1 KiB to 64 MiB, every backend runs the same calls in turn (median of --iters), and the
table gives each toolkit backend's time as a ratio of Gloo's. The toolkit runs CPU tensors on its
own Gloo communicators, so the ratio is what the engine adds (targets: <= 1.10 at 1 MiB and
above, <= 1.5 below).

    .venv/bin/python bench/collectives_cpu.py [--iters 20] [--max-mib 64] [--ops all_reduce,...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from _tree_package import use_tree_package  # tools/_tree_package.py
from _two_ranks import human_size, run_two_ranks

use_tree_package()

PEER = "gloo"
CANDIDATES = ["migrate-legacy", "migrate-nccl2"]
OPS = ["all_reduce", "all_gather", "reduce_scatter", "send_recv"]


def _one_call(op: str, group, rank: int, world: int, buffers) -> None:
    import torch.distributed as dist

    src, out = buffers
    if op == "all_reduce":
        dist.all_reduce(src, group=group)
    elif op == "all_gather":
        dist.all_gather_into_tensor(out, src, group=group)
    elif op == "reduce_scatter":
        dist.reduce_scatter_tensor(src[: src.numel() // world], src, group=group)
    elif op == "send_recv":
        peer = 1 - rank
        if rank == 0:
            dist.send(src, peer, group=group)
        else:
            dist.recv(src, peer, group=group)


def _rank(rank: int, world: int, store_path: str, ops, sizes, iters: int, out) -> None:
    import nccl_migrate  # noqa: F401
    import torch.distributed as dist

    store = dist.FileStore(store_path, world)
    dist.init_process_group(PEER, store=store, rank=rank, world_size=world)
    groups = {PEER: dist.group.WORLD}
    for name in CANDIDATES:
        groups[name] = dist.new_group(backend=name)
    rows = []
    for op in ops:
        for size in sizes:
            elems = size // 4
            buffers = (torch.ones(elems), torch.empty(elems * world))
            samples = {name: [] for name in groups}
            for group in groups.values():
                _one_call(op, group, rank, world, buffers)  # warm-up: connections, lazy communicators
            # Round-robin, in a rotating order, so a slow spell of the machine hits every
            # backend alike instead of one backend's whole block.
            names = list(groups)
            for i in range(iters):
                for name in names[i % len(names):] + names[:i % len(names)]:
                    dist.barrier(group=dist.group.WORLD)
                    start = time.perf_counter()
                    _one_call(op, groups[name], rank, world, buffers)
                    samples[name].append(time.perf_counter() - start)
            times = {name: statistics.median(s) for name, s in samples.items()}
            rows.append((op, size, times))
    if rank == 0:
        out.put(rows)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--max-mib", type=int, default=64)
    parser.add_argument("--ops", default=",".join(OPS))
    args = parser.parse_args()
    ops = [o for o in args.ops.split(",") if o]
    unknown = set(ops) - set(OPS)
    if unknown:
        parser.error(f"unknown ops {sorted(unknown)}; choose from {OPS}")
    sizes, size = [], 1024
    while size <= args.max_mib << 20:
        sizes.append(size)
        size *= 8 if size < 1 << 20 else 4
    rows = run_two_ranks(_rank, ops, sizes, args.iters)
    print(f"2 ranks, CPU, median of {args.iters} calls; ratio = toolkit time / gloo time")
    print(f"{'op':<15}{'size':>8}{'gloo us':>11}{'GB/s':>7}" + "".join(f"{c + ' us':>20}{'ratio':>7}" for c in CANDIDATES))
    for op, size, times in rows:
        peer = times[PEER]
        cells = "".join(f"{times[c] * 1e6:>20.1f}{times[c] / peer:>7.2f}" for c in CANDIDATES)
        print(f"{op:<15}{human_size(size):>8}{peer * 1e6:>11.1f}{size / peer / 1e9:>7.2f}{cells}")


if __name__ == "__main__":
    main()
