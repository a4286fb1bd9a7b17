"""A job that already works with either NCCL backend: it checks the backend's name."""
import torch
import torch.distributed as dist

NCCL_NAMES = ("nccl", "nccl2", "nccl-lazy")


def uses_nccl(group=None):
    backend = (group or dist.group.WORLD)._get_backend(torch.device("cuda"))
    return backend.name() in NCCL_NAMES
