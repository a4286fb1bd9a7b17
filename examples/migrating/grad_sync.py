"""Gradient averaging over the data-parallel group. On NCCL the gradients go as one flat bucket (one
all_reduce); elsewhere one all_reduce per parameter, as written for torch before 2.15."""

import torch
import torch.distributed as dist


def _backend_of(group):
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    return group._get_backend(device)


def runs_on_nccl(group) -> bool:
    backend = _backend_of(group)
    # Written for torch < 2.15: ProcessGroupNCCL2 is not a ProcessGroupNCCL, so this turns False.
    if isinstance(backend, dist.ProcessGroupNCCL):
        return True
    # The same test by name: torch 2.15's default backend reports "nccl2".
    return backend.name() == "nccl"


def average_gradients(parameters, group) -> None:
    grads = [p.grad for p in parameters if p.grad is not None]
    world = dist.get_world_size(group)
    if runs_on_nccl(group):
        bucket = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(bucket, group=group)
        offset = 0
        for g in grads:
            g.copy_(bucket[offset:offset + g.numel()].view_as(g))
            offset += g.numel()
    else:
        for g in grads:
            dist.all_reduce(g, group=group)
    for g in grads:
        g /= world
