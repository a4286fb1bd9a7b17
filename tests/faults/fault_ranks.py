"""One rank of a fault-campaign run (tests/faults/fault_campaign.py): a mixed workload of
collectives, p2p, coalesced batches, subgroup ops (one-rank groups among them) and DDP training
steps whose every result is checked, the fault
injected on the faulty rank at its op, and on every rank that raised the recovery a job would
make: the abort hook's word, the flight-recorder dump, then shrink_group without the faulty
rank and an all_reduce on the shrunk group. Runs in a process forked from the campaign (torch
and the toolkit already imported); what it saw goes to `result<rank>.json` in the run's
directory."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

# Ops of the workload. "sub_*" run on a subgroup of every rank but the last; "solo_batch" runs a
# coalesced batch and a list all_gather on the rank's own one-rank group (NCCL launches a
# one-rank communicator's collectives at the call, not at the batch's end); the batch and the
# coalesced ops each launch as one batch; "ddp_step" is a training step of a model under torch's
# DistributedDataParallel, whose reducer all-reduces the gradients through the group (the first
# one also builds the model, which broadcasts its parameters and checks their shapes).
OPS = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all", "ring", "batch_ring",
       "coalesced", "sub_all_reduce", "sub_broadcast", "solo_batch", "ddp_step")
ELEMENTS = 1 << 12
SIGNALS = ("kill", "kill_store", "stop")  # faults the faulty rank's own thread strikes
DISRUPTIVE = SIGNALS + ("sim_stall", "sim_error")  # the faulty rank leaves the group
RENDEZVOUS_TIMEOUT = timedelta(seconds=60)  # the launch; the groups have the run's timeout
# The calls of torch.distributed the workload makes whose own duration is timed (_CallClock).
# isend and irecv are left as they are: P2POp accepts only torch's own functions; the ring
# times its calls itself.
SYNC_CALLS = ("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor",
              "all_to_all_single")
TIMED_CALLS = SYNC_CALLS + ("batch_isend_irecv",)


class _CallClock:
    """torch.distributed with the workload's op calls timed apart from the waits on their works:
    how long the longest call of the current op took to return (`longest`) and all its calls
    together (`total`). A call that returns only after the group's timeout blocked where no
    work yet existed for the watchdog to fail: inside NCCL's connect, in blocking mode, waiting
    for a peer that met and then stopped (docs/backends.md). A wait on a work past the timeout is
    what the watchdog must always fail. The judge tells the two apart by these times.

    A synchronous collective is made as torch makes it, the call and then its work's wait, with
    the call alone timed (on the simulated device a work's wait blocks the host, so timing the
    synchronous call would time the wait too). Calls inside a coalescing block only queue (torch
    issues nothing until the block ends), so they pass through and the block's exit is timed.
    Not timed: the collectives DDP's model building and reducer make themselves; their time
    counts as waiting, which can only fail a run, never excuse one."""

    def __init__(self, dist):
        self._dist = dist
        self._wrapped: dict = {}
        self._batching = False
        self.reset()

    def reset(self) -> None:
        self.longest = self.total = 0.0
        self.longest_ended_at = None  # wall clock, comparable with the campaign's fault times

    def timed(self, call):
        def run(*args, **kwargs):
            began = time.monotonic()
            try:
                return call(*args, **kwargs)
            finally:
                took = time.monotonic() - began
                if took >= self.longest:
                    self.longest, self.longest_ended_at = took, time.time()
                self.total += took
        return run

    def _call_then_wait(self, call):
        timed = self.timed(call)

        def run(*args, async_op=False, **kwargs):
            if async_op or self._batching:
                return call(*args, async_op=async_op, **kwargs)
            work = timed(*args, async_op=True, **kwargs)
            if work is not None:  # torch's synchronous path: the call, then its work's wait
                work.wait()
            return None
        return run

    def _coalescing_manager(self, *args, **kwargs):
        # The batch launches as the block ends: that exit is the call that may connect.
        manager = self._dist._coalescing_manager(*args, **kwargs)
        clock = self

        class Timed:
            def __enter__(self):
                clock._batching = True
                return manager.__enter__()

            def __exit__(self, *exc):
                clock._batching = False
                return clock.timed(manager.__exit__)(*exc)
        return Timed()

    def __getattr__(self, name):
        value = getattr(self._dist, name)
        if name not in TIMED_CALLS:
            return value
        if name not in self._wrapped:
            self._wrapped[name] = self._call_then_wait(value) if name in SYNC_CALLS else self.timed(value)
        return self._wrapped[name]


@dataclass(frozen=True)
class RankPlan:
    """What one run asks of every rank: the same for all of them but `rank`."""
    rank: int
    world: int
    backend: str          # a toolkit backend name (migrate-legacy, migrate-nccl2, migrate-lazy)
    world_kind: str       # "cpu-bound" (Gloo) or "sim-bound" (the simulated device)
    timeout_s: float
    ops: tuple[str, ...]  # the workload, the same on every rank
    fault: str            # none, kill, kill_store, stop, slow, sim_stall, sim_error
    faulty_rank: int
    fault_at: int         # the op index where a signal or delay strikes the faulty rank
    fault_delay_s: float  # after the op was issued (signals) or before it (slow)
    directory: str


def workload(seed: int, length: int) -> tuple[str, ...]:
    """The op sequence of a run: every kind once, then random ones; the last is a world
    all_reduce, so every rank meets every other before the workload ends."""
    rng = random.Random(seed)
    ops = list(OPS) + [rng.choice(OPS) for _ in range(max(0, length - len(OPS) - 1))]
    rng.shuffle(ops)
    return tuple(ops) + ("all_reduce",)


def _value(index: int, rank: int) -> float:
    return float((index + 1) * 10 + rank + 1)


def _check(name: str, index: int, got, want) -> None:
    if got != want:
        raise AssertionError(f"op {index} ({name}): wrong result {got!r}, expected {want!r}")


def _run_op(dist, torch, name: str, index: int, rank: int, world: int, sub, solo) -> None:
    """Runs op `index` and checks its result against what it must be (computed without any
    collective)."""
    mine = _value(index, rank)
    everyone = [_value(index, r) for r in range(world)]
    if name == "all_reduce":
        t = torch.full((ELEMENTS,), mine)
        dist.all_reduce(t)
        _check(name, index, t[0].item(), sum(everyone))
    elif name == "broadcast":
        root = index % world
        t = torch.full((ELEMENTS,), mine)
        dist.broadcast(t, src=root)
        _check(name, index, t[-1].item(), everyone[root])
    elif name == "all_gather":
        out = torch.empty(world * ELEMENTS)
        dist.all_gather_into_tensor(out, torch.full((ELEMENTS,), mine))
        _check(name, index, out[::ELEMENTS].tolist(), everyone)
    elif name == "reduce_scatter":
        out = torch.empty(ELEMENTS)
        dist.reduce_scatter_tensor(out, torch.full((world * ELEMENTS,), mine))
        _check(name, index, out[0].item(), sum(everyone))
    elif name == "all_to_all":
        out = torch.empty(world * 4)
        source = torch.arange(world * 4, dtype=torch.float32) + 100 * rank
        dist.all_to_all_single(out, source)
        _check(name, index, out[::4].tolist(), [100.0 * r + 4 * rank for r in range(world)])
    elif name in ("ring", "batch_ring"):
        right, left = (rank + 1) % world, (rank - 1) % world
        out = torch.empty(ELEMENTS)
        mine_t = torch.full((ELEMENTS,), mine)
        if name == "ring":
            # Even ranks send first, odd ranks receive first: a lone send or recv creates its pair's
            # communicator under the legacy behaviours, and a ring in which every rank sent first
            # would wait in a circle for its pairs to form (as on torch's legacy NCCL backend).
            ops = [dist.isend, dist.irecv] if rank % 2 == 0 else [dist.irecv, dist.isend]
            timed = dist.timed if isinstance(dist, _CallClock) else (lambda call: call)
            works = [timed(op)(mine_t, right) if op is dist.isend else timed(op)(out, left) for op in ops]
        else:
            works = dist.batch_isend_irecv([dist.P2POp(dist.isend, mine_t, right), dist.P2POp(dist.irecv, out, left)])
        for work in works:
            work.wait()
        _check(name, index, out[0].item(), everyone[left])
    elif name == "coalesced":
        a, b = torch.full((ELEMENTS,), mine), torch.full((7,), 2 * mine)
        with dist._coalescing_manager(async_ops=True) as batch:
            dist.all_reduce(a)
            dist.all_reduce(b)
        batch.wait()
        _check(name, index, (a[0].item(), b[0].item()), (sum(everyone), 2 * sum(everyone)))
    elif name == "ddp_step":
        model = _ddp_model(dist, torch)
        model.zero_grad(set_to_none=True)
        model(torch.full((4, 8), mine)).sum().backward()
        # d(sum of x @ w)/dw is the column sums of x (4 * mine); DDP averages it over the ranks.
        want = 4 * sum(everyone) / world
        got = model.module.weight.grad[0, 0].item()
        if not abs(got - want) <= 1e-5 * want:  # a NaN fails too
            _check(name, index, got, want)
    elif name == "solo_batch":
        # On a group of one, every result is the rank's own input.
        a, b = torch.full((ELEMENTS,), mine), torch.full((5,), -mine)
        with dist._coalescing_manager(group=solo, async_ops=True) as batch:
            dist.all_reduce(a, group=solo)
            dist.all_reduce(b, group=solo)
        batch.wait()
        gathered = [torch.empty(ELEMENTS)]
        dist.all_gather(gathered, torch.full((ELEMENTS,), 3 * mine), group=solo)
        _check(name, index, (a[0].item(), b[-1].item(), gathered[0][-1].item()), (mine, -mine, 3 * mine))
    elif name in ("sub_all_reduce", "sub_broadcast"):
        if sub is None:
            return  # not a member: the members' op does not involve this rank
        members = everyone[: world - 1]
        t = torch.full((ELEMENTS,), mine)
        if name == "sub_all_reduce":
            dist.all_reduce(t, group=sub)
            _check(name, index, t[0].item(), sum(members))
        else:
            dist.broadcast(t, src=0, group=sub)
            _check(name, index, t[0].item(), members[0])
    else:
        raise ValueError(f"unknown op {name!r}")


_DDP_MODEL: list = []  # the rank's model under DDP, built by its first step


def _ddp_model(dist, torch):
    """A linear layer under DistributedDataParallel on the world group: built once, by the
    first step (so its broadcast and shape check are that op's collectives)."""
    if not _DDP_MODEL:
        layer = torch.nn.Linear(8, 1, bias=False)
        _DDP_MODEL.append(torch.nn.parallel.DistributedDataParallel(layer, process_group=dist.group.WORLD))
    return _DDP_MODEL[0]


def _write(directory: str, name: str, data: dict) -> None:
    tmp = os.path.join(directory, f".{name}.tmp")
    with open(tmp, "w") as out:
        json.dump(data, out)
    os.replace(tmp, os.path.join(directory, name))


def _strike(plan: RankPlan, issued: threading.Event, struck: threading.Event) -> None:
    """The signal fault, from a thread: once op `fault_at` is issued (or about to be), after the
    plan's delay. The time is written first, so the campaign knows when the fault struck."""
    issued.wait()
    time.sleep(plan.fault_delay_s)
    _write(plan.directory, "fault.json", {"rank": plan.rank, "at": time.time()})
    os.kill(os.getpid(), signal.SIGSTOP if plan.fault == "stop" else signal.SIGKILL)
    struck.set()  # resumed (SIGSTOP); a killed rank never gets here


def _recover(dist, torch, plan: RankPlan, hook_ran: threading.Event, result: dict, store, members: list[int]):
    """What a survivor does once an op raised: the abort hook's word, then the group shrunk
    without the faulty rank and one all_reduce on it. With the store's host dead (kill_store)
    no shrink can connect anyone: shrink must say so, and the survivors re-form the job on a
    new store hosted by the lowest of them, as a job's restart logic would. Returns the store
    and members the rank leaves with."""
    result["abort_hook_ran"] = hook_ran.wait(timeout=2.0)
    started = time.time()
    survivors = [r for r in range(plan.world) if r != plan.faulty_rank]
    shrink: dict = {}
    try:
        # SHRINK_ABORT: ops still pending on the failed group (a ring's send whose receive
        # failed) are aborted, as NCCL's guide recommends for removing failed ranks.
        group = dist.shrink_group([plan.faulty_rank], shrink_flags=dist.distributed_c10d.SHRINK_ABORT)
    except Exception as error:  # noqa: BLE001 - the campaign reports it
        shrink["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
        group = None
        if plan.fault == "kill_store" and "store" in shrink["error"]:
            try:
                store, group = _reformed(dist, plan, survivors, shrink)
            except Exception as error:  # noqa: BLE001 - a recovery that fails is a finding about it
                shrink["error"] += f"; re-forming failed: {type(error).__name__}: {str(error).splitlines()[0][:300]}"
    if group is not None:
        try:
            t = torch.full((ELEMENTS,), float(plan.rank + 1))
            dist.all_reduce(t, group=group)
            want = float(sum(r + 1 for r in survivors))
            shrink.update(sum=t[0].item(), want=want, size=group.size())
            shrink["ok"] = t[0].item() == want and group.size() == len(survivors)
        except Exception as error:  # noqa: BLE001
            shrink["error"] = f"the shrunk group's all_reduce: {type(error).__name__}: {str(error).splitlines()[0][:300]}"
    shrink.setdefault("ok", False)
    shrink["seconds"] = time.time() - started
    result["shrink"] = shrink
    return store, survivors


def _reformed(dist, plan: RankPlan, survivors: list[int], shrink: dict):
    """The survivors' world on a new store, once shrink said the old one is gone."""
    shrink["how"] = "re-formed on a new store"
    dist.destroy_process_group()
    store = dist.TCPStore("127.0.0.1", int(os.environ["FAULTS_RECOVERY_PORT"]), len(survivors),
                          is_master=plan.rank == survivors[0], timeout=timedelta(seconds=plan.timeout_s * 3))
    from worlds import init

    # Survivors come up to one timeout apart (as at shrink, which waits twice the timeout): the
    # re-formed world's members are given as long to meet.
    init(plan.world_kind, plan.backend, survivors.index(plan.rank), len(survivors), store,
         timeout=timedelta(seconds=plan.timeout_s * 2))
    return store, dist.group.WORLD


def run_rank(plan: RankPlan) -> None:
    """The rank's whole life; ends the process (os._exit) with 0 when it wrote its result."""
    import torch
    import torch.distributed as dist
    from worlds import (
        init,  # tests/python/worlds.py: the bound worlds the test suites use
    )

    torch.set_num_threads(1)
    # slowest_op: the longest an op took that then succeeded (one blocked past its timeout that
    # succeeded later means the timeout was not enforced).
    # slowest_wait: the longest an op that succeeded spent outside its calls (waiting on its
    # works): what the watchdog bounds in every mode.
    result: dict = {"rank": plan.rank, "pid": os.getpid(), "completed_ops": 0,
                    "slowest_op": {"index": None, "name": None, "seconds": 0.0, "call_seconds": 0.0},
                    "slowest_wait": {"index": None, "name": None, "seconds": 0.0},
                    "longest_call": {"index": None, "name": None, "call_seconds": 0.0, "call_ended_at": None}}
    calls = _CallClock(dist)
    hook_ran = threading.Event()
    issued, struck = threading.Event(), threading.Event()
    faulty = plan.rank == plan.faulty_rank
    if faulty and plan.fault in SIGNALS:
        threading.Thread(target=_strike, args=(plan, issued, struck), daemon=True).start()

    # The launch is not what is measured, and under a loaded campaign one rank's start can lag
    # another's by more than the groups' few seconds (a job's ten-minute default absorbs that).
    # So the ranks load what init would load, meet through env:// as torch reads it with a
    # minute to come up, and leave together: torch's TCPStore lets a client go on as soon as it
    # connected, before the last rank has. The store then keeps the groups' timeout, as env://
    # init would have left it.
    _load_backends(plan)
    rendezvous_store, _, _ = next(dist.rendezvous("env://", plan.rank, plan.world, timeout=RENDEZVOUS_TIMEOUT))
    rendezvous_store.set(f"faults/up/{plan.rank}", "1")
    rendezvous_store.wait([f"faults/up/{r}" for r in range(plan.world)], RENDEZVOUS_TIMEOUT)
    rendezvous_store.set_timeout(timedelta(seconds=plan.timeout_s))
    init(plan.world_kind, plan.backend, plan.rank, plan.world, rendezvous_store,
         timeout=timedelta(seconds=plan.timeout_s))
    store = dist.distributed_c10d._get_default_store()
    # torch gives a group made without a timeout its own default (30 min), not the world's: a
    # job that wants its subgroup ops bounded passes the timeout, as the campaign does.
    sub = dist.new_group(list(range(plan.world - 1)), timeout=timedelta(seconds=plan.timeout_s))
    sub = sub if plan.rank < plan.world - 1 else None
    solo, _ = dist.new_subgroups(group_size=1, timeout=timedelta(seconds=plan.timeout_s))
    for group in (dist.group.WORLD, sub, solo):
        if group is not None:
            group.register_abort_hook(11, hook_ran.set)  # hooks are per group: each group's failure runs its own
    # The fault strikes in the workload, at its op, never in another rank's set-up: the first op
    # may be one of a one-rank group, which waits for no one, so a faulty rank that made its groups
    # first would otherwise strike while a slower rank still creates its own (one kill_store run
    # failed so: a rank's group creation lost the store, outside any op the campaign measures).
    # Bounded well inside the run's deadline: a rank that crashed in its set-up is reported as the
    # crash it is, and the others raise here instead of counting as hangs.
    rendezvous_store.set(f"faults/ready/{plan.rank}", "1")
    rendezvous_store.wait([f"faults/ready/{r}" for r in range(plan.world)], timedelta(seconds=2 * plan.timeout_s))
    for index, name in enumerate(plan.ops):
        if faulty and index == plan.fault_at:
            if plan.fault == "slow":
                time.sleep(plan.fault_delay_s)
            issued.set()
        result["op"] = {"index": index, "name": name, "issued_at": time.time()}
        began = time.monotonic()
        calls.reset()
        try:
            _run_op(calls, torch, name, index, plan.rank, plan.world, sub, solo)
            seconds = time.monotonic() - began
            if seconds > result["slowest_op"]["seconds"]:
                result["slowest_op"] = {"index": index, "name": name, "seconds": seconds,
                                        "call_seconds": calls.longest}
            if calls.longest > result["longest_call"]["call_seconds"]:
                result["longest_call"] = {"index": index, "name": name, "call_seconds": calls.longest,
                                          "call_ended_at": calls.longest_ended_at}
            if seconds - calls.total > result["slowest_wait"]["seconds"]:
                result["slowest_wait"] = {"index": index, "name": name, "seconds": seconds - calls.total}
            if issued.is_set() and index == plan.fault_at and plan.fault in SIGNALS:
                struck.wait(60)  # the signal strikes here at the latest; the rank must not have gone on
        except AssertionError as wrong:
            if name == "ddp_step" and plan.world_kind == "sim-bound" and "read_failed_op" not in result:
                # A device op's future completes with its outputs whatever becomes of the op, as on
                # torch's NCCL backends, so DDP's reducer may read a failed all_reduce's buffers;
                # the failure must reach the job through the group's next op (the judge checks).
                result["read_failed_op"] = {"index": index, "message": str(wrong)}
                continue
            result["wrong_result"] = str(wrong)
            break
        except Exception as error:  # noqa: BLE001 - what raised, and when, is the measurement
            result["raised"] = {"type": type(error).__name__, "at": time.time(),
                                "message": str(error).splitlines()[0][:400] if str(error) else ""}
            # The op's longest call: the one that raised, or one that returned before a wait raised.
            result["op"].update(call_seconds=calls.longest, call_ended_at=calls.longest_ended_at)
            break
        result["completed_ops"] = index + 1
    result["abort_hook_ran"] = hook_ran.is_set()
    members = [r for r in range(plan.world) if r != plan.faulty_rank or plan.fault not in DISRUPTIVE]
    if "raised" in result and not faulty:
        store, members = _recover(dist, torch, plan, hook_ran, result, store, members)
    _write(plan.directory, f"result{plan.rank}.json", result)
    if not faulty or plan.fault not in DISRUPTIVE:
        _leave(store, plan, members, result)
    try:
        dist.destroy_process_group()
    except Exception as error:  # noqa: BLE001
        result["destroy_error"] = f"{type(error).__name__}: {str(error)[:200]}"
    result["exited_at"] = time.time()
    _write(plan.directory, f"result{plan.rank}.json", result)
    os._exit(0)


def _load_backends(plan: RankPlan) -> None:
    """Imports and registers the run's backend as init would (idempotent there)."""
    import nccl_migrate  # noqa: F401
    import worlds

    if plan.world_kind == "sim-bound":
        worlds.register_simulated(plan.backend)


def _leave(store, plan: RankPlan, members: list[int], result: dict) -> None:
    """Leaves once every member is done: the process hosting the store (the first member) waits
    for the others, so no rank still finishing its last op loses the store under it (the
    simulated device moves its data through the store, and a job's exit would kill it)."""
    try:
        store.set(f"faults/left/{plan.rank}", "1")
        if plan.rank == members[0]:
            store.wait([f"faults/left/{r}" for r in members], timedelta(seconds=plan.timeout_s * 3))
    except Exception as error:  # noqa: BLE001
        result["leave_error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
