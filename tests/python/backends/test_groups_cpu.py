"""Groups through torch's own APIs: init_process_group, new_group (subsets, non-members) and
split_group, on every toolkit backend."""

import pytest
import torch

from ranks import run_ranks

WORLD = 4


def _groups(backend):
    def run(rank, world, store):
        import torch.distributed as dist

        import nccl_migrate

        dist.init_process_group(backend, store=store, rank=rank, world_size=world)
        evens = dist.new_group([0, 2])
        odds = dist.new_group([1, 3])
        mine = evens if rank % 2 == 0 else odds
        t = torch.full((3,), float(rank))
        dist.all_reduce(t, group=mine)
        result = {"subset_sum": t.tolist(), "subset_rank": dist.get_rank(mine), "subset_size": dist.get_world_size(mine)}
        # a non-member gets the non-member marker, as with torch's backends
        result["non_member"] = evens == dist.GroupMember.NON_GROUP_MEMBER if rank % 2 else None
        from nccl_migrate import torch_features

        if torch_features.has("split_group_cpu"):
            split = dist.split_group(split_ranks=[[0, 1], [2, 3]])
            s = torch.ones(2) * (rank + 1)
            dist.all_reduce(s, group=split)
            result["split_sum"] = s.tolist()
            result["split_backend"] = split._get_backend(torch.device("cpu")).name()
        result["groups"] = sorted({c["group"] for c in nccl_migrate.process_communicators()})
        dist.destroy_process_group()
        return result

    return run


def _legacy(r, w, s): return _groups("migrate-legacy")(r, w, s)
def _rewritten(r, w, s): return _groups("migrate-nccl2")(r, w, s)
def _lazy(r, w, s): return _groups("migrate-lazy")(r, w, s)


@pytest.mark.parametrize("runner,name", [(_legacy, "nccl"), (_rewritten, "nccl2"), (_lazy, "nccl-lazy")],
                         ids=["legacy", "rewritten", "lazy"])
def test_new_group_and_split_group(runner, name):
    for rank, r in enumerate(run_ranks(runner, world_size=WORLD)):
        pair = [0, 2] if rank % 2 == 0 else [1, 3]
        assert r["subset_sum"] == [float(sum(pair))] * 3
        assert r["subset_rank"] == pair.index(rank) and r["subset_size"] == 2
        if rank % 2:
            assert r["non_member"] is True
        if "split_sum" not in r:
            continue
        split_pair = [0, 1] if rank < 2 else [2, 3]
        assert r["split_sum"] == [float(sum(p + 1 for p in split_pair))] * 2
        assert r["split_backend"] == name
        assert len(r["groups"]) >= 2
    from nccl_migrate import torch_features

    if not torch_features.has("split_group_cpu"):
        pytest.skip(f"new_group checked; split_group not: {torch_features.lacks_reason('split_group_cpu')}")
