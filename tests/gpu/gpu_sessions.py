"""Running the GPU check's worlds: the rank processes of one session, watched probe by probe
(each probe has its own limit, the check its deadline), and fresh interpreters started for the
probes that must see a whole process exit. Knows nothing of torch or of what a probe does: the
rank target and the plan (tests/gpu/gpu_plan.py) are given to it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable

import gpu_plan as plan

CRASH_GRACE_S = 10.0  # a rank failed: its peers get this long before they are ended (they may be stuck in an op)
EXIT_GRACE_S = 15.0  # every rank reported its exit: the processes get this long to end
TEARDOWN_LIMIT_S = 40.0  # the last probe ended: destroy_process_group and exit get this long
POLL_S = 0.2


def text_of(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


class SessionRun:
    """One session's world: starts its ranks (``target(spec)`` in processes of ``ctx``), ends
    them when the current probe overruns its limit, the deadline passes, a rank dies and its
    peers linger, or they hang at exit; reports each probe's result as soon as every rank has
    ended it (``on_result``), and after the world ends, the probes it never finished."""

    def __init__(self, ctx, target: Callable[[dict], None], specs: dict[str, plan.ProbeSpec], session: plan.Session,
                 world: int, deadline: float, run_dir: str, rank_spec: Callable[[int], dict],
                 on_result: Callable[[dict], None], horizon: float | None = None, sharing: int = 1) -> None:
        """``deadline``: when the world is ended whatever it does; ``horizon``: after it no probe
        may start whose estimate, with ``sharing`` rank processes on the GPU, would end later (the
        plan's margin before the deadline; default the deadline)."""
        self.ctx, self.target, self.specs, self.session = ctx, target, specs, session
        self.world, self.deadline, self.run_dir = world, deadline, run_dir
        self.horizon = deadline if horizon is None else horizon
        self.sharing = sharing
        self.rank_spec, self.on_result = rank_spec, on_result
        self.paths = [os.path.join(run_dir, f"rank{rank}.jsonl") for rank in range(world)]
        self.reported: dict[str, dict] = {}
        self.began_at: dict[str, float] = {}
        self.ended_by = ""
        self.session_checks: list[dict] = []

    def run(self) -> list[str]:
        """Runs the world to its end; returns the probes it never reached (for a fresh world)."""
        deadline_epoch = time.time() + (self.deadline - time.monotonic())
        horizon_epoch = time.time() + (self.horizon - time.monotonic())
        procs = []
        for rank in range(self.world):
            spec = {**self.rank_spec(rank), "probes": list(self.session.probes), "rank": rank, "world": self.world,
                    "backend": self.session.backend, "result": self.paths[rank], "deadline_epoch": deadline_epoch,
                    "horizon_epoch": horizon_epoch, "sharing": self.sharing,
                    "log": os.path.join(self.run_dir, f"rank{rank}.log"), "run_dir": self.run_dir,
                    "group_timeout_s": self.session.group_timeout_s}
            proc = self.ctx.Process(target=self.target, args=(spec,), name=f"{self.session.label}:{rank}")
            proc.start()
            procs.append(proc)
        self.ended_by = self._supervise(procs)
        codes = [p.exitcode for p in procs]
        ranks = self._ranks()
        self.session_checks = [c for r in ranks for c in r["session_checks"]]
        unreached = []
        for name in self.session.probes:
            if name in self.reported:
                continue
            result = self._result(name, ranks, self.ended_by, codes)
            entries = [r["probes"].get(name) or {} for r in ranks]
            never_reached = not any(e.get("begun") or e.get("skipped") is not None for e in entries)
            # A world that never formed would not form again: only a probe's failure gets a retry.
            if never_reached and self.ended_by not in ("deadline", "set-up") \
                    and not any(r["setup_error"] for r in ranks):
                unreached.append(name)
            self._report(name, result)
        if self.ended_by in ("hung at exit", "teardown") or any(not c["ok"] for c in self.session_checks):
            self.session_checks.append({"name": "the world ends", "ok": False,
                                        "detail": self.ended_by or "destroy_process_group failed", "sig": "wrong"})
        return unreached

    def _ranks(self) -> list[dict]:
        return [plan.read_rank(text_of(path)) for path in self.paths]

    def _result(self, name: str, ranks: list[dict], ended_by: str, codes: list) -> dict:
        spec = self.specs[name]
        verdict, detail = plan.judge_probe(name, ranks, self.world, ended_by, codes, spec.limit_s)
        began = self.began_at.get(name)
        entries = [r["probes"].get(name) or {} for r in ranks]
        return {"probe": name, "backend": self.session.backend, "world": self.world, "verdict": verdict,
                "detail": detail, "seconds": round(time.monotonic() - began, 1) if began else 0.0,
                "session": self.session.label, "checks_by_rank": [e.get("checks", []) for e in entries],
                "notes": (entries[0] if entries else {}).get("notes", {})}

    def _report(self, name: str, result: dict) -> None:
        self.reported[name] = result
        self.on_result(result)

    def _supervise(self, procs) -> str:
        start = time.monotonic()
        failed_at = exited_at = finished_at = None
        while any(p.is_alive() for p in procs):
            now = time.monotonic()
            ranks = self._ranks()
            for name in self.session.probes:
                entries = [r["probes"].get(name) for r in ranks]
                settled = all(e and (e["ended"] or e["skipped"] is not None) for e in entries)
                if settled and name not in self.reported:
                    self._report(name, self._result(name, ranks, "", [p.exitcode for p in procs]))
            current = plan.current_probe(ranks)
            if current and current not in self.began_at:
                self.began_at[current] = now
            if failed_at is None and any(p.exitcode not in (None, 0) for p in procs):
                failed_at = now
            if exited_at is None and all(r["exited"] for r in ranks):
                exited_at = now
            if finished_at is None and len(self.reported) == len(self.session.probes):
                finished_at = now
            begun = any(r["order"] for r in ranks)
            reason = ("deadline" if now >= self.deadline
                      else "timeout" if current and now - self.began_at[current] > self.specs[current].limit_s
                      else "set-up" if not begun and not finished_at and now - start > plan.SETUP_LIMIT_S
                      else "peer failed" if failed_at is not None and now - failed_at > CRASH_GRACE_S
                      else "hung at exit" if exited_at is not None and now - exited_at > EXIT_GRACE_S
                      else "teardown" if finished_at is not None and now - finished_at > TEARDOWN_LIMIT_S
                      else "")
            if reason:
                for p in procs:
                    if p.is_alive():
                        p.kill()
                for p in procs:
                    p.join(10)
                return reason
            time.sleep(POLL_S)
        for p in procs:
            p.join()
        return ""


def run_children(jobs: list[dict], limit_s: float) -> list[dict]:
    """Starts every job's rank interpreters at once (``argv`` and ``env`` per rank, output to
    ``log`` per rank) and waits for all of them, ``limit_s`` at most; a rank still running then
    is killed. Returns, per job, each rank's exit code (None: killed at the limit) and seconds."""
    started = time.monotonic()
    running = []
    for job in jobs:
        procs = []
        for argv, env, log in zip(job["argv"], job["env"], job["log"]):
            with open(log, "wb") as out:
                procs.append(subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                              start_new_session=True))
        running.append(procs)
    ended: dict[int, float] = {}
    while time.monotonic() - started < limit_s:
        for procs in running:
            for p in procs:
                if p.poll() is not None and id(p) not in ended:
                    ended[id(p)] = time.monotonic() - started
        if all(p.poll() is not None for procs in running for p in procs):
            break
        time.sleep(POLL_S)
    outcomes = []
    for procs in running:
        codes, seconds = [], []
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
                codes.append(None)
            else:
                codes.append(p.returncode)
            seconds.append(round(ended.get(id(p), limit_s), 1))
        outcomes.append({"exit_codes": codes, "seconds": seconds})
    return outcomes
