"""A training helper written for torch < 2.15: its backend checks go silently wrong on nccl2."""
import torch
import torch.distributed as dist


def uses_nccl(group=None):
    backend = (group or dist.group.WORLD)._get_backend(torch.device("cuda"))
    # False under torch 2.15's default backend: ProcessGroupNCCL2 is not a ProcessGroupNCCL.
    return isinstance(backend, dist.ProcessGroupNCCL)


def tune(backend):
    if type(backend) is dist.ProcessGroupNCCL:
        backend._set_default_timeout(60)
