"""The recorder inside real ranks (Gloo, two processes): what each record's digests cover for
in-place, out-of-place, async and p2p ops, ops issued from C++ through the ProcessGroup hooks, and
one numbering without double records."""

import json
import os

from ranks import run_ranks
from torch_support import requires_torch


def _records(directory: str, rank: int) -> list[dict]:
    with open(os.path.join(directory, f"rank{rank}.jsonl")) as f:
        return sorted((json.loads(line) for line in f), key=lambda e: (e["group"], e["seq"]))


def _python_ops(rank, world, store):
    import torch
    import torch.distributed as dist
    from nccl_migrate.ab import recorder
    from nccl_migrate.ab.digest import digest_of

    rec = recorder.install(os.path.join(os.environ["AB_TEST_DIR"], str(rank)))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    seen = {}
    t = torch.arange(4.0) + rank
    seen["all_reduce.in"] = digest_of([t])
    dist.all_reduce(t)  # in place: its input is hashed before the op overwrites it
    seen["all_reduce.out"] = digest_of([t])
    t.add_(1)  # the job changes the output at once: the record must not see it
    big = torch.full((5 << 20,), float(rank))  # 20 MiB: chunked digest, on the worker while the op runs
    out = torch.empty(world * big.numel())
    dist.all_gather_into_tensor(out, big)
    seen["gather.in"], seen["gather.out"] = digest_of([big]), digest_of([out])
    out.zero_()
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    seen["async.out"] = digest_of([t])
    t.mul_(3)
    u = torch.full((4,), rank + 1.0)
    chained = dist.all_reduce(u, async_op=True).get_future().then(lambda f: f.value()[0].add_(100))
    chained.wait()  # the job's own callback changed the output as soon as the op completed
    seen["future.out"] = digest_of([torch.full((4,), 3.0)])  # what the op itself wrote
    peer = 1 - rank
    send, recv = torch.full((3,), 10.0 + rank), torch.zeros(3)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)])
    for w in works:
        w.wait()
    seen["p2p.in"], seen["p2p.out"] = digest_of([send]), digest_of([recv])
    recv.zero_()
    dist.destroy_process_group()
    rec.close()
    return seen


def test_digests_cover_what_each_op_read_and_wrote(tmp_path):
    results = run_ranks(_python_ops, env={"AB_TEST_DIR": str(tmp_path)})
    for rank, seen in enumerate(results):
        ops = _records(str(tmp_path / str(rank)), rank)
        # Collectives numbered in their group; a batch of sends and recvs in its rank's own count.
        assert [(e["group"], e["seq"], e["op"]) for e in ops] == [
            ("0", 0, "all_reduce"), ("0", 1, "all_gather_into_tensor"), ("0", 2, "all_reduce"), ("0", 3, "all_reduce"),
            (f"0/batch {rank}", 0, "batch_isend_irecv")]
        assert not any(e.get("via") == "hook" for e in ops), "a Python op must not be recorded twice"
        assert (ops[0]["in"], ops[0]["out"]) == (seen["all_reduce.in"], seen["all_reduce.out"])
        assert ops[0]["in"] != ops[0]["out"] and ops[0]["reduce_op"] == "SUM"
        assert (ops[1]["in"], ops[1]["out"]) == (seen["gather.in"], seen["gather.out"])
        assert ops[2]["out"] == seen["async.out"] and "unfinished" not in ops[2]
        assert ops[3]["out"] == seen["future.out"]
        assert (ops[4]["in"], ops[4]["out"]) == (seen["p2p.in"], seen["p2p.out"])
    meta = json.loads((tmp_path / "0" / "rank0.meta.json").read_text())
    assert meta["memory"] and all(s[1] > 0 for s in meta["memory"]), "RSS is sampled for the report's plot"


def _ddp(rank, world, store):
    import torch
    import torch.distributed as dist
    from nccl_migrate.ab import recorder
    from torch.nn.parallel import DistributedDataParallel

    rec = recorder.install(os.path.join(os.environ["AB_TEST_DIR"], str(rank)))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    torch.manual_seed(rank)
    model = DistributedDataParallel(torch.nn.Linear(8, 4))
    grads = []
    for step in range(3):
        model.zero_grad()
        model(torch.randn(16, 8, generator=torch.Generator().manual_seed(rank * 10 + step))).sum().backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).sum().item())
    dist.all_reduce(torch.ones(1))  # a Python op after the reducer's: one numbering for both
    dist.destroy_process_group()
    rec.close()
    return grads


@requires_torch("process_group_hooks")
def test_the_ddp_reducers_all_reduces_are_recorded_through_the_hooks(tmp_path):
    results = run_ranks(_ddp, env={"AB_TEST_DIR": str(tmp_path)})
    assert results[0] == results[1], "DDP averaged the gradients"
    for rank in (0, 1):
        ops = [e for e in _records(str(tmp_path / str(rank)), rank) if e["group"] == "0"]
        assert [e["seq"] for e in ops] == list(range(len(ops))), "one gapless numbering per group"
        reducer = [e for e in ops if e["op"] == "all_reduce" and e.get("via") == "hook"]
        assert len(reducer) == 3, ops  # one bucket per step
        assert all(e["in_shapes"] == [[36]] and e["out"] and e["in"] != e["out"] for e in reducer)
        assert ops[-1]["op"] == "all_reduce" and "via" not in ops[-1] and ops[-1]["reduce_op"] == "SUM"
        assert any(e["op"] == "broadcast" and e.get("via") == "hook" for e in ops), "DDP's initial weight sync"
    # Every rank's all-reduce result is the same: read once the op ended, before DDP reused its bucket.
    outs = [[e["out"] for e in _records(str(tmp_path / str(r)), r) if e["op"] == "all_reduce"] for r in (0, 1)]
    assert outs[0] == outs[1] and len(set(outs[0])) == len(outs[0])
