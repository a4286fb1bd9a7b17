"""What the GPU check decides without touching a GPU: the order of the run (which probes share one
world of rank processes, which worlds run side by side, ours before torch's), how many ranks a
world gets, whether a probe still fits before the plan's margin, each probe's verdict from what
its ranks reported, the exit status, and the Markdown table; and the whole run on the estimates
(simulate), which tests/python/gpu/test_gpu_check_fit.py holds to the deadline. No torch here:
gpu_check.py runs the plan on the GPU, tests/python/gpu/ check these decisions with made-up
reports.
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

# -- The time the check plans with. Every figure is an upper estimate for one H100 or H200 (the
# GPU machines: 16 cores; the probes are bound by GPU sleeps and host work, not by memory speed,
# so the two cards plan alike). Where each comes from is said beside it; tests/gpu/README.md
# works the totals through.

CHECK_DEADLINE_S = 480.0  # tools/gpu-check.sh's default: the whole check, build included, by 8 minutes
MARGIN_S = 120.0  # the plan keeps this much of the deadline spare: nothing starts that its
#                   estimate would end inside it, so estimates 2 minutes short still end in time
# The build of the three targets the probes need (tools/gpu-check.sh) for one architecture on 16
# cores. Configure about 30 s (torch's CMake and the CUDA compiler checks). Compiling: the torch
# precompiled header (23 s, cmake/TorchPrecompiledHeaders.cmake), then the heaviest translation
# unit (about 26 s, the heaviest in the GPU-fidelity review's build log) and two links, about
# 60 s on the critical path; the rest, about 40 units of 10-26 s, spreads over 16 cores inside
# it. About 90 s, the low end of the 1.5-3 minutes the earlier build of every target and seven
# architectures was estimated at; 120 s here as the upper estimate.
BUILD_S = 120.0
DRIVER_START_S = 10.0  # gpu_check.py before its first world: torch imported twice, NCCL located (review of the budget)
SETUP_S = 5.0  # a one-rank world's start: fork from the warm server, CUDA context, NCCL init, our module
SETUP_TWO_RANKS_S = 10.0  # the same at two ranks: NCCL's two-rank init is slower than one rank's
#                           (estimate: twice the one-rank figure; never measured)
SETUP_LIMIT_S = 90.0  # a world that has not begun its first probe by then is ended
START_MARGIN = 1.0  # a probe starts when its estimate ends before the margin (MARGIN_S is the slack)
REQUEUES = 1  # probes a failed world never reached get one fresh world more
MIN_NCCL_FOR_SHARED_GPU = (2, 30)  # NCCL_MULTI_RANK_GPU_ENABLE: src/init.cc 68 / 1057 at v2.30.7-1;
#                                    v2.28.9-1 refuses two ranks on one GPU ("Duplicate GPU detected", src/init.cc 904)


@dataclass(frozen=True)
class ProbeSpec:
    """The driver's view of a probe: its limits and how it must be run (not what it does)."""

    name: str
    limit_s: float  # the run is ended this long after the probe began
    expected_s: float  # what it takes at one rank with the GPU to itself (upper estimate; the plan uses it)
    stage: int = 1  # the order of the run: gpu_probe_table.py says what each stage is
    alone: bool = False  # a world of its own (it changes the process or the group for good)
    group: bool = True  # runs in a process group (else one process, no backend)
    two_ranks: bool = False  # means nothing on one rank
    children: bool = False  # the driver starts fresh interpreters for it (tests/gpu/gpu_teardown_child.py)
    concurrent: bool = False  # nothing in it is timed against the GPU's speed: its worlds run beside the
    #                           other worlds of its stage (sharing the GPU can only lengthen its GPU sleeps)
    gpu_s: float = 0.0  # of expected_s, the seconds the GPU is busy (its sleeps and kernels): processes
    #                     sharing the GPU take turns on it, so the plan counts these once per process
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


@dataclass
class Step:
    """What the driver starts at once: worlds (one per session, side by side), or the fresh
    interpreters of the probes that must see a whole process exit, for ``backends``."""

    sessions: list[Session] = field(default_factory=list)
    children: list[ProbeSpec] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)


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


def batches(sessions: list[Session], specs: dict[str, ProbeSpec]) -> list[list[Session]]:
    """Consecutive sessions of one stage whose every probe is concurrent run side by side; any
    other session runs alone."""
    out: list[list[Session]] = []
    for session in sessions:
        shares = all(specs[name].concurrent for name in session.probes)
        last = out[-1] if out else None
        if shares and last and last[0].stage == session.stage and last[0].attempt == session.attempt \
                and all(specs[name].concurrent for s in last for name in s.probes):
            last.append(session)
        else:
            out.append([session])
    return out


def schedule(specs: list[ProbeSpec], ours: list[str], theirs: list[str],
             done: frozenset = frozenset()) -> list[Step]:
    """The whole run, in order: every stage for our backends first, then torch's backends as the
    reference, in the time ours leave. A phase's teardown interpreters run where the table puts
    them: before its first world of a later stage. ``done``: (probe, backend) pairs already run."""
    by_name = {s.name: s for s in specs}
    steps: list[Step] = []
    for backends in (ours, theirs):
        if not backends:
            continue
        children = [s for s in specs if s.children]
        sessions = [s for s in plan_sessions(specs, backends)
                    if not all((name, s.backend) in done for name in s.probes)]
        if steps:  # a probe without a group runs once, with ours
            sessions = [s for s in sessions if s.backend is not None]
        grouped = [Step(sessions=batch) for batch in batches(sessions, by_name)]
        if children:
            at = next((i for i, step in enumerate(grouped) if step.sessions[0].stage > children[0].stage),
                      len(grouped))
            grouped.insert(at, Step(children=children, backends=list(backends)))
        steps += grouped
    return steps


def ranks_on_gpu(step: Step, world: int, shares_gpu: bool) -> int:
    """How many rank processes the step puts on one GPU at once."""
    return sum(world if shares_gpu and s.backend else 1 for s in step.sessions) or 1


def world_start_s(world: int) -> float:
    return SETUP_S if world == 1 else SETUP_TWO_RANKS_S


def probe_cost(spec: ProbeSpec, sharing: int = 1) -> float:
    """A probe's estimate with ``sharing`` rank processes on its GPU: its host part as it is, its
    GPU part once per process (they take turns on the GPU)."""
    return spec.expected_s - spec.gpu_s + spec.gpu_s * max(1, sharing)


def why_not_start(remaining_s: float, spec: ProbeSpec, sharing: int = 1, world: int = 1,
                  in_new_world: bool = False) -> str:
    """Empty when a probe may start with ``remaining_s`` left before the plan's margin, else why
    not (the cell's reason)."""
    need = probe_cost(spec, sharing) * START_MARGIN + (world_start_s(world) if in_new_world else 0.0)
    if remaining_s >= need:
        return ""
    return f"deadline: needs about {need:.0f} s, {max(0.0, remaining_s):.0f} s were left before the margin"


def fits(remaining_s: float, spec: ProbeSpec, in_new_world: bool = False, sharing: int = 1, world: int = 1) -> bool:
    """Whether a probe may start with ``remaining_s`` left before the plan's margin."""
    return not why_not_start(remaining_s, spec, sharing, world, in_new_world)


def retry_session(session: Session, unreached: list[str]) -> Session | None:
    """A fresh world for the probes a world ended before reaching, once."""
    if not unreached or session.attempt >= REQUEUES:
        return None
    return Session(session.backend, unreached, dict(session.env), session.group_timeout_s, session.stage,
                   session.attempt + 1)


def probe_limit(spec: ProbeSpec, remaining_s: float) -> float:
    """How long a probe may run: its own limit, or what is left of the check, whichever is less
    (a probe the deadline ends is "cut", never passed)."""
    return max(0.0, min(spec.limit_s, remaining_s))


# ---------------------------------------------------------------------------------------------
# Ranks


def parse_version(text: str | None) -> tuple[int, ...] | None:
    try:
        return tuple(int(part) for part in str(text).split(".")[:3]) if text else None
    except ValueError:
        return None


def ranks_decision(nccl: str | None, gpus: int, switch_in_library: bool | None, choice: str = "auto") \
        -> tuple[int, bool, str]:
    """Ranks per world before any is started: (ranks, whether they would share one GPU, why).
    Two ranks on one GPU are only tried (the two_ranks probe under torch's backend confirms
    them) where this NCCL, checked at run time, is 2.30 or later."""
    need = "two ranks need two GPUs, or NCCL 2.30 or later (NCCL_MULTI_RANK_GPU_ENABLE=1) to share one"
    if choice == "1":
        return 1, False, f"one rank (--world 1); {need}"
    if gpus >= 2:
        return 2, False, f"two ranks, one on each of 2 of the {gpus} GPUs"
    version = parse_version(nccl)
    if version is not None and version[:2] < MIN_NCCL_FOR_SHARED_GPU:
        return 1, False, (f"one rank: one GPU, and NCCL {nccl} is older than 2.30, which refuses two ranks on "
                          f"one GPU (\"Duplicate GPU detected\"); {need}")
    if version is None and not switch_in_library and choice != "2":
        return 1, False, f"one rank: one GPU, and this NCCL's version is unknown and has no switch for it; {need}"
    return 2, True, "two ranks on one GPU, NCCL_MULTI_RANK_GPU_ENABLE=1" + (" (--world 2)" if choice == "2" else "")


# What a run at this many ranks cannot show, whatever its cells say.
CANNOT_SHOW = {
    (1, False): ("no peer: NCCL copies, scales or does nothing in place of each collective, so no collective "
                 "kernel, connect or transport runs; device binding across ranks is not exercised; a stalled "
                 "peer cannot be made (the timeout probe stalls the rank's own stream)"),
    (2, True): ("device binding (both ranks are bound to cuda:0, so a rank that picks the wrong device still "
                "finds the right one); the two ranks' GPU work takes turns on one GPU, so timings are not a job's"),
    (2, False): "more than two ranks (rings and trees of more members)",
}


def ranks_line(world: int, shares_gpu: bool, reason: str) -> str:
    where = ("both on one GPU" if shares_gpu else "one GPU each") if world > 1 else "no device shared"
    return (f"Ranks per world: {world} ({where}): {reason}. What this cannot show: "
            f"{CANNOT_SHOW[(world, shares_gpu and world > 1)]}.")


# ---------------------------------------------------------------------------------------------
# The run on the estimates


def simulate(specs: list[ProbeSpec], ours: list[str], theirs: list[str], world: int, shares_gpu: bool,
             start_s: float, deadline_s: float = CHECK_DEADLINE_S, margin_s: float = MARGIN_S) -> list[dict]:
    """The driver's run (schedule, why_not_start, the ranks' own start checks) with every probe
    taking its estimate: one entry per probe and backend, in the order they start, with
    ``start_s`` and ``end_s`` counted from the check's start, or NOT_RUN and why. ``start_s``:
    where the first world starts (after the build and the driver's start).

    Worlds of one step run side by side. A step takes its worlds' start, then the longest host
    part of any world, then the GPU parts of all of them one after another: the GPU time-slices
    between processes, so their GPU work is counted as if it never overlapped."""
    by_name = {s.name: s for s in specs}
    horizon = deadline_s - margin_s
    runs: list[dict] = []
    now = start_s
    done: set = set()
    pair = next((s for s in specs if s.two_ranks), None)
    reference = next(iter(theirs), None) or next(iter(ours), None)
    if pair and reference and world == 2 and shares_gpu:  # gpu_check.decide_world: it decides the world
        end = now + world_start_s(2) + probe_cost(pair, 2)
        runs.append({"probe": pair.name, "backend": reference, "verdict": PASS, "detail": "", "start_s": now,
                     "end_s": end})
        done.add((pair.name, reference))
        now = end
    elif pair:
        for backend in ours + theirs:
            runs.append({"probe": pair.name, "backend": backend, "verdict": NOT_RUN, "detail": "needs two ranks",
                         "start_s": now, "end_s": now})
    runnable = [s for s in specs if world == 2 or not s.two_ranks]
    for step in schedule(runnable, ours, theirs, frozenset(done)):
        if step.children:
            longest = max(step.children, key=lambda s: s.expected_s)
            why = why_not_start(horizon - now, longest, 1, world, in_new_world=True)
            end = now + world_start_s(world) + probe_cost(longest)
            for spec in step.children:
                for backend in step.backends:
                    runs.append({"probe": spec.name, "backend": backend, "verdict": NOT_RUN if why else PASS,
                                 "detail": why, "start_s": now, "end_s": now if why else end})
            now = now if why else end
            continue
        sharing = ranks_on_gpu(step, world, shares_gpu)
        why = why_not_start(horizon - now, by_name[step.sessions[0].probes[0]], sharing, world, in_new_world=True)
        sessions, host, gpu = [], [0.0], 0.0
        start = max(world_start_s(world if s.backend else 1) for s in step.sessions)
        for session in step.sessions:
            ranks = world if session.backend else 1
            # The ranks' own start checks see each probe at its estimate with the whole step on the GPU.
            clock, on_host, entries = now + start, 0.0, []
            for name in session.probes:
                spec = by_name[name]
                reason = why or why_not_start(horizon - clock, spec, sharing, ranks)
                entries.append({"probe": name, "backend": session.backend, "verdict": NOT_RUN if reason else PASS,
                                "detail": reason, "start_s": clock, "end_s": clock})
                if not reason:
                    clock += probe_cost(spec, sharing)
                    entries[-1]["end_s"] = clock
                    on_host += spec.expected_s - spec.gpu_s
                    gpu += spec.gpu_s * (ranks if shares_gpu else 1)
            host.append(on_host)
            sessions.append((entries, clock))
        end = now if why else now + start + max(host) + gpu
        for entries, clock in sessions:  # a world whose own count runs past the step's end is drawn to it
            scale = min(1.0, (end - now) / (clock - now)) if clock > now else 1.0
            for entry in entries:
                entry["start_s"] = now + (entry["start_s"] - now) * scale
                entry["end_s"] = now + (entry["end_s"] - now) * scale
            runs += entries
        now = end
    return sorted(runs, key=lambda r: (r["verdict"] == NOT_RUN, r["start_s"]))


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
    if any(r["verdict"] == CUT or (r["verdict"] == NOT_RUN and r["detail"].startswith("deadline")) for r in mine):
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
