"""The toolkit's backends on CPU: real processes, real Gloo communicators under our engine."""

from datetime import timedelta

import pytest
import torch

from ranks import run_ranks


def _init(backend, rank, world_size, store, timeout=timedelta(seconds=60)):
    import torch.distributed as dist

    import nccl_migrate  # noqa: F401 - registers the backends

    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout)
    return dist


def _allreduce_all_ops(backend, rank, world_size, store):
    dist = _init(backend, rank, world_size, store)
    out = {}
    for name, op in [("sum", dist.ReduceOp.SUM), ("max", dist.ReduceOp.MAX),
                     ("min", dist.ReduceOp.MIN), ("product", dist.ReduceOp.PRODUCT)]:
        t = torch.arange(4, dtype=torch.float32) + rank + 1
        work = dist.all_reduce(t, op=op, async_op=True)
        work.wait()
        out[name] = t.tolist()
    out["name"] = dist.group.WORLD._get_backend(torch.device("cpu")).name()
    dist.destroy_process_group()
    return out


@pytest.mark.parametrize("backend", ["migrate-nccl2", "migrate-legacy"])
def test_allreduce_two_processes(backend):
    results = run_ranks(_allreduce_for[backend], world_size=2)
    # rank r holds [r+1, r+2, r+3, r+4]; two ranks: [1..4] and [2..5]
    expected = {
        "sum": [3.0, 5.0, 7.0, 9.0],
        "max": [2.0, 3.0, 4.0, 5.0],
        "min": [1.0, 2.0, 3.0, 4.0],
        "product": [2.0, 6.0, 12.0, 20.0],
    }
    for rank_result in results:
        for op, values in expected.items():
            assert rank_result[op] == values, (backend, op)


def _allreduce_rewritten(rank, world_size, store):
    return _allreduce_all_ops("migrate-nccl2", rank, world_size, store)


def _allreduce_legacy(rank, world_size, store):
    return _allreduce_all_ops("migrate-legacy", rank, world_size, store)


_allreduce_for = {"migrate-nccl2": _allreduce_rewritten, "migrate-legacy": _allreduce_legacy}


def test_backends_report_torchs_behaviour_names():
    rewritten = run_ranks(_allreduce_rewritten, world_size=2)
    legacy = run_ranks(_allreduce_legacy, world_size=2)
    assert {r["name"] for r in rewritten} == {"nccl2"}
    assert {r["name"] for r in legacy} == {"nccl"}


def _communicator_lifecycle(behaviour_name):
    def run(rank, world_size, store):
        dist = _init(behaviour_name, rank, world_size, store)
        import nccl_migrate

        at_init = nccl_migrate.communicators()
        t = torch.ones(8)
        dist.all_reduce(t)
        after_op = nccl_migrate.communicators()
        dist.destroy_process_group()
        return at_init, after_op, t.tolist()

    return run


def _lifecycle_rewritten(rank, world_size, store):
    return _communicator_lifecycle("migrate-nccl2")(rank, world_size, store)


def _lifecycle_legacy(rank, world_size, store):
    return _communicator_lifecycle("migrate-legacy")(rank, world_size, store)


def test_rewritten_creates_its_one_communicator_eagerly():
    for rank, (at_init, after_op, values) in enumerate(run_ranks(_lifecycle_rewritten, world_size=2)):
        assert len(at_init) == 1, "the rewritten behaviour connects when the group is created"
        comm = at_init[0]
        assert comm["key"] == "cpu" and comm["implementation"] == "gloo"
        assert comm["rank"] == rank and comm["size"] == 2 and comm["group_ranks"] == [0, 1]
        assert [c["key"] for c in after_op] == ["cpu"], "ops reuse the one communicator"
        assert values == [2.0] * 8


def test_legacy_creates_communicators_lazily():
    for at_init, after_op, values in run_ranks(_lifecycle_legacy, world_size=2):
        assert at_init == [], "the legacy behaviour creates nothing until the first op"
        assert [c["key"] for c in after_op] == ["cpu"]
        assert after_op[0]["creation_seconds"] > 0
        assert values == [2.0] * 8


def _dead_peer(rank, world_size, store):
    dist = _init("migrate-nccl2", rank, world_size, store, timeout=timedelta(seconds=5))
    if rank == 1:
        import os

        os._exit(0)  # leaves without a word: rank 0's allreduce must fail, not hang
    t = torch.ones(4)
    try:
        dist.all_reduce(t)
    except Exception as error:  # noqa: BLE001 - the error text is what we check
        return type(error).__name__, str(error)
    return "no error", ""


def test_dead_peer_fails_with_the_op_identity_instead_of_hanging():
    # rank 1 leaves without reporting; only rank 0 answers.
    (kind, message), = run_ranks(_dead_peer, world_size=2, timeout=90, reporting=[0])
    assert kind == "DistBackendError", message
    assert "all_reduce" in message and "sequence number 1" in message and "rank 0" in message, message


def _average_issued_before_the_peer_joins(rank, world_size, store):
    dist = _init("migrate-nccl2", rank, world_size, store, timeout=timedelta(seconds=20))
    t = torch.full((4,), float(rank + 1))
    if rank == 1:
        # Joins only once rank 0's issue returned: an issue that waited for the peers (the CPU
        # transport's AVG once did) never returns, and this wait fails.
        store.wait(["avg-issued"], timedelta(seconds=10))
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        return t.tolist()
    work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
    store.set("avg-issued", "1")
    work.wait()
    return t.tolist()


def test_async_average_returns_at_issue_and_averages_once_done():
    for values in run_ranks(_average_issued_before_the_peer_joins, world_size=2, timeout=90):
        assert values == [1.5] * 4
