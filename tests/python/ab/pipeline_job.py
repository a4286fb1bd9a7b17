"""A pipeline-shaped job (backend "nccl", routed by the shim) on three ranks: rank 1 hands rank 2
a tensor, rank 0 hands rank 1 its stage's output, and then every rank all-reduces (rank 1 its
stage's sum, the others a constant). The p2p ops run between some ranks only, so each rank has
issued a different number of ops on the world group by its collective.

PIPELINE_RANDOM=1: rank 0's stage output is seeded from the OS (the job's own input differs
between runs); everything after it follows from that."""

import os

import torch
import torch.distributed as dist

dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"))
rank = dist.get_rank()
seed = int.from_bytes(os.urandom(4), "little") if os.environ.get("PIPELINE_RANDOM") and rank == 0 else rank
stage = torch.randn(8, generator=torch.Generator().manual_seed(seed))
if rank == 1:
    dist.send(torch.full((4,), 1.0), dst=2)
elif rank == 2:
    dist.recv(torch.empty(4), src=1)
if rank == 0:
    dist.send(stage, dst=1)
elif rank == 1:
    dist.recv(stage, src=0)
total = stage.sum(0, keepdim=True) if rank == 1 else torch.ones(1)
dist.all_reduce(total)
dist.destroy_process_group()
