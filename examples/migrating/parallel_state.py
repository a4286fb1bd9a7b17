"""The job's process groups: tensor-parallel and data-parallel groups over the world, built the way
Megatron-style stacks build theirs (a `create_group` helper called once per group, in loops)."""

import torch.distributed as dist

_TENSOR_PARALLEL_GROUP = None
_DATA_PARALLEL_GROUP = None


def create_group(
    ranks=None,
    timeout=None,
    backend=None,
    group_desc=None,
):
    """A process group over `ranks` with the options this stack gives every group."""
    kwargs = {"ranks": ranks, "timeout": timeout, "backend": backend}
    if group_desc is not None:
        kwargs["group_desc"] = group_desc
    return dist.new_group(**kwargs)


def initialize_model_parallel(tensor_parallel_size: int = 1) -> None:
    """Splits the world into tensor-parallel blocks of consecutive ranks and data-parallel strides."""
    global _TENSOR_PARALLEL_GROUP, _DATA_PARALLEL_GROUP
    world, rank = dist.get_world_size(), dist.get_rank()
    for start in range(0, world, tensor_parallel_size):
        ranks = list(range(start, start + tensor_parallel_size))
        group = create_group(ranks, group_desc="TENSOR_MODEL_PARALLEL_GROUP")
        if rank in ranks:
            _TENSOR_PARALLEL_GROUP = group
    for offset in range(tensor_parallel_size):
        ranks = list(range(offset, world, tensor_parallel_size))
        group = create_group(ranks, group_desc="DATA_PARALLEL_GROUP")
        if rank in ranks:
            _DATA_PARALLEL_GROUP = group


def get_data_parallel_group():
    return _DATA_PARALLEL_GROUP


def get_tensor_parallel_group():
    return _TENSOR_PARALLEL_GROUP
