"""What the A/B recorder adds to an op: all_reduce (or --op all_gather_into_tensor) from 1 KiB to
64 MiB on two real CPU ranks (the toolkit's rewritten backend over Gloo, or --backend), recorder
off and on alternately in the same run, --rounds times --iters each; each cell is the smallest
round median, and the table gives the ratio on/off (target: < 1.05 at 1 MiB and above).

    .venv/bin/python bench/ab_overhead.py [--iters 10] [--rounds 5] [--max-mib 64] [--backend gloo]
                                          [--op all_reduce|all_gather_into_tensor]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
from _two_ranks import human_size, run_two_ranks

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))


def _timed(op, sync, iters: int) -> float:
    samples = []
    for _ in range(iters):
        sync()
        start = time.perf_counter()
        op()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _op(name: str, size: int, world: int):
    """The op under test on a tensor of ``size`` bytes (an all_reduce in place: its input must be
    hashed before it runs; an all-gather out of place: its input is hashed while it runs)."""
    import torch.distributed as dist

    tensor = torch.ones(size // 4)
    if name == "all_reduce":
        return lambda: dist.all_reduce(tensor)
    output = torch.empty(world * tensor.numel())
    return lambda: dist.all_gather_into_tensor(output, tensor)


def _rank(rank: int, world: int, store_path: str, record_dir: str, sizes, args, out) -> None:
    import nccl_migrate  # noqa: F401
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    from nccl_migrate.ab import recorder

    # The ranks line up before each op on a group of their own, through torch's functions as they
    # were before the recorder: that barrier is the benchmark's, not the job's, and is not recorded.
    new_group, barrier = c10d.new_group, c10d.barrier
    rec = recorder.install(os.path.join(record_dir, str(rank)))
    dist.init_process_group(args.backend, store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    line_up = new_group(backend="gloo")

    def sync():
        barrier(group=line_up)

    rows = []
    for size in sizes:
        op = _op(args.op, size, world)
        recorder._recorder = None  # the wrappers and hooks pass straight through
        op()  # warm-up
        off, on = [], []
        for _ in range(args.rounds):  # alternate, so drift on a shared machine hits both alike
            recorder._recorder = None
            off.append(_timed(op, sync, args.iters))
            recorder._recorder = rec
            on.append(_timed(op, sync, args.iters))
        rows.append((size, min(off), min(on)))
    recorder._recorder = None
    if rank == 0:
        out.put(rows)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-mib", type=int, default=64)
    parser.add_argument("--backend", default="migrate-nccl2", help="the ranks' backend (default migrate-nccl2)")
    parser.add_argument("--op", choices=["all_reduce", "all_gather_into_tensor"], default="all_reduce")
    args = parser.parse_args()
    sizes, size = [], 1 << 10
    while size <= args.max_mib << 20:
        sizes.append(size)
        size <<= 2 if size < 1 << 20 else 1
    with tempfile.TemporaryDirectory() as record_dir:
        rows = run_two_ranks(_rank, record_dir, sizes, args)
    print(f"{args.op} on {args.backend}, 2 ranks, {args.rounds} rounds x {args.iters} iters")
    print(f"{'size':>8} {'off (ms)':>10} {'on (ms)':>10} {'on/off':>7}")
    for size, off, on in rows:
        print(f"{human_size(size):>8} {off * 1e3:10.3f} {on * 1e3:10.3f} {on / off:7.2f}")


if __name__ == "__main__":
    main()
