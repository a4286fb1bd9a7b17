"""A ring exchange by batch_isend_irecv (backend "nccl", routed by the shim), as pipeline and
context-parallel jobs write it: each rank sends its tensor to the next rank and receives the
previous rank's, in one batch, then all-reduces what it received.

BATCH_RANDOM=1: rank 0's tensor is seeded from the OS (the job's own input differs between runs)."""

import os

import torch
import torch.distributed as dist

dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"))
rank, world = dist.get_rank(), dist.get_world_size()
seed = int.from_bytes(os.urandom(4), "little") if os.environ.get("BATCH_RANDOM") and rank == 0 else rank
mine, theirs = torch.randn(8, generator=torch.Generator().manual_seed(seed)), torch.empty(8)
works = dist.batch_isend_irecv([dist.P2POp(dist.isend, mine, (rank + 1) % world),
                                dist.P2POp(dist.irecv, theirs, (rank - 1) % world)])
for work in works:
    work.wait()
dist.all_reduce(theirs)
dist.destroy_process_group()
