"""Where a group binds when the job names its device, on every supported torch: the device torch
binds the group to (``init_process_group(device_id=...)``, ``new_group(device_id=...)``, and a
bound world's device for its new_group and DeviceMesh groups) is the device the toolkit's
backends bind to, whatever LOCAL_RANK says; the LOCAL_RANK rule decides only when the job names
no device.

The groups here are bound to CUDA devices, as GPU jobs bind them, on a machine without GPUs:
torch's group creation (``_new_process_group_helper``) binds a group to any device with an
index, and only ``init_process_group`` first checks the device against the machine's GPUs, so
the world is created by the call ``init_process_group`` makes once that check has passed.
Nothing here runs an op on a CUDA device."""

import functools

import pytest

from ranks import run_ranks

# (LOCAL_RANK, the CUDA device index the job binds its groups to): each differs from the other.
LOCAL_RANK_AND_DEVICE = [("0", 1), ("1", 0)]
PROBE = "probe-binding"


def _decisions(backend, asked, rank, size, store):
    """One rank: the device the toolkit's creator decides for an unbound world, a world bound to
    cuda:`asked`, and a subgroup bound to it, each created by torch's own group creation."""
    import datetime

    import torch
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    from nccl_migrate._registration import creator_for, register_name

    decided = []

    def recording_backend(**kwargs):
        # The creator's whole decision reaches the native constructor as bound_device; a Gloo
        # backend stands in for the group, which torch needs back.
        decided.append(kwargs["bound_device"])
        return dist.ProcessGroupGloo(kwargs["store"], kwargs["rank"], kwargs["size"], kwargs["timeout"])

    register_name(PROBE, creator_for(backend, requested=PROBE, create_native=recording_backend),
                  devices=["cpu", "cuda"])
    device = torch.device("cuda", asked)
    dist.init_process_group(PROBE, store=store, rank=rank, world_size=size)
    world, _ = c10d._new_process_group_helper(size, rank, [], PROBE, store, "bound_world",
                                              timeout=datetime.timedelta(seconds=60), device_id=device)
    subgroup = dist.new_group(list(range(size)), device_id=device)
    torch_bound = [world.bound_device_id, subgroup.bound_device_id]
    dist.destroy_process_group()
    return {"unbound_world": decided[0], "bound_world": decided[1], "subgroup": decided[2],
            "torch_bound": torch_bound}


@pytest.mark.parametrize("local_rank,asked", LOCAL_RANK_AND_DEVICE)
@pytest.mark.parametrize("backend", ["migrate-legacy", "migrate-nccl2", "migrate-lazy"])
def test_a_group_binds_to_the_device_the_job_names_not_its_local_rank(backend, local_rank, asked):
    import torch

    [r] = run_ranks(functools.partial(_decisions, backend, asked), world_size=1, timeout=120,
                    env={"LOCAL_RANK": local_rank})
    want = torch.device("cuda", asked)
    assert r["torch_bound"] == [want, want]  # torch bound both where the job asked
    assert r["bound_world"] == want
    assert r["subgroup"] == want
    # No device named: legacy stays unbound; the rewritten behaviours bind by the LOCAL_RANK rule,
    # which on a machine without GPUs is the CPU.
    assert r["unbound_world"] == (None if backend == "migrate-legacy" else torch.device("cpu"))


def _subgroup_op(asked, rank, size, store):
    """One rank of an unbound migrate-nccl2 world: a lazy subgroup bound to cuda:`asked`, then an
    op on a CPU tensor in it, which a group bound to a GPU must refuse, naming its device. The
    backend serves both device types here (on a machine with GPUs it serves CUDA), so torch finds
    it for the bound device and sends it the CPU op."""
    import torch
    import torch.distributed as dist

    from nccl_migrate._registration import creator_for, register_name

    register_name(PROBE, creator_for("migrate-nccl2", requested=PROBE), devices=["cpu", "cuda"])
    dist.init_process_group(PROBE, store=store, rank=rank, world_size=size)
    subgroup = dist.new_group(list(range(size)), device_id=torch.device("cuda", asked))
    try:
        dist.all_reduce(torch.ones(2), group=subgroup)
        error = None
    except RuntimeError as e:
        error = str(e)
    world = torch.ones(2)
    dist.all_reduce(world)
    dist.destroy_process_group()
    return {"error": error, "world_sum": world.tolist()}


@pytest.mark.parametrize("local_rank,asked", LOCAL_RANK_AND_DEVICE)
def test_the_backend_of_a_subgroup_is_bound_where_the_job_asked(local_rank, asked):
    results = run_ranks(functools.partial(_subgroup_op, asked), world_size=2, timeout=120,
                        env={"LOCAL_RANK": local_rank, "NCCL_MIGRATE_EAGER_SUBGROUPS": "0"})
    for r in results:
        assert r["error"] is not None, "a subgroup bound to a GPU ran an op on the CPU"
        assert f"bound to device cuda:{asked} but an operation was issued on cpu" in r["error"], r["error"]
        assert r["world_sum"] == [2.0, 2.0]
