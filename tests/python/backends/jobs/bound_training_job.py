"""A training job as users launch it with torchrun: each rank binds its group to its own device
(device_id from LOCAL_RANK), wraps a model in DDP, trains a step, uses a subgroup and an object
collective, and writes what it saw to OUT_DIR/rank<R>.json.

Usage: torchrun --nproc-per-node N bound_training_job.py WORLD BACKEND OUT_DIR
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from worlds import init  # noqa: E402  (the tests' worlds: the simulated device's registration)


def main(world, backend, out_dir):
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    init(world, backend, rank, size, store=None)  # env:// rendezvous, from torchrun's variables
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 2))
    model(torch.full((3, 4), float(rank + 1))).sum().backward()
    pair = dist.new_group([0, 1])  # every rank creates it; rank 2 and above are not members
    t = torch.ones(2)
    if rank in (0, 1):
        dist.all_reduce(t, group=pair)
    gathered = [None] * size
    dist.all_gather_object(gathered, {"rank": rank, "local_rank": int(os.environ["LOCAL_RANK"])})
    result = {"weight_grad": model.module.weight.grad.tolist(), "pair_sum": t.tolist(), "objects": gathered,
              "backend_name": dist.get_backend()}
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:4])
