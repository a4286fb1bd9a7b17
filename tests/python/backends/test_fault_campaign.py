"""The fault campaign (bench/faults.py) as CI runs it: a seeded subset, one run per (fault x
behaviour x transport) row, real 3- and 4-rank worlds on Gloo and on the simulated device; every
run must pass every check. Beside it, the campaign's judge is shown to fail the runs it must fail
(a hang, a crash, a late raise, a missing dump, a shrink that did not work, a slow rank's error),
so a green subset means the checks ran, not that nothing was checked."""

import json
import os
import signal
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from _fault_verdicts import RankOutcome, judge

TIMEOUT = 3.0


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
    import faults

    for seed in [79738345, *range(2000)]:  # the first drew the 8th collective of a workload that runs 7
        plans, extra = faults._rank_plans(faults.Run(fault, "rewritten", "sim", 0, seed, 3.0), str(tmp_path))
        plan = plans[0]
        assert 2 <= plan.fault_at <= faults._world_collectives(plan.ops), (seed, plan.ops, plan.fault_at)
        assert str(plan.fault_at) in extra[plan.faulty_rank].values()


def test_the_seeded_subset_passes_every_check(tmp_path):
    """One run per row (30 rows), seeded; a failed run's logs and dumps are kept under tmp_path."""
    out = tmp_path / "campaign.json"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "faults.py"), "--runs", "1", "--seed", "7",
                           "--json", str(out), "--keep", str(tmp_path / "failed")],
                          capture_output=True, text=True, timeout=1500)
    assert out.exists(), proc.stdout + proc.stderr
    runs = json.loads(out.read_text())["runs"]
    rows = {(r["run"]["fault"], r["run"]["behaviour"], r["run"]["transport"]) for r in runs}
    assert len(rows) == 30 and len(runs) == 30, sorted(rows)
    failed = [f"{r['run']['fault']}/{r['run']['behaviour']}/{r['run']['transport']}: {r['verdict']['problems']}"
              for r in runs if not r["ok"]]
    assert not failed, "\n".join(failed) + "\n" + proc.stdout[-3000:]
    passed = [r for r in runs if r["ok"]]
    assert all(r["verdict"]["survivors_raised"] == r["verdict"]["survivors"] > 0
               for r in passed if r["run"]["fault"] != "slow")
    assert {r["world"] for r in runs} == {3, 4}
    assert proc.returncode == 0, proc.stdout + proc.stderr
