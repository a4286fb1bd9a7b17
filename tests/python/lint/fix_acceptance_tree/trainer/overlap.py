"""Gradient bucketing and its communication overlap."""

from __future__ import annotations

import logging

import torch.distributed
from torch.distributed import distributed_c10d as c10d

from trainer.parallel.groups import cuda_backend, make_group

logger = logging.getLogger(__name__)
LegacyBackend = torch.distributed.ProcessGroupNCCL


def can_overlap(group) -> bool:
    backend = cuda_backend(group)
    if isinstance(backend, LegacyBackend):
        return True
    logger.info(
        "backend %s cannot overlap gradient reduction with the backward pass", backend.name()
    )
    return False


def bucket_group(ranks, high_priority_stream_for_this_bucket=None, bucket_size_in_megabytes=25):
    group = make_group(ranks)
    backend = cuda_backend(group)
    nccl = (
        isinstance(backend, c10d.ProcessGroupNCCL) and high_priority_stream_for_this_bucket is None
    )
    if backend.name() != "nccl" or not nccl:
        return None
    return group, bucket_size_in_megabytes
