"""A real DistributedDataParallel job for A/B tests: its gradient all-reduces are issued by DDP's
C++ reducer, never through torch.distributed's Python functions (backend "nccl", routed by the
shim; JOB_BACKEND overrides it). DDP_STEPS (default 3) training steps on a small model."""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"))
rank = dist.get_rank()
torch.manual_seed(rank)  # DDP's construction broadcasts rank 0's weights
model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.Generator().manual_seed(100 + rank)
for step in range(int(os.environ.get("DDP_STEPS", "3"))):
    x = torch.randn(32, 8, generator=data)
    loss = torch.nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
checksum = sum(p.detach().double().sum().item() for p in model.parameters())
print(f"rank {rank}: final parameter checksum {checksum:.12f}", flush=True)
dist.destroy_process_group()
