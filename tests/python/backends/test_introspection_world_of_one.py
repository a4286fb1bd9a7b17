"""The toolkit's introspection from Python, in one process that is a world of one over the
toolkit's rewritten backend (its CPU tensors over Gloo): the default group is the world, a device
may be named by string or torch.device, and a group served by another backend is refused."""

import pytest
import torch
import torch.distributed as dist

import nccl_migrate  # noqa: F401 - registers the toolkit's backends
from nccl_migrate import introspection


@pytest.fixture
def world():
    dist.init_process_group("migrate-nccl2", store=dist.HashStore(), rank=0, world_size=1)
    try:
        dist.all_reduce(torch.ones(2))
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


def test_the_worlds_communicators_whichever_way_it_and_its_device_are_named(world):
    found = introspection.communicators()
    assert [(c["key"], c["policy"], c["implementation"], c["group_ranks"]) for c in found] == \
        [("cpu", "rewritten", "gloo", [0])]
    assert introspection.communicators(world, torch.device("cpu")) == found
    assert introspection.communicators(None, "cpu") == found
    assert all(c in introspection.process_communicators() for c in found)  # and any other group's


def test_a_group_of_another_backend_is_refused(world):
    with pytest.raises(TypeError, match="not an nccl_migrate backend: gloo"):
        introspection.communicators(dist.new_group([0], backend="gloo"))
