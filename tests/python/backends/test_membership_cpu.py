"""Membership changes on real CPU ranks: shrink a group after a rank died and go on with the
survivors (torch's shrink_group), shrink's preconditions with torch nccl2's texts, abort hooks
and torch's HealthCheckHook, and reconfigure (torch's enable_reconfigure regime)."""

import os
import time

import pytest

from ranks import run_ranks
from torch_support import requires_torch

TIMEOUT_S = 3


def _shrink_after_death(backend):
    def run(rank, world, store):
        from datetime import timedelta

        import torch
        import torch.distributed as dist
        from torch._C._distributed_c10d import HealthCheckHook

        import nccl_migrate  # noqa: F401
        from nccl_migrate._native import native

        dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                                timeout=timedelta(seconds=TIMEOUT_S))
        pg = dist.group.WORLD
        hooked = []
        pg.register_abort_hook(7, lambda: hooked.append("abort hook ran"))
        HealthCheckHook.attach(pg)
        dist.all_reduce(torch.ones(4))  # connected and healthy
        if rank == world - 1:
            os._exit(0)  # dies without a word
        try:
            dist.all_reduce(torch.ones(4))
            failed = "no error"
        except Exception as error:  # noqa: BLE001
            failed = type(error).__name__
        # Hooks run on the watchdog thread after the failure; torch's own FlightRecorderHook,
        # also attached, may take seconds before HealthCheckHook's turn.
        deadline = time.monotonic() + 20
        while "unhealthy" not in hooked and time.monotonic() < deadline:
            if native.unhealthy_backends():
                hooked.append("unhealthy")
            time.sleep(0.05)
        shrunk = dist.shrink_group([world - 1])
        t = torch.full((4,), float(rank + 1))
        dist.all_reduce(t)  # on the new default group: the survivors only
        backend_obj = shrunk._get_backend(torch.device("cpu"))
        return {
            "failed": failed,
            "hooks": hooked,
            "unhealthy": native.unhealthy_backends(),
            "size": shrunk.size(),
            "rank": shrunk.rank(),
            "sum": t.tolist(),
            "name": backend_obj.name(),
            "communicators": [(c["size"], c["implementation"]) for c in native.communicators(backend_obj)],
        }

    return run


def _shrink_nccl2(r, w, s): return _shrink_after_death("migrate-nccl2")(r, w, s)
def _shrink_legacy(r, w, s): return _shrink_after_death("migrate-legacy")(r, w, s)


@pytest.mark.parametrize("runner,name,communicators", [
    (_shrink_nccl2, "nccl2", [(2, "gloo")]),  # the shrunk group connects at once, as torch's does
    (_shrink_legacy, "nccl", [(2, "gloo")]),  # created by the all_reduce that followed
], ids=["rewritten", "legacy"])
@requires_torch("shrink", "abort_hooks", "health_check")
def test_survivors_shrink_the_group_after_a_rank_died_and_go_on(runner, name, communicators):
    survivors = run_ranks(runner, 3, timeout=90, reporting=[0, 1])
    for rank, out in enumerate(survivors):
        assert out["failed"] == "DistBackendError", out
        assert out["hooks"] == ["abort hook ran", "unhealthy"], out
        assert name in out["unhealthy"], out
        assert (out["size"], out["rank"]) == (2, rank), out
        assert out["sum"] == [3.0] * 4, out  # 1 + 2: the dead rank is gone
        assert out["name"] == name
        assert out["communicators"] == communicators, out


def _shrink_preconditions(rank, world, store):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    import nccl_migrate  # noqa: F401

    dist.init_process_group("migrate-nccl2", store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=30))
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    errors = {}
    for label, args in {"empty": ([],), "flags": ([1], 7), "range": ([5],), "duplicate": ([1, 1],),
                        "all": ([0, 1],), "self": ([rank],)}.items():
        try:
            backend.shrink(*args)
            errors[label] = None
        except Exception as error:  # noqa: BLE001
            errors[label] = (type(error).__name__, str(error).split("\n")[0])
    if rank == 1:
        store.wait(["rank0-done"], timedelta(seconds=60))
        return errors
    # Rank 1 never joins this all_reduce: it stays pending.
    pending = dist.all_reduce(torch.ones(1 << 10), async_op=True)
    try:
        backend.shrink([1])
        errors["pending"] = None
    except Exception as error:  # noqa: BLE001
        errors["pending"] = (type(error).__name__, str(error).split("\n")[0])
    started = time.monotonic()
    child = backend.shrink([1], dist.distributed_c10d.SHRINK_ABORT)
    try:
        pending.wait()
        errors["aborted op"] = None
    except Exception as error:  # noqa: BLE001
        errors["aborted op"] = (type(error).__name__, time.monotonic() - started)
    t = torch.full((3,), 5.0)
    child.allreduce([t]).wait()
    errors["child"] = (child.size(), child.rank(), t.tolist())
    store.set("rank0-done", "1")
    return errors


@requires_torch("shrink")
def test_shrink_refuses_bad_requests_with_torch_texts_and_aborts_pending_work_on_request():
    rank0, rank1 = run_ranks(_shrink_preconditions, 2, timeout=120)
    for errors in (rank0, rank1):
        assert errors["empty"] == ("ValueError", "ranks_to_exclude cannot be empty")
        assert errors["flags"][0] == "ValueError" and errors["flags"][1].startswith("Invalid NCCL shrink flags: 7")
        assert errors["range"][0] == "ValueError" and errors["range"][1].startswith("Invalid rank 5 for shrink")
        assert errors["duplicate"] == ("ValueError", "Duplicate shrink rank 1")
        assert errors["all"] == ("ValueError", "Cannot exclude all ranks from an NCCL communicator")
        assert errors["self"] == ("RuntimeError", "An excluded rank must not call ProcessGroupNCCL::shrink")
    assert rank0["pending"][0] == "RuntimeError"
    assert rank0["pending"][1].startswith("NCCL communicator cannot shrink while work is pending"), rank0["pending"]
    kind, seconds = rank0["aborted op"]
    assert kind == "DistBackendError" and seconds < 5, rank0["aborted op"]
    assert rank0["child"] == (1, 0, [5.0, 5.0, 5.0])


def _reconfigure(rank, world, store):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    import nccl_migrate  # noqa: F401

    dist.init_process_group("migrate-nccl2", store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=TIMEOUT_S), enable_reconfigure=True)
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    out = {"supports": backend.supports_reconfigure}
    try:
        dist.all_reduce(torch.ones(2))
        out["before"] = None
    except Exception as error:  # noqa: BLE001
        out["before"] = (type(error).__name__, str(error).split("\n")[0])
    mine = dist._get_reconfigure_handle()
    store.set(f"handle{rank}", mine)
    handles = [store.get(f"handle{r}").decode() for r in range(world)]
    dist._reconfigure(uuid=1, handles=handles).wait()
    t = torch.full((2,), float(rank + 1))
    dist.all_reduce(t)
    out["full"] = t.tolist()
    try:
        dist._reconfigure(uuid=1, handles=handles)
        out["reused uuid"] = None
    except Exception as error:  # noqa: BLE001
        out["reused uuid"] = (type(error).__name__, str(error).split("\n")[0])
    if rank == world - 1:
        os._exit(0)  # leaves; the others re-form without it
    survivors = set(handles[:-1])  # a set: the backend orders the members
    dist._reconfigure(uuid=2, handles=survivors).wait()
    t = torch.full((2,), float(rank + 1))
    dist.all_reduce(t)
    out["survivors"] = (backend.size(), backend.rank(), t.tolist())
    try:
        dist._reconfigure(uuid=3, handles=[h for h in handles if h != mine])
        out["without me"] = None
    except Exception as error:  # noqa: BLE001
        out["without me"] = (type(error).__name__, str(error).split("\n")[0])
    return out


@requires_torch("reconfigure")
def test_reconfigure_forms_the_group_from_handles_and_reforms_it_without_a_departed_rank():
    for rank, out in enumerate(run_ranks(_reconfigure, 3, timeout=120, reporting=[0, 1])):
        assert out["supports"] is True
        assert out["before"][0] == "RuntimeError" and "Call reconfigure() before issuing collectives" in out["before"][1]
        assert out["full"] == [6.0, 6.0]
        assert out["reused uuid"][0] == "ValueError" and "uuid 1 was already used" in out["reused uuid"][1]
        assert out["survivors"] == (2, rank, [3.0, 3.0]), out
        assert out["without me"][0] == "ValueError" and "is not among the 2 handles" in out["without me"][1], out


def _reconfigure_with_an_absent_member(rank, world, store):
    from datetime import timedelta

    import torch.distributed as dist

    import nccl_migrate  # noqa: F401

    dist.init_process_group("migrate-nccl2", store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=30), enable_reconfigure=True)
    store.set(f"handle{rank}", dist._get_reconfigure_handle())
    handles = [store.get(f"handle{r}").decode() for r in range(world)]
    if rank == 1:
        store.wait(["rank0-done"], timedelta(seconds=60))  # alive, but never joins the reconfigure
        return None
    started = time.monotonic()
    try:
        dist._reconfigure(uuid=1, handles=handles, timeout=timedelta(seconds=TIMEOUT_S)).wait()
        outcome = None
    except Exception as error:  # noqa: BLE001
        outcome = (type(error).__name__, str(error).split("\n")[0])
    store.set("rank0-done", "1")
    return outcome, time.monotonic() - started


@requires_torch("reconfigure")
def test_a_member_that_never_joins_fails_the_reconfigure_within_its_timeout():
    (outcome, seconds), _ = run_ranks(_reconfigure_with_an_absent_member, 2, timeout=90)
    assert outcome is not None and "reconfigure of group" in outcome[1] and "(uuid 1, 2 members) failed" in outcome[1], outcome
    assert seconds < TIMEOUT_S + 2.0, seconds


def _reconfigure_with_a_pending_op(rank, world, store):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    import nccl_migrate  # noqa: F401

    dist.init_process_group("migrate-nccl2", store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=TIMEOUT_S), enable_reconfigure=True)
    store.set(f"handle{rank}", dist._get_reconfigure_handle())
    handles = [store.get(f"handle{r}").decode() for r in range(world)]
    dist._reconfigure(uuid=1, handles=handles).wait()
    out = {}
    pending = dist.all_reduce(torch.ones(4), async_op=True) if rank == 0 else None  # rank 1 never joins it
    store.set(f"issued{rank}", "1")
    store.wait([f"issued{r}" for r in range(world)])
    if rank == 1:
        # Rank 0 drops its generation first, so its pending op fails because of its own
        # reconfigure (rank 1 dropping its side would fail it earlier, as a peer's failure).
        time.sleep(1.0)
    dist._reconfigure(uuid=2, handles=handles).wait()  # drops the generation the pending op runs in
    if pending is not None:
        try:
            pending.wait()
            out["pending"] = None
        except Exception as error:  # noqa: BLE001
            out["pending"] = type(error).__name__
    time.sleep(0.5)  # the watchdog has reported the dropped op's failure by now
    try:
        t = torch.full((4,), float(rank + 1))
        dist.all_reduce(t)
        out["after"] = t.tolist()
    except Exception as error:  # noqa: BLE001
        out["after"] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
    return out


@requires_torch("reconfigure")
def test_an_op_dropped_by_reconfigure_fails_without_aborting_the_reformed_group():
    first, second = run_ranks(_reconfigure_with_a_pending_op, 2, timeout=60)
    assert first["pending"] == "DistBackendError", first
    assert first["after"] == second["after"] == [3.0] * 4, (first, second)


def _shrink_with_a_late_survivor(rank, world, store):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    import nccl_migrate  # noqa: F401

    dist.init_process_group("migrate-nccl2", store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=TIMEOUT_S))
    dist.all_reduce(torch.ones(4))
    if rank == world - 1:
        os._exit(0)
    # One survivor comes 1.5 timeouts after the other, as one whose watchdog had to time its op
    # out comes after one that saw the dead peer's socket close.
    if rank == 1:
        time.sleep(1.5 * TIMEOUT_S)
    started = time.monotonic()
    try:
        shrunk = dist.shrink_group([world - 1], shrink_flags=dist.distributed_c10d.SHRINK_ABORT)
        t = torch.full((4,), float(rank + 1))
        dist.all_reduce(t, group=shrunk)
        return t.tolist(), time.monotonic() - started
    except Exception as error:  # noqa: BLE001
        return f"{type(error).__name__}: {str(error).splitlines()[0]}", time.monotonic() - started


@requires_torch("shrink")
def test_shrink_waits_for_a_survivor_that_comes_up_to_a_timeout_late():
    (early, waited), (late, _) = run_ranks(_shrink_with_a_late_survivor, 3, timeout=90, reporting=[0, 1])
    assert early == late == [3.0] * 4, (early, late)
    assert 1.3 * TIMEOUT_S < waited < 2 * TIMEOUT_S + 2, waited
