"""How many communicators each behaviour creates, on scripted workloads, read from the backends'
own introspection: collectives only, a pipeline-style send/recv ring, and many subgroups of
which only some are used."""

import pytest
import torch

from ranks import run_ranks

WORLD = 4


def _workload(backend, kind, env_eager_subgroups=False):
    def run(rank, world, store):
        import os

        import torch.distributed as dist

        import nccl_migrate

        if env_eager_subgroups:
            os.environ["NCCL_MIGRATE_EAGER_SUBGROUPS"] = "1"
        dist.init_process_group(backend, store=store, rank=rank, world_size=world)
        if kind == "collectives":
            t = torch.ones(4)
            for _ in range(3):
                dist.all_reduce(t)
            dist.broadcast(t, src=0)
        elif kind == "ring":
            t, r = torch.full((4,), float(rank)), torch.zeros(4)
            nxt, prv = (rank + 1) % world, (rank - 1) % world
            for _ in range(2):
                if rank % 2 == 0:
                    dist.send(t, nxt)
                    dist.recv(r, prv)
                else:
                    dist.recv(r, prv)
                    dist.send(t, nxt)
            assert r[0].item() == prv
        elif kind == "subgroups":
            groups = [dist.new_group(list(range(world))) for _ in range(8)]
            for g in groups[:2]:
                dist.all_reduce(torch.ones(2), group=g)
        live = nccl_migrate.process_communicators()
        dist.destroy_process_group()
        return [(c["group"], c["key"], c["purpose"], c["policy"]) for c in live]

    return run


def _counts(live):
    return {"collective": sum(1 for c in live if c[2] == "collective"), "p2p": sum(1 for c in live if c[2] == "p2p")}


# module-level wrappers, for pickling
def _legacy_collectives(r, w, s): return _workload("migrate-legacy", "collectives")(r, w, s)
def _rewritten_collectives(r, w, s): return _workload("migrate-nccl2", "collectives")(r, w, s)
def _lazy_collectives(r, w, s): return _workload("migrate-lazy", "collectives")(r, w, s)
def _legacy_ring(r, w, s): return _workload("migrate-legacy", "ring")(r, w, s)
def _rewritten_ring(r, w, s): return _workload("migrate-nccl2", "ring")(r, w, s)
def _lazy_ring(r, w, s): return _workload("migrate-lazy", "ring")(r, w, s)
def _legacy_subgroups(r, w, s): return _workload("migrate-legacy", "subgroups")(r, w, s)
def _rewritten_subgroups(r, w, s): return _workload("migrate-nccl2", "subgroups")(r, w, s)
def _rewritten_subgroups_eager(r, w, s): return _workload("migrate-nccl2", "subgroups", env_eager_subgroups=True)(r, w, s)


@pytest.mark.parametrize("runner", [_legacy_collectives, _rewritten_collectives, _lazy_collectives],
                         ids=["legacy", "rewritten", "lazy"])
def test_collectives_only_use_one_communicator(runner):
    for live in run_ranks(runner, world_size=WORLD):
        assert _counts(live) == {"collective": 1, "p2p": 0}, live


def test_legacy_ring_makes_a_pair_communicator_per_peer_and_no_group_one():
    for rank, live in enumerate(run_ranks(_legacy_ring, world_size=WORLD)):
        assert _counts(live) == {"collective": 0, "p2p": 2}, live
        lo_hi = {tuple(sorted((rank, (rank + d) % WORLD))) for d in (1, -1)}
        assert {c[1] for c in live} == {f"cpu/p2p:{lo}:{hi}" for lo, hi in lo_hi}


def test_rewritten_ring_stays_on_its_one_eager_communicator():
    for live in run_ranks(_rewritten_ring, world_size=WORLD):
        assert _counts(live) == {"collective": 1, "p2p": 0}, live
        assert live[0][3] == "rewritten"


def test_lazy_ring_adds_pair_communicators_to_the_eager_one():
    for live in run_ranks(_lazy_ring, world_size=WORLD):
        assert _counts(live) == {"collective": 1, "p2p": 2}, live
        assert {c[3] for c in live} == {"rewritten-lazy-p2p"}


def test_legacy_subgroups_cost_nothing_until_used():
    for live in run_ranks(_legacy_subgroups, world_size=WORLD):
        assert _counts(live) == {"collective": 2, "p2p": 0}, live


def test_rewritten_subgroups_are_lazy_by_default():
    # The world connects eagerly (as torch does); unused subgroups cost no communicator.
    for live in run_ranks(_rewritten_subgroups, world_size=WORLD):
        assert _counts(live) == {"collective": 1 + 2, "p2p": 0}, live


def test_rewritten_subgroups_can_be_eager_like_torch():
    for live in run_ranks(_rewritten_subgroups_eager, world_size=WORLD):
        assert _counts(live) == {"collective": 1 + 8, "p2p": 0}, live
