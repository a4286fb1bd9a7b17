"""The fault campaign (tests/faults/fault_campaign.py) as CI runs it: a seeded subset, one run
per (fault x behaviour x transport) row, real 3- and 4-rank worlds on Gloo and on the simulated device; every
run must pass every check. Beside it, the campaign's judge is shown to fail the runs it must fail
(a hang, a crash, a late raise, a missing dump, a shrink that did not work, a slow rank's error),
so a green subset means the checks ran, not that nothing was checked."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tests", "faults"))

from fault_verdicts import RankOutcome, held_until, judge
from torch_support import requires_torch

TIMEOUT = 3.0
# Runs at once in the seeded subset: two, as the full campaign runs on the 2-core machine
# (docs/backends.md: 1949 of its 1950 runs passed that way, the one failure the campaign's own),
# and no more than the cores. Each run mostly waits out its group's timeout, so two at once halve
# the subset's time; tools/test.sh runs this file in its phase alone, with nothing beside it.
CAMPAIGN_JOBS = max(1, min(2, os.cpu_count() or 1))


def _survivor(issued=100.0, raised=103.2, error="DistBackendError", hook=True, shrink=True):
    return {"op": {"index": 4, "name": "all_reduce", "issued_at": issued},
            "raised": {"type": error, "at": raised, "message": "..."}, "abort_hook_ran": hook,
            "shrink": {"ok": shrink, **({} if shrink else {"error": "DistStoreError: gone"})}, "completed_ops": 4}


def _kill_run(**survivor):
    """A 3-rank run whose rank 2 was killed at t=100.0; ranks 0 and 1 survived."""
    outcomes = [RankOutcome(exit_code=0, result=_survivor(**survivor), dump_mtime=103.3) for _ in range(2)]
    return outcomes + [RankOutcome(signal=signal.SIGKILL)]


def test_the_judge_passes_a_run_that_meets_every_check():
    verdict = judge("kill", 2, TIMEOUT, 16, _kill_run(), 100.0, None)
    assert verdict.ok, verdict.problems
    assert verdict.survivors == verdict.survivors_raised == 2
    assert verdict.seconds_past_timeout == pytest.approx([0.2, 0.2])


@pytest.mark.parametrize("change,problem", [
    (lambda o: setattr(o[0], "hung", True), "rank 0 hung"),
    (lambda o: (setattr(o[1], "exit_code", None), setattr(o[1], "signal", signal.SIGSEGV)), "died by signal SIGSEGV"),
    (lambda o: setattr(o[1], "exit_code", 134), "exited with code 134"),
    (lambda o: o[0].result["raised"].update(at=105.5), "2.50 s past its timeout"),
    (lambda o: o[0].result["raised"].update(type="RuntimeError"), "raised RuntimeError"),
    (lambda o: o[1].result.update(abort_hook_ran=False), "abort hook did not run"),
    (lambda o: setattr(o[0], "dump_mtime", None), "no flight-recorder dump"),
    (lambda o: setattr(o[0], "dump_mtime", 104.6), "dump written 1.40 s after"),
    (lambda o: o[1].result.update(shrink={"ok": False, "error": "timed out"}), "shrink failed: timed out"),
    (lambda o: o[0].result.pop("raised"), "raised nothing"),
    (lambda o: (setattr(o[2], "signal", None), setattr(o[2], "exit_code", 0)), "exited by itself"),
    (lambda o: o[0].result.update(slowest_op={"index": 9, "name": "sub_all_reduce", "seconds": 5.6}),
     "op 9 (sub_all_reduce) succeeded after 5.60 s"),
], ids=["hang", "signal", "exit-code", "late", "type", "hook", "no-dump", "late-dump", "shrink", "no-raise", "not-killed",
        "unenforced-timeout"])
def test_the_judge_fails_a_run_that_misses_one_check(change, problem):
    outcomes = _kill_run()
    change(outcomes)
    verdict = judge("kill", 2, TIMEOUT, 16, outcomes, 100.0, None)
    assert not verdict.ok
    assert any(problem in p for p in verdict.problems), verdict.problems


def test_the_judge_fails_unreadable_dumps_and_a_slow_rank_that_made_an_op_fail():
    assert "torchfrtrace" in judge("kill", 2, TIMEOUT, 16, _kill_run(), 100.0, "bad pickle").problems[0]
    undisturbed = [RankOutcome(exit_code=0, result={"completed_ops": 16}) for _ in range(3)]
    assert judge("slow", 1, TIMEOUT, 16, undisturbed, None, None).ok
    undisturbed[1].result = {"completed_ops": 3, "raised": {"type": "DistBackendError", "at": 1.0, "message": "x"}}
    assert "rank 1 raised DistBackendError" in judge("slow", 1, TIMEOUT, 16, undisturbed, None, None).problems[0]


HELD_UNTIL = TIMEOUT + 1.5  # the campaign resumes a stopped rank 1.5 s after the timeout


def _stop_run(call_seconds=4.5, raised=False, wait_seconds=0.01):
    """A 3-rank run whose rank 2 was stopped at t=100.0 and resumed at 104.5; ranks 0 and 1
    survived, their op (the first all_gather) lasting 4.5 s, of which `call_seconds` in the call
    and `wait_seconds` waiting on its work, then completing every op or (`raised`) raising at 105.5."""
    def survivor():
        if raised:
            result = _survivor(issued=100.0, raised=105.5)
            result["op"].update(call_seconds=call_seconds, call_ended_at=105.5)
            return result
        return {"completed_ops": 16, "abort_hook_ran": False,
                "slowest_op": {"index": 2, "name": "all_gather", "seconds": call_seconds + wait_seconds,
                               "call_seconds": call_seconds},
                "longest_call": {"index": 2, "name": "all_gather", "call_seconds": call_seconds,
                                 "call_ended_at": 100.0 + call_seconds},
                "slowest_wait": {"index": 2, "name": "all_gather", "seconds": wait_seconds}}
    outcomes = [RankOutcome(exit_code=0, result=survivor(), dump_mtime=105.6 if raised else None) for _ in range(2)]
    return outcomes + [RankOutcome(exit_code=0, result={"completed_ops": 16})]


def test_a_call_held_in_the_connect_by_a_stopped_peer_is_counted_apart_where_blocking_mode_holds_it():
    # Blocking mode's connect holds the call until the stopped peer resumes (docs/backends.md):
    # counted apart, never as raised in time; the same run in nonblocking mode, or with a killed
    # peer, fails.
    verdict = judge("stop", 2, TIMEOUT, 16, _stop_run(), 100.0, "no dumps", held_until_s=HELD_UNTIL)
    assert verdict.ok, verdict.problems
    assert (verdict.blocked_in_call, verdict.survivors_raised, verdict.survivors) == (2, 0, 2)
    nonblocking = judge("stop", 2, TIMEOUT, 16, _stop_run(), 100.0, "no dumps")
    assert any("rank 0 raised nothing" in p for p in nonblocking.problems), nonblocking.problems
    assert nonblocking.blocked_in_call == 0
    killed = _stop_run()
    killed[2] = RankOutcome(signal=signal.SIGKILL)
    assert not judge("kill", 2, TIMEOUT, 16, killed, 100.0, "no dumps", held_until_s=HELD_UNTIL).ok


def test_an_op_whose_wait_outlasted_the_timeout_is_never_excused():
    # The call returned in time and the wait on its work then lasted past the timeout and its
    # margin (5 s): the watchdog did not enforce the timeout, whatever the mode.
    waited = judge("stop", 2, TIMEOUT, 16, _stop_run(call_seconds=0.01, wait_seconds=5.49), 100.0, "no dumps",
                   held_until_s=HELD_UNTIL)
    assert waited.blocked_in_call == 0
    assert any("rank 0 raised nothing" in p for p in waited.problems), waited.problems
    assert any("op 2 (all_gather) waited 5.49 s on its work" in p for p in waited.problems), waited.problems
    # Held in its call, and then waiting past the timeout as well: the wait still fails it.
    both = judge("stop", 2, TIMEOUT, 16, _stop_run(wait_seconds=5.2), 100.0, "no dumps", held_until_s=HELD_UNTIL)
    assert any("op 2 (all_gather) waited 5.20 s on its work" in p for p in both.problems), both.problems


def test_a_held_call_may_last_until_its_peer_resumed_and_no_longer():
    late = judge("stop", 2, TIMEOUT, 16, _stop_run(call_seconds=7.0), 100.0, "no dumps", held_until_s=HELD_UNTIL)
    assert any("op 2 (all_gather)'s call returned 2.50 s after its stopped peer resumed" in p
               for p in late.problems), late.problems
    # A raise: by the resume and the margin, counted apart; later fails.
    held = _stop_run(raised=True)
    assert judge("stop", 2, TIMEOUT, 16, held, 100.0, None, held_until_s=HELD_UNTIL).ok
    for outcome in held[:2]:
        outcome.result["raised"]["at"] = 107.0
        outcome.dump_mtime = 107.1
    problems = judge("stop", 2, TIMEOUT, 16, held, 100.0, None, held_until_s=HELD_UNTIL).problems
    assert any("rank 0 raised 2.50 s after its stopped peer resumed" in p for p in problems), problems


def test_a_held_call_is_bounded_by_when_its_peer_was_really_resumed():
    # The watcher sent SIGCONT 3.5 s later than planned (a loaded machine): the held call that
    # returned with it, 5 s past the planned resume, is judged against the real resume and
    # passes; against the plan it would fail. A call returning later than the margin still fails.
    late_watcher = _stop_run(call_seconds=9.5)
    late_watcher[2].resumed_at = 108.0
    held = held_until(late_watcher, 100.0, HELD_UNTIL)
    assert held == pytest.approx(8.0)
    assert judge("stop", 2, TIMEOUT, 16, late_watcher, 100.0, "no dumps", held_until_s=held).ok
    assert not judge("stop", 2, TIMEOUT, 16, late_watcher, 100.0, "no dumps", held_until_s=HELD_UNTIL).ok
    assert not judge("stop", 2, TIMEOUT, 16, _stop_run(call_seconds=10.5), 100.0, "no dumps", held_until_s=held).ok
    # Never resumed (or no fault time): the plan stands.
    assert held_until(_stop_run(), 100.0, HELD_UNTIL) == HELD_UNTIL
    assert held_until(late_watcher, None, HELD_UNTIL) == HELD_UNTIL


@pytest.mark.parametrize("call_seconds", [0.2, TIMEOUT + 0.05])
def test_a_raise_in_time_counts_as_raised_even_where_calls_may_be_held(call_seconds):
    # A call that returned early, or gave up at its timeout before the peer resumed, was not
    # held: it counts with the survivors that raised, its lateness measured.
    in_time = _stop_run(raised=True)
    for outcome in in_time[:2]:
        outcome.result["op"].update(call_seconds=call_seconds, call_ended_at=100.0 + call_seconds)
        outcome.result["raised"]["at"] = 103.05
        outcome.dump_mtime = 103.1
    verdict = judge("stop", 2, TIMEOUT, 16, in_time, 100.0, None, held_until_s=HELD_UNTIL)
    assert verdict.ok, verdict.problems
    assert (verdict.survivors_raised, verdict.blocked_in_call) == (2, 0)
    assert verdict.seconds_past_timeout == pytest.approx([0.05, 0.05])


def test_only_the_held_op_is_excused_and_only_until_the_resume():
    # Returned 2.9 s after the resume (it began 1 s after the fault): past the margin.
    late = _stop_run(call_seconds=6.4)
    for outcome in late[:2]:
        outcome.result["longest_call"]["call_ended_at"] = 107.4
    problems = judge("stop", 2, TIMEOUT, 16, late, 100.0, "no dumps", held_until_s=HELD_UNTIL).problems
    assert any("'s call returned 2.90 s after its stopped peer resumed" in p for p in problems), problems
    # A call that began after the resume was not held by it: an unenforced timeout.
    after = _stop_run(call_seconds=6.4)
    for outcome in after[:2]:
        outcome.result["longest_call"]["call_ended_at"] = 111.0
    problems = judge("stop", 2, TIMEOUT, 16, after, 100.0, "no dumps", held_until_s=HELD_UNTIL).problems
    assert any("raised nothing" in p for p in problems) and any("succeeded after 6.41 s" in p for p in problems), problems
    # Another op, slower than the timeout and the margin, is not excused by the held one.
    other = _stop_run()
    for outcome in other[:2]:
        outcome.result["slowest_op"] = {"index": 9, "name": "sub_all_reduce", "seconds": 6.0, "call_seconds": 0.1}
    problems = judge("stop", 2, TIMEOUT, 16, other, 100.0, "no dumps", held_until_s=HELD_UNTIL).problems
    assert any("op 9 (sub_all_reduce) succeeded after 6.00 s" in p for p in problems), problems
    # Held, then stopped short of the workload without raising.
    short = _stop_run()
    short[0].result["completed_ops"] = 5
    problems = judge("stop", 2, TIMEOUT, 16, short, 100.0, "no dumps", held_until_s=HELD_UNTIL).problems
    assert any("rank 0: held in a call, then completed 5 of 16 ops" in p for p in problems), problems


def test_where_no_call_may_be_held_a_call_until_the_resume_fails_even_when_it_raised_in_the_margin():
    held = _stop_run(raised=True)
    for outcome in held[:2]:
        outcome.result["raised"]["at"] = 104.6
        outcome.dump_mtime = 104.7
    assert judge("stop", 2, TIMEOUT, 16, held, 100.0, None).ok  # the raise alone is within the margin
    problems = judge("stop", 2, TIMEOUT, 16, held, 100.0, None, call_limit_s=TIMEOUT + 1.2).problems
    assert any("rank 0: a call lasted 4.50 s where none may be held (limit 4.2 s)" in p for p in problems), problems


def test_a_held_call_that_raised_still_needs_its_hook_dump_and_shrink():
    late = judge("stop", 2, TIMEOUT, 16, _stop_run(raised=True), 100.0, None, held_until_s=HELD_UNTIL)
    assert late.ok, late.problems
    assert late.blocked_in_call == 2 and late.seconds_past_timeout == []
    unbounded = judge("stop", 2, TIMEOUT, 16, _stop_run(raised=True), 100.0, None)
    assert any("rank 0 raised 2.50 s past its timeout" in p for p in unbounded.problems), unbounded.problems
    no_dump = _stop_run(raised=True)
    no_dump[0].dump_mtime = None
    no_dump[1].result["shrink"] = {"ok": False, "error": "timed out"}
    problems = judge("stop", 2, TIMEOUT, 16, no_dump, 100.0, None, held_until_s=HELD_UNTIL).problems
    assert any("rank 0: no flight-recorder dump" in p for p in problems), problems
    assert any("rank 1: shrink failed" in p for p in problems), problems


def test_the_call_clock_times_a_synchronous_collective_apart_from_its_wait(monkeypatch):
    # torch's synchronous all_reduce is the call and then its work's wait; the clock makes it so
    # itself and times the call alone. A world of one over Gloo, its work's wait made slow.
    import torch
    import torch.distributed as dist
    from fault_ranks import _CallClock

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        issued = []
        real = dist.all_reduce

        def all_reduce(tensor, *args, async_op=False, **kwargs):
            issued.append(async_op)
            work = real(tensor, *args, async_op=async_op, **kwargs)

            class SlowWork:
                def wait(self):
                    time.sleep(0.3)
                    return work.wait()
            return SlowWork() if async_op else work

        monkeypatch.setattr(dist, "all_reduce", all_reduce)
        clock = _CallClock(dist)
        t = torch.full((4,), 2.0)
        began = time.monotonic()
        assert clock.all_reduce(t) is None
        took = time.monotonic() - began
        assert issued == [True] and t.tolist() == [2.0] * 4
        assert took >= 0.3 and clock.longest < 0.2 and clock.total == clock.longest
        # Inside a coalescing block a call only queues: it passes through as made, untimed.
        clock.reset()
        with clock._coalescing_manager(async_ops=True) as batch:
            clock.all_reduce(t)
        batch.wait()
        assert issued == [True, False] and t.tolist() == [2.0] * 4
        assert 0.0 < clock.longest == clock.total  # the block's exit, where the batch launches
    finally:
        dist.destroy_process_group()


_READ_FAILED = {"index": 6, "message": "op 6 (ddp_step): wrong result 51.0, expected 210.0"}


def test_a_ddp_step_that_read_a_failed_op_passes_only_when_a_later_op_reported_the_failure():
    # A device op's future completes with its outputs whatever becomes of the op (torch's NCCL
    # backends' contract), so DDP may step on a failed all_reduce's buffers: the run passes only
    # when that survivor then raised, and the row counts it.
    reported = _kill_run()
    reported[0].result["read_failed_op"] = _READ_FAILED
    verdict = judge("kill", 2, TIMEOUT, 16, reported, 100.0, None)
    assert verdict.ok, verdict.problems
    assert verdict.read_failed_op == 1
    unreported = _kill_run()
    unreported[0].result["read_failed_op"] = _READ_FAILED
    unreported[0].result.pop("raised")
    problems = judge("kill", 2, TIMEOUT, 16, unreported, 100.0, None).problems
    assert any("wrong result 51.0" in p and "no later op reported the failure" in p for p in problems), problems


def test_a_slow_rank_may_not_make_any_ddp_step_read_a_failed_op():
    undisturbed = [RankOutcome(exit_code=0, result={"completed_ops": 16}) for _ in range(3)]
    undisturbed[2].result["read_failed_op"] = _READ_FAILED
    assert "rank 2: op 6 (ddp_step): wrong result" in judge("slow", 1, TIMEOUT, 16, undisturbed, None, None).problems[0]


@pytest.mark.parametrize("fault", ["sim_stall", "sim_error"])
def test_a_simulated_device_fault_is_drawn_where_it_strikes(fault, tmp_path):
    # The simulated device counts its faults in the world communicator's collectives: a fault
    # drawn past the last one never strikes, and the run then tests nothing.
    import fault_campaign as faults

    for seed in [79738345, *range(2000)]:  # the first drew the 8th collective of a workload that runs 7
        plans, extra = faults._rank_plans(faults.Run(fault, "rewritten", "sim", 0, seed, 3.0), str(tmp_path))
        plan = plans[0]
        assert 2 <= plan.fault_at <= faults._world_collectives(plan.ops), (seed, plan.ops, plan.fault_at)
        assert str(plan.fault_at) in extra[plan.faulty_rank].values()


@requires_torch("cpu_device_id")  # every world of the campaign is device-bound
def test_the_seeded_subset_passes_every_check(tmp_path):
    """One run per row (39 rows), seeded; a failed run's logs and dumps are kept under tmp_path."""
    out = tmp_path / "campaign.json"
    campaign = os.path.join(ROOT, "tests", "faults", "fault_campaign.py")
    proc = subprocess.run([sys.executable, campaign, "--runs", "1", "--seed", "7", "--jobs", str(CAMPAIGN_JOBS),
                           "--json", str(out), "--keep", str(tmp_path / "failed")],
                          check=False, capture_output=True, text=True, timeout=1500)
    assert out.exists(), proc.stdout + proc.stderr
    runs = json.loads(out.read_text())["runs"]
    rows = {(r["run"]["fault"], r["run"]["behaviour"], r["run"]["transport"]) for r in runs}
    assert len(rows) == 39 and len(runs) == 39, sorted(rows)  # sim-nb: kill, stop, sim_error
    failed = [f"{r['run']['fault']}/{r['run']['behaviour']}/{r['run']['transport']}: {r['verdict']['problems']}"
              for r in runs if not r["ok"]]
    assert not failed, "\n".join(failed) + "\n" + proc.stdout[-3000:]
    passed = [r for r in runs if r["ok"]]
    assert all(r["verdict"]["survivors_raised"] + r["verdict"]["blocked_in_call"] == r["verdict"]["survivors"] > 0
               for r in passed if r["run"]["fault"] != "slow")
    # In nonblocking mode, NCCL's own thread connects: no survivor's call may outlast the timeout.
    for r in runs:
        if r["run"]["transport"] == "sim-nb":
            assert r["survivor_calls"] and max(r["survivor_calls"]) <= 3.0 + 1.2, (r["run"], r["survivor_calls"])
    assert {r["world"] for r in runs} == {3, 4}
    assert proc.returncode == 0, proc.stdout + proc.stderr
