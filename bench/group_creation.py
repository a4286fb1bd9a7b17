"""What 64 new_group calls cost under each behaviour, side by side in one run: wall time,
communicators created (from the toolkit's own introspection) and process memory growth, for the
toolkit's legacy, rewritten (lazy subgroups, the default) and rewritten with torch's eager
subgroups (NCCL_MIGRATE_EAGER_SUBGROUPS=1), plus torch's own Gloo as the peer. Two ranks, CPU.

    .venv/bin/python bench/group_creation.py [--groups 64]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from _tree_package import use_tree_package  # tools/_tree_package.py
from _two_ranks import run_two_ranks

use_tree_package()

VARIANTS = [
    ("gloo", "gloo", {}),
    ("legacy", "migrate-legacy", {}),
    ("rewritten (lazy subgroups)", "migrate-nccl2", {}),
    ("rewritten (eager, as torch)", "migrate-nccl2", {"NCCL_MIGRATE_EAGER_SUBGROUPS": "1"}),
]


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / (1 << 20)


def _rank(rank, world, store_path, backend, env, groups, out):
    os.environ.update(env)
    import nccl_migrate
    import torch.distributed as dist

    dist.init_process_group(backend, store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    dist.barrier()
    before_rss, before_comms = _rss_mib(), len(nccl_migrate.report.report()["communicators_created"])
    start = time.perf_counter()
    for _ in range(groups):
        dist.new_group(list(range(world)))
    dist.barrier()
    seconds = time.perf_counter() - start
    comms = len(nccl_migrate.report.report()["communicators_created"]) - before_comms
    if rank == 0:
        out.put((seconds, comms, _rss_mib() - before_rss))
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=64)
    args = parser.parse_args()
    print(f"{args.groups} x new_group, 2 ranks, CPU")
    print(f"{'behaviour':<30}{'seconds':>9}{'x gloo':>8}{'communicators':>15}{'RSS +MiB':>10}")
    peer_seconds = None
    for label, backend, env in VARIANTS:
        seconds, comms, rss = run_two_ranks(_rank, backend, env, args.groups, timeout=1800)
        peer_seconds = peer_seconds or seconds
        print(f"{label:<30}{seconds:>9.2f}{seconds / peer_seconds:>8.2f}{comms:>15}{rss:>10.1f}")


if __name__ == "__main__":
    main()
