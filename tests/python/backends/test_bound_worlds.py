"""What a device-bound world does that an unbound one never shows: subgroups created on every
rank (members and non-members), lazy subgroups, object collectives and barriers, and torch's
own libraries (DDP, FSDP2, DTensor, distributed checkpointing) as clients, in CPU worlds bound
with device_id and in worlds on the simulated device (the NCCL communicator's code)."""

import functools

import pytest

from ranks import run_ranks
from worlds import init, world_missing

BOUND = ["cpu-bound", "sim-bound"]
BACKENDS = ["migrate-legacy", "migrate-nccl2", "migrate-lazy"]


def _skip_unless_runnable(world):
    if why := world_missing(world):
        pytest.skip(why)


def _subgroups(world, backend, rank, size, store):
    """One rank of a 4-rank bound world: a pair group (ranks 2 and 3 outside it) and an odd one."""
    import torch
    import torch.distributed as dist

    init(world, backend, rank, size, store)
    pair = dist.new_group([0, 1])  # ranks 2 and 3 are non-members
    evens = dist.new_group([0, 2])
    result = {"pair_member": pair != dist.GroupMember.NON_GROUP_MEMBER}
    if rank in (0, 1):
        t = torch.full((3,), float(rank + 1))
        dist.all_reduce(t, group=pair)
        result["pair_sum"] = t.tolist()
        result["pair_name"] = dist.get_backend(pair)
    if rank in (0, 2):
        t = torch.full((2,), float(rank))
        dist.broadcast(t, group_src=1, group=evens)
        result["evens_bcast"] = t.tolist()
    t = torch.ones(2)
    dist.all_reduce(t)
    result["world_sum"] = t.tolist()
    dist.destroy_process_group()
    return result


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("world", BOUND)
def test_defect02_new_group_on_a_bound_world_serves_members_and_non_members(world, backend):
    """Review item 2: on a device-bound world every non-member of a new group used to raise
    AttributeError (perform_nocolor_split); members must get a working group of their own."""
    _skip_unless_runnable(world)
    results = run_ranks(functools.partial(_subgroups, world, backend), world_size=4, timeout=120)
    for rank, r in enumerate(results):
        assert r["pair_member"] == (rank in (0, 1))
        assert r["world_sum"] == [4.0, 4.0]
    assert results[0]["pair_sum"] == results[1]["pair_sum"] == [3.0, 3.0, 3.0]
    assert results[0]["evens_bcast"] == results[2]["evens_bcast"] == [2.0, 2.0]


def _objects(world, backend, rank, size, store):
    """One rank of a 3-rank bound world running the four object collectives and a barrier."""
    import torch.distributed as dist

    init(world, backend, rank, size, store)
    gathered = [None] * size
    dist.all_gather_object(gathered, {"rank": rank, "tag": "x" * rank})
    objs = [f"from-{rank}", rank * 10] if rank == 1 else [None, None]
    dist.broadcast_object_list(objs, src=1)
    got = [None] * size if rank == 0 else None
    dist.gather_object(("g", rank), got, dst=0)
    scattered = [None]
    dist.scatter_object_list(scattered, [("s", r) for r in range(size)] if rank == 2 else None, src=2)
    dist.barrier()
    dist.destroy_process_group()
    return {"gathered": gathered, "bcast": objs, "gather": got, "scatter": scattered[0]}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("world", BOUND)
def test_defect03_object_collectives_and_barrier_on_a_bound_world(world, backend):
    """Review item 3: object collectives on a bound group used to be sent to another device
    than the group's and rejected ("bound to device ... but an operation was issued on cpu")."""
    _skip_unless_runnable(world)
    results = run_ranks(functools.partial(_objects, world, backend), world_size=3, timeout=120)
    for rank, r in enumerate(results):
        assert r["gathered"] == [{"rank": q, "tag": "x" * q} for q in range(3)]
        assert r["bcast"] == ["from-1", 10]
        assert r["scatter"] == ("s", rank)
    assert results[0]["gather"] == [("g", 0), ("g", 1), ("g", 2)]


def _lazy_subgroup(world, backend, rank, size, store):
    """One rank: a subgroup's communicators before and after its first op."""
    import torch
    import torch.distributed as dist

    from nccl_migrate import introspection

    init(world, backend, rank, size, store)
    sub = dist.new_group([0, 1, 2])
    before = introspection.communicators(sub)
    t = torch.ones(2)
    dist.all_reduce(t, group=sub)
    after = introspection.communicators(sub)
    dist.destroy_process_group()
    return {"before": len(before), "after": len(after), "sum": t.tolist()}


@pytest.mark.parametrize("world", BOUND)
def test_defect08_subgroups_of_a_bound_world_stay_lazy(world):
    """Review item 8: torch eagerly connects every new group of a bound world; our rewritten
    subgroups must still make no communicator until their first op."""
    _skip_unless_runnable(world)
    results = run_ranks(functools.partial(_lazy_subgroup, world, "migrate-nccl2"), world_size=3, timeout=120)
    for r in results:
        assert r == {"before": 0, "after": 1, "sum": [3.0, 3.0]}


def _ddp_step(world, backend, rank, size, store):
    """One rank of DDP, torch's own client of the group: its bucketed all_reduce hooks average
    the gradients over the group's communicator."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    init(world, backend, rank, size, store)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 3))
    loss = model(torch.full((2, 4), float(rank + 1))).sum()
    loss.backward()
    grads = [p.grad.tolist() for p in model.parameters()]
    dist.destroy_process_group()
    return grads


@pytest.mark.parametrize("backend", ["migrate-legacy", "migrate-nccl2"])
@pytest.mark.parametrize("world", BOUND)
def test_ddp_averages_gradients_on_a_bound_world(world, backend):
    _skip_unless_runnable(world)
    results = run_ranks(functools.partial(_ddp_step, world, backend), world_size=3, timeout=120)
    # d(sum(W x + b))/dW = sum over the batch of x = 2 * (rank + 1) per entry; averaged over ranks: 2 * 2.
    weight, bias = results[0]
    assert weight == [[4.0] * 4] * 3 and bias == [2.0] * 3
    assert all(r == results[0] for r in results)


def _fsdp2_dtensor_checkpoint(world, backend, rank, size, store):
    """One rank of a job on torch's own libraries: FSDP2 shards a model over a device mesh of the
    group (all-gathers in forward, averaging reduce-scatters in backward), DTensor gathers the
    sharded gradients, and distributed checkpointing saves and reloads the shards (object
    collectives and barriers underneath)."""
    import shutil
    import tempfile

    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    init(world, backend, rank, size, store)
    mesh = init_device_mesh("cpu", (size,))

    def sharded_model():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 3))
        for layer in model:
            fully_shard(layer, mesh=mesh)
        return fully_shard(model, mesh=mesh)

    model = sharded_model()
    loss = model(torch.full((2, 4), float(rank + 1))).sum()
    loss.backward()
    grads = [p.grad.full_tensor().tolist() for p in model.parameters()]

    if rank == 0:
        store.set("checkpoint_dir", tempfile.mkdtemp(prefix="nccl_migrate_dcp_"))
    checkpoint_dir = store.get("checkpoint_dir").decode()
    dcp.save(model.state_dict(), checkpoint_id=checkpoint_dir)
    reloaded = sharded_model()
    with torch.no_grad():
        for p in reloaded.parameters():
            p.zero_()
    state = reloaded.state_dict()
    dcp.load(state, checkpoint_id=checkpoint_dir)
    reloaded.load_state_dict(state)
    same = all(torch.equal(a.full_tensor(), b.full_tensor()) for a, b in zip(model.parameters(), reloaded.parameters()))
    dist.barrier()  # every rank has read the checkpoint
    if rank == 0:
        shutil.rmtree(checkpoint_dir)
    dist.destroy_process_group()
    return {"grads": grads, "reloaded_equal": same}


def _expected_fsdp2_grads(size):
    """The gradients FSDP2 must produce: each rank's local gradient, averaged over the ranks."""
    import torch

    per_rank = []
    for rank in range(size):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 3))
        model(torch.full((2, 4), float(rank + 1))).sum().backward()
        per_rank.append([p.grad for p in model.parameters()])
    return [torch.stack(list(grads)).mean(0) for grads in zip(*per_rank)]


@pytest.mark.parametrize("backend", ["migrate-legacy", "migrate-nccl2"])
@pytest.mark.parametrize("world", BOUND)
def test_fsdp2_dtensor_and_checkpointing_on_a_bound_world(world, backend):
    import torch

    _skip_unless_runnable(world)
    results = run_ranks(functools.partial(_fsdp2_dtensor_checkpoint, world, backend), world_size=2, timeout=180)
    expected = _expected_fsdp2_grads(2)
    for r in results:
        assert r["reloaded_equal"], "the checkpoint did not restore the shards"
        for got, want in zip(r["grads"], expected):
            assert torch.allclose(torch.tensor(got), want, atol=1e-6), (got, want.tolist())


def _bound_elsewhere_than_local_rank(world, backend, rank, size, store):
    """One rank of a 2-rank bound world whose LOCAL_RANK names the other rank's device (rank 0 is
    LOCAL_RANK=1 bound to device 0, rank 1 the reverse): the device of every group's communicators
    after an op, the world's, a new_group subgroup's, a DeviceMesh's and a split_group's."""
    import os

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from nccl_migrate import introspection, torch_features

    os.environ["LOCAL_RANK"] = str(size - 1 - rank)
    init(world, backend, rank, size, store)
    groups = {"world": dist.group.WORLD, "new_group": dist.new_group(list(range(size))),
              "mesh": init_device_mesh("cpu", (size,)).get_group()}
    if torch_features.has("split_group_cpu"):
        groups["split_group"] = dist.split_group(split_ranks=[list(range(size))])
    result = {}
    for name, group in groups.items():
        t = torch.full((2,), float(rank + 1))
        dist.all_reduce(t, group=group)
        result[name] = {"sum": t.tolist(), "torch_bound": str(group.bound_device_id),
                        "devices": sorted({c["device"] for c in introspection.communicators(group)})}
    dist.destroy_process_group()
    return result


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("world", BOUND)
def test_a_bound_world_binds_where_the_job_asked_not_by_local_rank(world, backend):
    """Every group of the world runs on the device the job bound it to, never the one LOCAL_RANK
    would pick."""
    _skip_unless_runnable(world)
    results = run_ranks(functools.partial(_bound_elsewhere_than_local_rank, world, backend), world_size=2, timeout=120)
    for rank, r in enumerate(results):
        for name, group in r.items():
            assert group == {"sum": [3.0, 3.0], "torch_bound": f"cpu:{rank}", "devices": [f"cpu:{rank}"]}, (rank, name)
