"""Probes of what torch builds on a backend's works, and of the modes that change how a work
completes: futures (get_future, then), DDP's communication hooks, nonblocking communicators and
TORCH_NCCL_BLOCKING_WAIT. Each runs in every rank of a world (tests/gpu/gpu_probe_table.py says
which world); the ranks issue the same collectives in the same order.
"""

from __future__ import annotations

import copy
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from gpu_probes import IDENTITY, SLEEP_S, Rank, changing_reduction, describe, pattern

DDP_TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}  # float32 sums in another order than the reference's


def probe_futures(r: Rank) -> None:
    """torch's contract for a CUDA work's future: wait() and then() order the current stream
    after the op, not the host. The op waits behind a GPU sleep; where the op was issued from a
    side stream and the future is waited on the main one, nothing but the future's events
    orders the read, so a future completed too early reads the input as it was."""
    red = changing_reduction(r.world)
    n = 1 << 20
    values = [torch.full((n,), 1.0 + q) for q in range(r.world)]
    base = values[r.rank].to(r.device, copy=True)
    expected = red.host(values)
    warm = base.clone()
    dist.all_reduce(warm)  # connect (and create any lazy communicator) before timing anything
    side = torch.cuda.Stream()
    same, other, chained, by_work = (base.clone() for _ in range(4))
    torch.cuda.synchronize()  # the only synchronize before the reads

    r.sleep(SLEEP_S)
    start = time.perf_counter()
    future = dist.all_reduce(same, op=red.op(), async_op=True).get_future()
    issue_s = time.perf_counter() - start
    r.note("done() right after issue, behind a GPU sleep", future.done())
    start = time.perf_counter()
    value = future.wait()
    wait_s = time.perf_counter() - start
    read_same = value[0] + 0 if isinstance(value, list) and value else None
    r.fast("get_future() of an op behind a GPU sleep returns at once", issue_s)
    r.fast("future.wait() returns at once (the stream waits, not the host)", wait_s)
    shape = f"{type(value).__name__} of {len(value)}" if isinstance(value, list) else type(value).__name__
    r.check("the future's value is the op's output tensors", isinstance(value, list) and len(value) == 1
            and value[0].data_ptr() == same.data_ptr(), shape, sig=shape)

    with torch.cuda.stream(side):
        r.sleep(SLEEP_S)
        future_other = dist.all_reduce(other, op=red.op(), async_op=True).get_future()
    read_other = future_other.wait()[0] + 0  # on the main stream, which has nothing queued

    with torch.cuda.stream(side):
        r.sleep(SLEEP_S)
        future_chained = dist.all_reduce(chained, op=red.op(), async_op=True).get_future()
    then = future_chained.then(lambda f: f.value()[0] * 2 + 1)
    read_then = then.wait() + 0

    with torch.cuda.stream(side):
        r.sleep(SLEEP_S)
        work = dist.all_reduce(by_work, op=red.op(), async_op=True)
    work.wait()
    read_work = by_work + 0

    torch.cuda.synchronize()
    if read_same is None:
        r.check("future.wait()'s value, op behind a GPU sleep", False, shape, sig=shape)
    else:
        r.expect("future.wait()'s value, op behind a GPU sleep", read_same, expected)
    r.expect("future.wait() on another stream than the op's orders the read after the op", read_other, expected)
    r.expect("then() on the future: its callback reads the op's result", read_then, expected * 2 + 1)
    r.expect("work.wait() on another stream than the op's", read_work, expected)
    r.check("every future done once the device is", future_other.done() and then.done() and work.is_completed())
    r.headline(f"issue {issue_s * 1e3:.1f} ms, wait() {wait_s * 1e3:.1f} ms; values right across streams")


def _ddp_reference(model: torch.nn.Module, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The gradients DDP must produce: each rank's, averaged, computed in one process."""
    grads = []
    for x in inputs:
        replica = copy.deepcopy(model)
        replica(x).pow(2).mean().backward()
        grads.append([p.grad.detach().clone() for p in replica.parameters()])
    return [torch.stack(g).mean(0) for g in zip(*grads)]


def _premul_then_hook(world: int):
    """A hook of get_future and then(): all_reduce with PREMUL_SUM x3, then divide by 3 x world
    in the callback. A callback that reads before the op ran sees the sum a third too small,
    which shows on one rank as well."""

    def hook(state, bucket):
        work = dist.all_reduce(bucket.buffer(), op=dist._make_nccl_premul_sum(3.0), async_op=True)
        return work.get_future().then(lambda f: f.value()[0].div_(3.0 * world))

    return hook


def probe_ddp_hooks(r: Rank) -> None:
    """A DDP training step on the GPU with torch's allreduce_hook and with a hook built on
    get_future and then(), behind a GPU sleep, gradients against a one-process reference."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 16)).to(r.device)
    inputs = [torch.randn(32, 64, generator=torch.Generator().manual_seed(100 + q)).to(r.device)
              for q in range(r.world)]
    reference = _ddp_reference(model, inputs)
    hooks = [("allreduce_hook", default_hooks.allreduce_hook, IDENTITY),
             ("get_future + then (PREMUL_SUM x3, / 3 x world)", _premul_then_hook(r.world), "")]
    for label, hook, weak in hooks:
        calls = []

        def counted(state, bucket, hook=hook, calls=calls):
            calls.append(bucket.index())
            return hook(state, bucket)

        try:
            # Small buckets: several hooks per step, the first fired while backward still runs.
            ddp = DistributedDataParallel(copy.deepcopy(model), device_ids=[r.device], bucket_cap_mb=0.05)
            ddp.register_comm_hook(state=None, hook=counted)
            torch.cuda.synchronize()
            r.sleep(SLEEP_S / 2)  # everything below queues behind it; no synchronize until the reads
            ddp(inputs[r.rank]).pow(2).mean().backward()
            grads = [p.grad + 0 for p in ddp.parameters()]
            torch.cuda.synchronize()
        except Exception as error:  # noqa: BLE001 - the exception is the finding
            r.check(f"DDP step, {label}", False, describe(error), sig=f"raised {type(error).__name__}")
            continue
        # Gradients equal to the reference prove nothing if no hook ran (nothing was reduced).
        r.check(f"DDP step, {label}: the hook ran", len(calls) > 0, f"{len(calls)} buckets")
        worst = max(float((g - ref).abs().max()) for g, ref in zip(grads, reference))
        close = all(torch.allclose(g, ref, **DDP_TOLERANCE) for g, ref in zip(grads, reference))
        r.check(f"DDP step, {label}: gradients equal the reference", close,
                f"largest difference {worst:.2e}", weak=r.at_one_rank(weak) if close else "")
    r.headline(f"{len(hooks)} hooks, gradients against a one-process reference")


def probe_nonblocking(r: Rank) -> None:
    """Ops on a nonblocking communicator give the right values. Run in a world whose settings
    make its communicators nonblocking (TORCH_NCCL_USE_COMM_NONBLOCKING=1 or NCCL_COMM_BLOCKING=0),
    and on a subgroup made with ProcessGroupNCCL.Options().config.blocking = 0."""
    _nonblocking_ops(r, None, "world")


def probe_nonblocking_config(r: Rank) -> None:
    """A subgroup whose pg_options say config.blocking = 0: ops on it give the right values."""
    options = dist.ProcessGroupNCCL.Options()
    options.config.blocking = 0
    try:
        group = dist.new_group(list(range(r.world)), pg_options=options)
    except Exception as error:  # noqa: BLE001
        r.check("new_group with config.blocking = 0", False, describe(error), sig=f"raised {type(error).__name__}")
        return
    _nonblocking_ops(r, group, "config.blocking = 0 subgroup")


def _nonblocking_ops(r: Rank, group, where: str) -> None:
    red = changing_reduction(r.world)
    values = [pattern(q, torch.float32, salt=90) for q in range(r.world)]
    src = values[r.rank].to(r.device, copy=True)
    t, u = torch.full_like(src, float("nan")), src.clone()
    gathered = torch.full((src.numel() * r.world,), float("nan"), device=r.device)
    listed = [torch.full_like(src, float("nan")) for _ in range(r.world)]
    torch.cuda.synchronize()
    ok = True
    try:
        r.sleep(SLEEP_S / 2)
        t.copy_(src)  # device to device behind the sleep
        dist.all_reduce(t, op=red.op(), group=group)
        dist.all_reduce(u, op=red.op(), group=group, async_op=True).wait()
        dist.all_gather_into_tensor(gathered, src, group=group)
        dist.all_gather(listed, src, group=group)
        dist.barrier(group=group)
        reads = [t + 0, u + 0, gathered + 0, [x + 0 for x in listed]]
        torch.cuda.synchronize()
    except Exception as error:  # noqa: BLE001
        r.check(f"ops on the {where}", False, describe(error), sig=f"raised {type(error).__name__}")
        ok = False
    if ok:
        reduced = red.host(values)
        r.expect(f"{where}: all_reduce, input written behind a GPU sleep", reads[0], reduced)
        r.expect(f"{where}: async all_reduce + wait()", reads[1], reduced)
        r.expect(f"{where}: all_gather_into_tensor", reads[2], torch.cat(values))
        r.expect(f"{where}: all_gather(list)", reads[3], values)
    r.headline(f"{where}: values right" if ok else f"{where}: raised")


def probe_blocking_wait(r: Rank) -> None:
    """TORCH_NCCL_BLOCKING_WAIT=1 (set for this world): issuing still returns at once, but
    work.wait() and a synchronous op block the host until the GPU has run the op."""
    red = changing_reduction(r.world)
    values = [torch.full((1 << 20,), 1.0 + q) for q in range(r.world)]
    t = values[r.rank].to(r.device, copy=True)
    warm = t.clone()
    dist.all_reduce(warm)
    torch.cuda.synchronize()

    r.sleep(SLEEP_S)
    start = time.perf_counter()
    work = dist.all_reduce(t, op=red.op(), async_op=True)
    issue_s = time.perf_counter() - start
    start = time.perf_counter()
    work.wait()
    wait_s = time.perf_counter() - start
    r.fast("all_reduce(async_op=True) returns at once", issue_s)
    r.slow("work.wait() blocks the host until the op is done", wait_s)
    r.check("is_completed() right after wait()", work.is_completed())
    values = [red.host(values)] * r.world

    r.sleep(SLEEP_S)
    start = time.perf_counter()
    dist.all_reduce(t, op=red.op())
    sync_s = time.perf_counter() - start
    r.slow("a synchronous all_reduce blocks the host until the op is done", sync_s)
    values = [red.host(values)] * r.world

    r.sleep(SLEEP_S)
    work = dist.all_reduce(t, op=red.op(), async_op=True)
    start = time.perf_counter()
    work.wait(timeout=timedelta(seconds=30))
    r.slow("work.wait(timeout=...) blocks the host", time.perf_counter() - start)
    values = [red.host(values)] * r.world
    r.expect("values after the blocking waits", t, values[r.rank])
    r.headline(f"issue {issue_s * 1e3:.1f} ms, wait() {wait_s:.2f} s, synchronous op {sync_s:.2f} s")
