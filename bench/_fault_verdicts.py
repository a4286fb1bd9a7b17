"""Judging one fault-campaign run (bench/faults.py) from what its processes left: their wait
statuses, their result files, their flight-recorder dumps and torchfrtrace's reading of them.
Pure functions of those facts, so the judgement can be tested apart from any run."""

from __future__ import annotations

import signal
import statistics
from dataclasses import dataclass, field

# How long past its group timeout a survivor may take to raise, and how long after raising its
# flight-recorder dump may appear (the bounds).
RAISE_MARGIN_S = 2.0
DUMP_MARGIN_S = 1.0
# The error types a survivor may raise: torch's for a failed collective.
ACCEPTED_ERRORS = ("DistBackendError",)
from _fault_ranks import DISRUPTIVE


@dataclass
class RankOutcome:
    """How one rank's process ended: `exit_code` or `signal` (by which it died), or `hung`
    (alive at the run's deadline, then killed); `result` is its result file, if it wrote one."""
    exit_code: int | None = None
    signal: int | None = None
    hung: bool = False
    result: dict | None = None
    dump_mtime: float | None = None


@dataclass
class Verdict:
    survivors: int = 0
    survivors_raised: int = 0
    seconds_past_timeout: list[float] = field(default_factory=list)
    hang: bool = False
    crash: bool = False
    dumps_ok: bool = True
    shrink_ok: bool = True
    read_failed_op: int = 0  # survivors whose DDP step read a failed op's buffers and raised later
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def judge(fault: str, faulty_rank: int, timeout_s: float, op_count: int, outcomes: list[RankOutcome],
          fault_at: float | None, frtrace_error: str | None) -> Verdict:
    """`fault_at`: when the signal struck (None for faults the rank cannot time);
    `frtrace_error`: why torchfrtrace could not read the run's dumps (None when it could)."""
    verdict = Verdict()
    for rank, outcome in enumerate(outcomes):
        _judge_process(verdict, rank, outcome, fault if rank == faulty_rank else "none")
        if rank != faulty_rank or fault not in DISRUPTIVE:  # a stopped rank's op ends when it resumes
            _judge_op_times(verdict, rank, outcome, timeout_s)
    if fault in DISRUPTIVE:
        for rank, outcome in enumerate(outcomes):
            if rank != faulty_rank:
                _judge_survivor(verdict, rank, outcome, timeout_s, fault_at)
        if frtrace_error:
            verdict.dumps_ok = False
            verdict.problems.append(f"torchfrtrace could not read the dumps: {frtrace_error}")
    else:
        for rank, outcome in enumerate(outcomes):
            _judge_undisturbed(verdict, rank, outcome, op_count)
    return verdict


def _judge_process(verdict: Verdict, rank: int, outcome: RankOutcome, own_fault: str) -> None:
    if outcome.hung:
        verdict.hang = True
        verdict.problems.append(f"rank {rank} hung (alive at the run's deadline)")
        return
    if outcome.signal is not None:
        if own_fault in ("kill", "kill_store") and outcome.signal == signal.SIGKILL:
            return  # the fault itself
        verdict.crash = True
        verdict.problems.append(f"rank {rank} died by signal {signal.Signals(outcome.signal).name}")
        return
    if outcome.exit_code != 0:
        verdict.crash = True
        verdict.problems.append(f"rank {rank} exited with code {outcome.exit_code}")
    elif own_fault in ("kill", "kill_store"):
        verdict.problems.append(f"rank {rank} was to be killed but exited by itself")
    elif outcome.result is None:
        verdict.problems.append(f"rank {rank} exited without writing its result")
    elif "crash" in outcome.result:
        verdict.crash = True
        verdict.problems.append(f"rank {rank} failed outside the workload: {outcome.result['crash']}")


def _judge_op_times(verdict: Verdict, rank: int, outcome: RankOutcome, timeout_s: float) -> None:
    """An op that succeeded after blocking past its group's timeout (and the margin) means the
    timeout was never enforced: its peer's fault went unseen until the peer came back."""
    slowest = (outcome.result or {}).get("slowest_op") or {}
    if slowest.get("seconds", 0.0) > timeout_s + RAISE_MARGIN_S:
        verdict.problems.append(f"rank {rank}: op {slowest['index']} ({slowest['name']}) succeeded after "
                                f"{slowest['seconds']:.2f} s, past its {timeout_s:g} s timeout")


def _judge_survivor(verdict: Verdict, rank: int, outcome: RankOutcome, timeout_s: float,
                    fault_at: float | None) -> None:
    verdict.survivors += 1
    result = outcome.result or {}
    if "wrong_result" in result:
        verdict.problems.append(f"rank {rank}: {result['wrong_result']}")
    raised = result.get("raised")
    read_failed = result.get("read_failed_op")
    if read_failed and raised:
        verdict.read_failed_op += 1
    elif read_failed:
        verdict.problems.append(f"rank {rank}: {read_failed['message']}, and no later op reported the failure")
    if not raised:
        if outcome.result is not None:
            verdict.problems.append(f"rank {rank} raised nothing (completed {result.get('completed_ops')} ops)")
        verdict.dumps_ok = verdict.shrink_ok = False
        return
    if raised["type"] not in ACCEPTED_ERRORS:
        verdict.problems.append(f"rank {rank} raised {raised['type']}: {raised['message']}")
    else:
        verdict.survivors_raised += 1
    # The timeout counts from the op's issue; an op issued before the fault counts from the fault.
    started = max(result["op"]["issued_at"], fault_at or 0.0)
    past = raised["at"] - started - timeout_s
    verdict.seconds_past_timeout.append(past)
    if past > RAISE_MARGIN_S:
        verdict.problems.append(f"rank {rank} raised {past:.2f} s past its timeout ({result['op']['name']})")
    if not result.get("abort_hook_ran"):
        verdict.problems.append(f"rank {rank}: the abort hook did not run")
    if outcome.dump_mtime is None:
        verdict.dumps_ok = False
        verdict.problems.append(f"rank {rank}: no flight-recorder dump")
    elif outcome.dump_mtime - raised["at"] > DUMP_MARGIN_S:
        verdict.dumps_ok = False
        verdict.problems.append(f"rank {rank}: dump written {outcome.dump_mtime - raised['at']:.2f} s after it raised")
    shrink = result.get("shrink") or {"ok": False, "error": "not attempted"}
    if not shrink["ok"]:
        verdict.shrink_ok = False
        verdict.problems.append(f"rank {rank}: shrink failed: {shrink.get('error') or shrink}")


def _judge_undisturbed(verdict: Verdict, rank: int, outcome: RankOutcome, op_count: int) -> None:
    result = outcome.result or {}
    for wrong in (result.get("wrong_result"), (result.get("read_failed_op") or {}).get("message")):
        if wrong:
            verdict.problems.append(f"rank {rank}: {wrong}")
    if "raised" in result:
        verdict.problems.append(f"rank {rank} raised {result['raised']['type']}: {result['raised']['message']}")
    elif outcome.result is not None and result.get("completed_ops") != op_count:
        verdict.problems.append(f"rank {rank} completed {result.get('completed_ops')} of {op_count} ops")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]
