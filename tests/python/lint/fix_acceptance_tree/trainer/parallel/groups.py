"""Process groups of the trainer: a wrapper that creates them, and the backend they run."""

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroupNCCL as NcclGroup

_GROUPS = {}


def make_group(ranks, timeout=None):
    """Creates the group of `ranks` once and keeps it."""
    key = tuple(ranks)
    if key not in _GROUPS:
        _GROUPS[key] = dist.new_group(ranks, timeout=timeout)
    return _GROUPS[key]


def cuda_backend(group):
    return group._get_backend(torch.device("cuda", torch.cuda.current_device()))


def uses_nccl(group):
    return isinstance(cuda_backend(group), NcclGroup)


def backend_is_nccl(group):
    return cuda_backend(group).name() == "nccl"


def check_backend(group, expected_world_size_for_this_data_parallel_replica_group):
    if not isinstance(
        group._get_backend(torch.device("cuda")), (dist.ProcessGroupNCCL, dist.ProcessGroupGloo)
    ):
        raise TypeError("the data-parallel group needs NCCL or Gloo")
    return group.size() == expected_world_size_for_this_data_parallel_replica_group
