"""A small FSDP2 training job on CPU, unmodified (backend "nccl", routed by the shim): fully_shard
on a one-dimensional CPU mesh, so its parameters are all-gathered and its gradients
reduce-scattered with FSDP2's own reduce op, from torch's own code. FSDP_DIVIDE_FACTOR sets FSDP2's
gradient divide factor, which makes its reduce-scatters a PREMUL_SUM (a boxed ReduceOp with a factor)."""

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard

dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"))
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
for layer in model:
    if isinstance(layer, torch.nn.Linear):
        fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
if os.environ.get("FSDP_DIVIDE_FACTOR"):
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(float(os.environ["FSDP_DIVIDE_FACTOR"]))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.Generator().manual_seed(dist.get_rank())
for step in range(int(os.environ.get("FSDP_STEPS", "2"))):
    model(torch.randn(4, 16, generator=data)).pow(2).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
dist.destroy_process_group()
