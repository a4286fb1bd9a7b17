"""A job that saves a distributed checkpoint (torch.distributed.checkpoint) and trains a step
around it: the checkpoint's planner exchanges pickled plans and metadata through object
collectives, and those carry ids unique to each run, so two runs of this deterministic job differ
in those bytes and nowhere else that matters."""

import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"))
torch.manual_seed(0)
model = torch.nn.Linear(8, 4)
for p in model.parameters():
    dist.broadcast(p.data, src=0)
dcp.save({"model": model.state_dict()}, checkpoint_id=os.environ["CHECKPOINT_DIR"])
dist.barrier()
grads = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(grads)
dist.barrier()
dist.destroy_process_group()
