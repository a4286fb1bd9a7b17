"""Fixtures the A/B tool's in-process tests share."""

import pytest
import torch.distributed as dist


@pytest.fixture
def world_of_one():
    """A world of one over Gloo on a HashStore: what torch must see for a wrapper or recorder to
    treat a call as a job's op."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()
