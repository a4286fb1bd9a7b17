"""What the A/B recorder adds to an op: all_reduce (or --op all_gather_into_tensor) from 1 KiB to
64 MiB on two real CPU ranks (the toolkit's rewritten backend over Gloo, or --backend).

Recorder off and on alternate op by op in the same run, so a slow spell of a shared machine
lands on both alike; each cell is the median of enough ops to fill about --seconds. The table
gives the ratio on/off (target: < 1.05 at 1 MiB and above) and, beside it, the part of the cost
no recorder can avoid: reading the bytes it must hash outside the op (an in-place op's input
before it and its output after it; an out-of-place op's output after it, and its input before
it unless a spare core hashes it while the op runs), timed alone in the same run, and the ratio
left once it is taken out. Each rank sees LOCAL_WORLD_SIZE=2, as under a launcher.

    .venv/bin/python bench/ab_overhead.py [--seconds 2] [--max-mib 64] [--backend gloo]
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

sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from _tree_package import use_tree_package  # tools/_tree_package.py
from _two_ranks import human_size, run_two_ranks

use_tree_package()


def _op(name: str, size: int, world: int):
    """The op under test on a tensor of ``size`` bytes, and the tensors the recorder must hash
    on the op's path: an in-place op's input before it and output after it; an out-of-place op's
    output, and its input too where no spare core can hash it while the op runs."""
    import torch.distributed as dist
    from nccl_migrate.ab.digest import has_spare_core

    tensor = torch.ones(size // 4)
    if name == "all_reduce":
        return (lambda: dist.all_reduce(tensor)), [tensor, tensor]
    output = torch.empty(world * tensor.numel())
    return (lambda: dist.all_gather_into_tensor(output, tensor)), [output] + ([] if has_spare_core() else [tensor])


def _rank(rank: int, world: int, store_path: str, record_dir: str, sizes, args, out) -> None:
    import nccl_migrate  # noqa: F401
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    from nccl_migrate.ab import active, recorder
    from nccl_migrate.ab.digest import digest_of

    # The ranks line up before each op on a group of their own, through torch's functions as they
    # were before the recorder: that barrier is the benchmark's, not the job's, and is not recorded.
    new_group, barrier, all_reduce = c10d.new_group, c10d.barrier, c10d.all_reduce
    rec = recorder.install(os.path.join(record_dir, str(rank)))
    dist.init_process_group(args.backend, store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    line_up = new_group(backend="gloo")

    def timed(fn) -> float:
        barrier(group=line_up)
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    rows = []
    for size in sizes:
        op, hashed = _op(args.op, size, world)
        active.recorder = None  # the wrappers and hooks pass straight through
        probe = timed(op)  # also the warm-up
        # Both ranks must run the same number of ops: they agree on the slower probe.
        agreed = torch.tensor([probe])
        all_reduce(agreed, op=dist.ReduceOp.MAX, group=line_up)
        count = max(15, min(400, int(args.seconds / 2 / max(agreed.item(), 1e-4))))
        off, on, reads = [], [], []
        for _ in range(count):
            active.recorder = None
            off.append(timed(op))
            active.recorder = rec
            on.append(timed(op))
        active.recorder = None
        for _ in range(max(5, count // 4)):
            reads.append(timed(lambda hashed=hashed: [digest_of([t]) for t in hashed]))
        rows.append((size, count, statistics.median(off), statistics.median(on), statistics.median(reads)))
    active.recorder = None
    if rank == 0:
        out.put(rows)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time spent per size (default 2)")
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
    print(f"{args.op} on {args.backend}, 2 ranks, recorder off/on alternating, medians of n ops")
    print(f"{'size':>8} {'n':>4} {'off (ms)':>10} {'on (ms)':>10} {'on/off':>7} {'hash (ms)':>10} {'w/o hash':>9}")
    for size, count, off, on, reads in rows:
        print(f"{human_size(size):>8} {count:4d} {off * 1e3:10.3f} {on * 1e3:10.3f} {on / off:7.2f} "
              f"{reads * 1e3:10.3f} {(on - reads) / off:9.2f}")


if __name__ == "__main__":
    main()
