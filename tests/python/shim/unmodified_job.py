"""A job written for torch 2.15 that knows nothing of nccl-migrate: backend "nccl" (or
JOB_BACKEND), a few collectives and a send/recv ring. The shim decides what runs it."""

import os

import torch
import torch.distributed as dist

dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"))
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
assert t[0].item() == world * (world + 1) / 2, t
r = torch.zeros(4)
if rank % 2 == 0:
    dist.send(t, (rank + 1) % world)
    dist.recv(r, (rank - 1) % world)
else:
    dist.recv(r, (rank - 1) % world)
    dist.send(t, (rank + 1) % world)
sub_backend = os.environ.get("JOB_SUBGROUP_BACKEND")
if sub_backend:
    # A per-group choice inside the world: this group asks for another NCCL name.
    sub = dist.new_group(list(range(world)), backend=sub_backend)
    s = torch.ones(2)
    dist.all_reduce(s, group=sub)
    assert s[0].item() == world
print(f"rank {rank}: backend {dist.get_backend()} reports name {dist.group.WORLD._get_backend(torch.device('cpu')).name()}")
dist.destroy_process_group()
