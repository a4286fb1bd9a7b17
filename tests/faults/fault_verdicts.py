"""Judging one fault-campaign run (tests/faults/fault_campaign.py) from what its processes
left: their wait statuses, their result files, their flight-recorder dumps and torchfrtrace's reading of them.
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
from fault_ranks import DISRUPTIVE


@dataclass
class RankOutcome:
    """How one rank's process ended: `exit_code` or `signal` (by which it died), or `hung`
    (alive at the run's deadline, then killed); `result` is its result file, if it wrote one;
    `resumed_at`: when a stopped rank was sent SIGCONT (wall clock), if it was."""
    exit_code: int | None = None
    signal: int | None = None
    hung: bool = False
    resumed_at: float | None = None
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
    # Survivors whose op call itself returned only after the timeout, in blocking mode, while
    # their peer was stopped: inside NCCL's connect on first use, which blocking mode cannot
    # bound (docs/backends.md). Counted apart, never as raised in time.
    blocked_in_call: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def held_until(outcomes: list[RankOutcome], fault_at: float | None, resume_after: float | None) -> float | None:
    """How long after the fault the stopped rank was really resumed: the watcher polls, and a
    loaded machine can send SIGCONT later than planned, so the judge is given the time it was sent."""
    resumed = next((o.resumed_at for o in outcomes if o.resumed_at is not None), None)
    if resumed is None or fault_at is None:
        return resume_after
    return resumed - fault_at


def judge(fault: str, faulty_rank: int, timeout_s: float, op_count: int, outcomes: list[RankOutcome],
          fault_at: float | None, frtrace_error: str | None, held_until_s: float | None = None,
          call_limit_s: float | None = None) -> Verdict:
    """`fault_at`: when the signal struck (None for faults the rank cannot time);
    `frtrace_error`: why torchfrtrace could not read the run's dumps (None when it could);
    `held_until_s`: where blocking mode's connect may hold a call (the simulated device's
    communicators in blocking mode), how long after the fault the stopped peer was resumed;
    `call_limit_s`: where no call may be held (nonblocking mode), the longest a survivor's call
    may take."""
    verdict = Verdict()
    for rank, outcome in enumerate(outcomes):
        _judge_process(verdict, rank, outcome, fault if rank == faulty_rank else "none")
        survivor = rank != faulty_rank
        held = survivor and _held_in_call(fault, outcome, timeout_s, fault_at, held_until_s)
        if survivor or fault not in DISRUPTIVE:  # a stopped rank's op ends when it resumes
            _judge_op_times(verdict, rank, outcome, timeout_s, fault_at + held_until_s if held else None)
        if survivor and call_limit_s is not None:
            _judge_call_limit(verdict, rank, outcome, call_limit_s)
    if fault in DISRUPTIVE:
        for rank, outcome in enumerate(outcomes):
            if rank != faulty_rank:
                held = _held_in_call(fault, outcome, timeout_s, fault_at, held_until_s)
                _judge_survivor(verdict, rank, outcome, timeout_s, fault_at, op_count,
                                held_until_s if held else None)
        # Survivors that were all held in a call and then completed with their resumed peer
        # wrote no dump: none failed.
        all_completed = (verdict.survivors_raised == 0 and verdict.blocked_in_call == verdict.survivors
                         and not any("raised" in (o.result or {}) for r, o in enumerate(outcomes) if r != faulty_rank))
        if frtrace_error and not (frtrace_error == "no dumps" and all_completed):
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


def _judge_op_times(verdict: Verdict, rank: int, outcome: RankOutcome, timeout_s: float,
                    resumed_at: float | None) -> None:
    """An op that succeeded after blocking past its group's timeout (and the margin) means the
    timeout was never enforced: its peer's fault went unseen until the peer came back. The one
    exception is an op whose call was held in blocking mode's connect (`resumed_at`: when its
    stopped peer was resumed): the call may return up to the margin after the resume, no later;
    every other op, and every wait on a work, is bounded all the same."""
    result = outcome.result or {}
    limit = timeout_s + RAISE_MARGIN_S
    wait = result.get("slowest_wait") or {}
    if wait.get("seconds", 0.0) > limit:
        verdict.problems.append(f"rank {rank}: op {wait['index']} ({wait['name']}) waited {wait['seconds']:.2f} s "
                                f"on its work, past its {timeout_s:g} s timeout")
    slowest = result.get("slowest_op") or {}
    call = result.get("longest_call") or {}
    held_op = resumed_at is not None and "raised" not in result  # else the held call is the one that raised
    if held_op:
        late = (call.get("call_ended_at") or 0.0) - resumed_at
        if late > RAISE_MARGIN_S:
            verdict.problems.append(f"rank {rank}: op {call['index']} ({call['name']})'s call returned {late:.2f} s "
                                    "after its stopped peer resumed")
    if held_op and slowest.get("index") == call.get("index"):
        return
    if slowest.get("seconds", 0.0) > limit:
        verdict.problems.append(f"rank {rank}: op {slowest['index']} ({slowest['name']}) succeeded after "
                                f"{slowest['seconds']:.2f} s, past its {timeout_s:g} s timeout")


def _judge_call_limit(verdict: Verdict, rank: int, outcome: RankOutcome, call_limit_s: float) -> None:
    """Where no call may be held (nonblocking mode: NCCL's own thread connects), a survivor's
    call returns by the timeout, or by a meeting's give-up just after it."""
    result = outcome.result or {}
    raising = result.get("op", {}) if "raised" in result else {}
    longest = max(raising.get("call_seconds", 0.0), (result.get("longest_call") or {}).get("call_seconds", 0.0))
    if longest > call_limit_s:
        verdict.problems.append(f"rank {rank}: a call lasted {longest:.2f} s where none may be held "
                                f"(limit {call_limit_s:g} s)")


# A held call returns once its peer resumes; the two clocks are one machine's, read by two processes.
RESUME_SLACK_S = 0.05


def _held_in_call(fault: str, outcome: RankOutcome, timeout_s: float, fault_at: float | None,
                  held_until_s: float | None) -> bool:
    """Whether the rank's op call itself (not a wait on its work, which the watchdog bounds)
    began before its stopped peer resumed, lasted past the timeout and returned only once the
    peer resumed, where blocking mode's connect can hold a call: a peer that met and then
    stopped, alive, so its socket accepts and never answers. A call that gave up at its timeout,
    before the resume, was not held: it raised in time. A killed peer's socket refuses, which
    fails the call within the timeout, so only `stop` qualifies."""
    if fault != "stop" or held_until_s is None or fault_at is None or outcome.result is None:
        return False
    result = outcome.result
    op = result.get("op", {}) if "raised" in result else result.get("longest_call") or {}
    seconds, ended_at = op.get("call_seconds", 0.0), op.get("call_ended_at")
    resumed_at = fault_at + held_until_s
    return (seconds > timeout_s and ended_at is not None and ended_at >= resumed_at - RESUME_SLACK_S
            and ended_at - seconds < resumed_at)


def _judge_survivor(verdict: Verdict, rank: int, outcome: RankOutcome, timeout_s: float,
                    fault_at: float | None, op_count: int, held_until_s: float | None = None) -> None:
    """`held_until_s`: given when the survivor's call was held in blocking mode's connect, how long
    after the fault its stopped peer resumed."""
    verdict.survivors += 1
    result = outcome.result or {}
    blocked = held_until_s is not None
    if blocked:
        verdict.blocked_in_call += 1
        if not any(k in result for k in ("raised", "wrong_result", "read_failed_op")):
            if result.get("completed_ops") != op_count:
                verdict.problems.append(f"rank {rank}: held in a call, then completed {result.get('completed_ops')} "
                                        f"of {op_count} ops without raising")
            return  # it completed every op, right, once its peer resumed: nothing failed
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
    elif not blocked:
        verdict.survivors_raised += 1
    # The timeout counts from the op's issue; an op issued before the fault counts from the fault.
    started = max(result["op"]["issued_at"], fault_at or 0.0)
    past = raised["at"] - started - timeout_s
    if not blocked:
        verdict.seconds_past_timeout.append(past)
        if past > RAISE_MARGIN_S:
            verdict.problems.append(f"rank {rank} raised {past:.2f} s past its timeout ({result['op']['name']})")
    else:  # a held call may return when its peer resumes, and must raise by then
        past_resume = raised["at"] - (fault_at or started) - held_until_s
        if past_resume > RAISE_MARGIN_S:
            verdict.problems.append(f"rank {rank} raised {past_resume:.2f} s after its stopped peer resumed "
                                    f"({result['op']['name']})")
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
