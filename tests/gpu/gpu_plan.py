"""What the GPU check decides without touching a GPU: which probes share one world of rank
processes, whether a probe still fits before the deadline, each probe's verdict from what its
ranks reported, the exit status, and the Markdown table. No torch here: gpu_check.py runs the
plan on the GPU, tests/python/gpu/ check these decisions with made-up reports.
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, field

# A verdict is the first word of a cell. Only "pass" is a pass; "cannot fail" passed checks that
# could not have failed at the rank count it ran; "cut" and "not run" ran nothing that counts.
PASS, WEAK, FAIL, TIMEOUT, CRASH, CUT, NOT_RUN = (
    "pass", "cannot fail", "fail", "timeout", "crash", "cut", "not run")
FAILED = (FAIL, TIMEOUT, CRASH)
UNFINISHED = (CUT, NOT_RUN)

SETUP_S = 5.0  # a world's start: processes, CUDA context, NCCL init (estimate; see tests/gpu/README.md)
SETUP_LIMIT_S = 90.0  # a world that has not begun its first probe by then is ended
START_MARGIN = 2.0  # a probe starts only with this many times its expected time left
REQUEUES = 1  # probes a failed world never reached get one fresh world more


@dataclass(frozen=True)
class ProbeSpec:
    """The driver's view of a probe: its limits and how it must be run (not what it does)."""

    name: str
    limit_s: float  # the run is ended this long after the probe began
    expected_s: float  # what it takes on one H200 at one rank (estimate; the deadline plans with it)
    stage: int = 1  # 1: correctness in a shared world, 2: correctness in worlds of their own, 3: timings
    alone: bool = False  # a world of its own (it changes the process or the group for good)
    group: bool = True  # runs in a process group (else one process, no backend)
    two_ranks: bool = False  # means nothing on one rank
    children: bool = False  # the driver starts fresh interpreters for it (tests/gpu/gpu_teardown_child.py)
    concurrent: bool = False  # nothing in it is timed: its worlds (alone) for every backend run at once
    env: tuple[tuple[str, str], ...] = ()  # set in the rank processes before anything runs
    group_timeout_s: float | None = None
    asserts: str = ""


@dataclass
class Session:
    """One world of rank processes for one backend, running its probes in order."""

    backend: str | None
    probes: list[str]
    env: dict = field(default_factory=dict)
    group_timeout_s: float | None = None
    stage: int = 1
    attempt: int = 0  # 1 and up: a fresh world for probes an earlier one never reached

    @property
    def label(self) -> str:
        return f"{self.probes[0]}{'+' + str(len(self.probes) - 1) if len(self.probes) > 1 else ''}." \
               f"{self.backend or 'none'}" + (f".retry{self.attempt}" if self.attempt else "")


def plan_sessions(specs: list[ProbeSpec], backends: list[str]) -> list[Session]:
    """The worlds to start, in order: stage by stage; within a stage, probes that can share a
    world share one per backend (one process start, CUDA context and NCCL init for all of them),
    in table order. Probes run by fresh interpreters (children) are not sessions."""
    sessions: list[Session] = []
    for stage in sorted({s.stage for s in specs}):
        in_stage = [s for s in specs if s.stage == stage and not s.children]
        shared: dict[tuple, list[str]] = {}
        for spec in in_stage:
            if not spec.alone:
                shared.setdefault((spec.group, spec.env, spec.group_timeout_s), []).append(spec.name)
        for (group, env, timeout), names in shared.items():
            for backend in (backends if group else [None]):
                sessions.append(Session(backend, list(names), dict(env), timeout, stage))
        for spec in (s for s in in_stage if s.alone):
            for backend in (backends if spec.group else [None]):
                sessions.append(Session(backend, [spec.name], dict(spec.env), spec.group_timeout_s, stage))
    return sessions


def take_batch(queue: list[Session], specs: dict[str, ProbeSpec]) -> list[Session]:
    """Removes and returns the sessions to run now: the first in the queue, with every session
    after it of the same probe where that probe is concurrent (one world per backend, at once)."""
    first = queue.pop(0)
    batch = [first]
    if len(first.probes) == 1 and specs[first.probes[0]].concurrent:
        while queue and queue[0].probes == first.probes and queue[0].attempt == first.attempt:
            batch.append(queue.pop(0))
    return batch


def retry_session(session: Session, unreached: list[str]) -> Session | None:
    """A fresh world for the probes a world ended before reaching, once."""
    if not unreached or session.attempt >= REQUEUES:
        return None
    return Session(session.backend, unreached, dict(session.env), session.group_timeout_s, session.stage,
                   session.attempt + 1)


def fits(remaining_s: float, spec: ProbeSpec, in_new_world: bool = False) -> bool:
    """Whether a probe may start with ``remaining_s`` left before the deadline."""
    return remaining_s >= spec.expected_s * START_MARGIN + (SETUP_S if in_new_world else 0.0)


def probe_limit(spec: ProbeSpec, remaining_s: float) -> float:
    """How long a probe may run: its own limit, or what is left of the check, whichever is less
    (a probe the deadline ends is "cut", never passed)."""
    return max(0.0, min(spec.limit_s, remaining_s))


# ---------------------------------------------------------------------------------------------
# What the ranks of one world reported


def read_rank(text: str) -> dict:
    """One rank's report (JSON lines, a killed rank's last line possibly cut short), by probe."""
    rank = {"joined": False, "setup_error": None, "probes": {}, "order": [], "session_checks": [],
            "done": False, "exited": False}
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        kind, name = entry.pop("k", None), entry.pop("probe", None)
        if kind in ("joined", "done", "exited"):
            rank[kind] = True
            continue
        if name is None:
            if kind == "error":
                rank["setup_error"] = entry
            elif kind == "check":
                rank["session_checks"].append(entry)
            continue
        probe = rank["probes"].setdefault(name, {"begun": False, "ended": False, "skipped": None, "checks": [],
                                                 "notes": {}, "error": None})
        if kind == "begin":
            probe["begun"] = True
            rank["order"].append(name)
        elif kind == "end":
            probe["ended"] = True
        elif kind == "skip":
            probe["skipped"] = entry.get("why", "")
        elif kind == "check":
            probe["checks"].append(entry)
        elif kind == "note":
            probe["notes"][entry["name"]] = entry["value"]
        elif kind == "error":
            probe["error"] = entry
    return rank


def current_probe(ranks: list[dict]) -> str | None:
    """The probe some rank has begun and not every rank has ended."""
    for rank in ranks:
        for name in rank["order"]:
            if not all(r["probes"].get(name, {}).get("ended") for r in ranks):
                return name
    return None


def exit_text(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _ranks_word(world: int) -> str:
    return f"{world} rank" + ("s" if world != 1 else "")


def judge_probe(name: str, ranks: list[dict], world: int, ended_by: str = "", exit_codes: list | None = None,
                limit_s: float = 0.0) -> tuple[str, str]:
    """A probe's verdict and its cell's detail. ``ended_by`` says why the driver ended the world
    ("timeout", "deadline", "peer failed", "hung at exit", "set-up"), if it did; a probe the
    world never reached is "not run", and says why."""
    entries = [r["probes"].get(name) for r in ranks]
    if entries and all(e and e["skipped"] is not None for e in entries):
        return NOT_RUN, entries[0]["skipped"]
    begun = [e for e in entries if e and e["begun"]]
    checks = [c for e in begun for c in e["checks"]]
    failed = [c for c in checks if not c["ok"]]
    before = f"; {len(failed)}/{len(checks)} failed first: {failed[0]['name']}: {failed[0]['detail']}" if failed else ""
    if not begun:
        setup = next((r["setup_error"] for r in ranks if r["setup_error"]), None)
        if setup:
            return FAIL, f"group set-up: {setup['detail']}"
        if ended_by == "deadline":
            return NOT_RUN, "deadline"
        if ended_by == "set-up":
            return TIMEOUT, f"the group was not set up within {SETUP_LIMIT_S:.0f} s"
        return NOT_RUN, f"world ended before it ({ended_by or 'a rank exited'})"
    ended = all(e and e["ended"] for e in entries)
    codes = exit_codes or []
    errors = [(i, e["error"]) for i, e in enumerate(entries) if e and e["error"]]
    if not ended:
        if errors:
            i, error = errors[0]
            return FAIL, f"rank {i}: {error['detail']}{before}"
        signalled = [(i, c) for i, c in enumerate(codes) if c is not None and c < 0 and c != -signal.SIGKILL]
        if signalled:
            i, code = signalled[0]
            return CRASH, f"rank {i} {exit_text(code)} after {_last(entries[i])}{before}"
        stuck = "; ".join(f"rank {i} after {_last(e)}" for i, e in enumerate(entries) if not (e and e["ended"]))
        if ended_by == "deadline":
            return CUT, f"deadline, {stuck}{before}"
        if ended_by == "timeout":
            return TIMEOUT, f"{limit_s:.0f} s: {stuck}{before}"
        exited = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
        if exited:
            i, code = exited[0]
            return CRASH, f"rank {i} {exit_text(code)} after {_last(entries[i])}{before}"
        return CRASH, f"{ended_by or 'the world ended'}: {stuck}{before}"
    if errors:
        i, error = errors[0]
        return FAIL, f"rank {i}: {error['detail']}"
    if failed:
        return FAIL, f"{len(failed)}/{len(checks)}: {failed[0]['name']}: {failed[0]['detail']}"
    if not checks:
        return FAIL, "no check ran"
    weak = [c for c in checks if c.get("weak")]
    headline = next((e["notes"].get("headline") for e in begun if e["notes"].get("headline")), None)
    if len(weak) == len(checks):
        return WEAK, str(weak[0]["weak"]) + (f" ({headline})" if headline else "")
    text = headline or (f"{len(checks)} checks" if len(checks) != 1 else "1 check")
    if weak:
        text += f" ({len(weak)} of {len(checks)} checks cannot fail at {_ranks_word(world)})"
    return PASS, text


def _last(entry: dict | None) -> str:
    if not entry or not entry["checks"]:
        return "its start"
    return entry["checks"][-1]["name"]


def exit_status(results: list[dict], ours: set[str]) -> int:
    """0: every probe of ours passed (or could not fail, or was not run for a reason other than
    the deadline); 1: one of ours failed, timed out or crashed; 3: none failed but the deadline
    left some unrun or cut. torch's results are the reference and never fail the check."""
    mine = [r for r in results if r["backend"] in ours or r["backend"] is None]
    if any(r["verdict"] in FAILED for r in mine):
        return 1
    if any(r["verdict"] == CUT or (r["verdict"] == NOT_RUN and r["detail"] == "deadline") for r in mine):
        return 3
    return 0


# ---------------------------------------------------------------------------------------------
# The table


def escape(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def cell(result: dict | None, width: int = 100) -> str:
    if result is None:
        return "–"
    verdict = result["verdict"]
    if verdict == WEAK:
        verdict = f"{WEAK} at {_ranks_word(result.get('world', 1))}"
    text = escape(f"{verdict}: {result['detail']}" if result["detail"] else verdict)
    return text if len(text) <= width else text[:width - 1] + "…"


LEGEND = ("pass: every check held; cannot fail: every check it made holds whatever the backend does at this rank "
          "count (the cell says why), so it proves nothing there; fail / timeout / crash: ours fails the check "
          "(torch's columns are the reference); cut: the deadline ended it mid-probe; not run: it never started "
          "(the cell says why).")


def markdown(title: str, ranks_line: str, probes: list[ProbeSpec], backends: list[str], ours: set[str],
             results: list[dict], comparisons: dict[tuple[str, str], str], peers: dict[str, str]) -> str:
    """The section for docs/backends.md: what ran and where, one row per probe, one column per
    backend, then ours against torch's where both ran, then what the verdicts mean."""
    by_key = {(r["probe"], r["backend"]): r for r in results}
    lines = [title, "", ranks_line, ""]
    labels = [b if b in ours else f"{b} (torch)" for b in backends]
    lines += ["| probe | " + " | ".join(labels) + " |", "| --- |" + " --- |" * len(labels)]
    for spec in (p for p in probes if p.group):
        lines.append(f"| {spec.name} | " + " | ".join(cell(by_key.get((spec.name, b))) for b in backends) + " |")
    for spec in (p for p in probes if not p.group):
        lines += ["", f"- {spec.name} (no group): {cell(by_key.get((spec.name, None)), width=200)}"]
    mine = [b for b in backends if b in ours and peers.get(b)]
    if mine and comparisons:
        lines += ["", ("Ours against torch's backend of the same behaviour (~: this torch lacks that behaviour; its "
                       "legacy backend stands in, under the same contract for values, streams and errors):"), "",
                  "| probe | " + " | ".join(f"{b} vs {peers[b]}" for b in mine) + " |",
                  "| --- |" + " --- |" * len(mine)]
        for spec in (p for p in probes if p.group):
            lines.append(f"| {spec.name} | "
                         + " | ".join(escape(comparisons.get((spec.name, b), "–"))[:110] for b in mine) + " |")
    lines += ["", LEGEND]
    return "\n".join(lines)


def signatures(result: dict) -> dict:
    return {(i, c["name"]): c["sig"] for i, checks in enumerate(result.get("checks_by_rank", [])) for c in checks}


def compare(ours: dict | None, theirs: dict | None) -> str:
    """Whether our run came out as torch's did: same verdict, and the same outcome (ok, wrong,
    or the exception type) for every check both made."""
    if ours is None or theirs is None:
        return "–"
    if ours["verdict"] in UNFINISHED or theirs["verdict"] in UNFINISHED:
        return f"– (ours {ours['verdict']}, torch {theirs['verdict']})"
    mine, other = signatures(ours), signatures(theirs)
    differing: dict[str, str] = {}
    for key in sorted(mine.keys() & other.keys()):
        if mine[key] != other[key] and key[1] not in differing:
            differing[key[1]] = f"{key[1]}: ours {mine[key]}, torch {other[key]}"
    parts = []
    if ours["verdict"] != theirs["verdict"]:
        parts.append(f"ours {ours['verdict']}, torch {theirs['verdict']}")
    parts += list(differing.values())[:2]
    if not parts:
        return "same"
    more = len(differing) - 2
    return "differs: " + "; ".join(parts) + (f" (+{more} more checks)" if more > 0 else "")


# ---------------------------------------------------------------------------------------------
# Probes run by fresh interpreters (tests/gpu/gpu_teardown_child.py)

# What a process that ends badly prints (libstdc++'s std::terminate, CPython's fatal error
# handler and faulthandler, an uncaught Python exception, glibc's heap checks): a process can
# still exit 0 after a thread or a destructor printed one of these.
ABORT_MARKERS = ("terminate called", "Fatal Python error", "Traceback (most recent call last)", "double free",
                 "corrupted", "Segmentation fault")
CHILD_OPS_DONE = "[teardown] values right"


def judge_children(exit_codes: list, seconds: list, logs: list[str], limit_s: float) -> tuple[str, str]:
    """A teardown run's verdict: every rank's interpreter ran its ops with the right values and
    then exited 0 on its own, within ``limit_s``, printing nothing that marks an abort."""
    for i, code in enumerate(exit_codes):
        if code is None:
            return TIMEOUT, f"rank {i} still running {limit_s:.0f} s after start (hung at exit?): {_tail(logs[i])}"
    for i, log in enumerate(logs):
        if CHILD_OPS_DONE not in log:
            return FAIL, f"rank {i} {exit_text(exit_codes[i])} before its ops were right: {_tail(log)}"
    for i, code in enumerate(exit_codes):
        if code != 0:
            return CRASH, f"rank {i} {exit_text(code)} at exit: {_tail(logs[i])}"
    for i, log in enumerate(logs):
        marker = next((m for m in ABORT_MARKERS if m in log), None)
        if marker:
            line = next(line for line in log.splitlines() if marker in line)
            return FAIL, f"rank {i} exited 0 but printed: {line.strip()[:160]}"
    return PASS, f"exit 0 after {max(seconds):.1f} s"


def _tail(log: str) -> str:
    lines = [line.strip() for line in log.strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else "(no output)"
