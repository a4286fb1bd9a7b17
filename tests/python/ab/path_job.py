"""A job (backend "nccl", routed by the shim) whose path depends on the backend it got, as jobs
written for torch before 2.15 do: its gradients go as one flat bucket when the world's backend
reports the name "nccl" (the legacy behaviour's), one all_reduce per tensor otherwise (the
rewritten behaviour's backend reports "nccl2"). Every rank takes the same branch and seeds its data
by its rank, so each behaviour's run is the same every time: what differs is the path alone."""

import os

import torch
import torch.distributed as dist

dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"))
rank = dist.get_rank()
data = torch.Generator().manual_seed(rank)
warmup = torch.randn(4, generator=data)
dist.all_reduce(warmup)  # the same on both paths
grads = [torch.randn(16, 8, generator=data), torch.randn(33, generator=data)]  # 128 + 33 = 161 elements
if dist.group.WORLD._get_backend(torch.device("cpu")).name() == "nccl":
    bucket = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(bucket)
else:
    for g in grads:
        dist.all_reduce(g)
dist.destroy_process_group()
