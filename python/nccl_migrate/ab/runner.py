"""Runs one side of an A/B run: the job's command as N local ranks, with the side's environment
and the recorder switched on; the job's own output goes to the side's job.log."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import socket
from dataclasses import asdict, dataclass, field

from .. import run_files
from ..job_command import starts_own_ranks
from ..launch import JobResult, run_job, run_launcher
from ..record_files import write_whole
from . import KEEP_VARIABLE, RECORD_VARIABLE, SHADOW_PERTURB_VARIABLE, SHADOW_VARIABLE
from .sides import RecordError, clear
from .spec import Side, shadow_environment

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


SIDE_FILES = "side.*.json"  # what ran on a side, one per launching process (one per node), for an offline compare


@dataclass
class SideRun:
    side: Side
    directory: str
    log: str | None  # the job's own output, when we started the job
    failure: str | None  # why the side's job failed, or None
    seconds: float
    # What the launcher saw, for the report to say which rank failed at which op (side_failure.py):
    # the failed ranks, the cause first ({"rank", "returncode"}: None, ended by the launcher), the
    # limit the job ran under, and the ranks still running when it ran past it ({"pid", "rank",
    # "stopped"}).
    ranks: list[dict] = field(default_factory=list)
    timed_out: bool = False
    timeout: float | None = None
    running_at_deadline: list[dict] = field(default_factory=list)

    @classmethod
    def finished(cls, side: Side, directory: str, log: str, job: JobResult, ranks_known: bool = True) -> SideRun:
        """``ranks_known``: the job's ranks are the launcher's (torch's launcher in this process),
        not one launch command whose exit status stands for them all."""
        failure = None if job.ok else f"side {side.label} ({side.text}): {job.describe_failure()}; its output: {log}"
        ranks = [asdict(r) for r in job.ranks if r.returncode != 0] if ranks_known else []
        run = cls(side, directory, log, failure, job.seconds, ranks, job.timed_out, job.timeout,
                  [asdict(p) for p in job.running_at_deadline])
        run.save()
        return run

    def save(self) -> None:
        name = f"side.{socket.gethostname()}.{os.getpid()}.json"
        write_whole(os.path.join(self.directory, name), json.dumps(
            {"label": self.side.label, "spec": self.side.text, "env": self.side.env, "log": self.log,
             "failure": self.failure, "seconds": self.seconds, "ranks": self.ranks, "timed_out": self.timed_out,
             "timeout": self.timeout, "running_at_deadline": self.running_at_deadline}, indent=1))

    @classmethod
    def recorded(cls, directory: str, label: str) -> SideRun:
        """A side recorded earlier, by one or more launching processes (``ab record`` on each
        node), or by a job given the environment alone (no side file: its outcome is unknown
        here, its records say what they can)."""
        paths = sorted(glob.glob(os.path.join(directory, SIDE_FILES)))
        if not paths:
            return cls(Side(label, f"records in {directory}"), directory, None, None, 0.0)
        saved = []
        for path in paths:
            try:
                with open(path) as f:
                    saved.append(json.load(f))
                saved[-1]["spec"], saved[-1]["env"], saved[-1]["failure"], saved[-1]["seconds"]
            except (ValueError, KeyError, TypeError) as error:
                raise RecordError(f"{path}: not a side description ({error}); remove it to compare the records "
                                  "alone") from None
        failures = [s["failure"] for s in saved if s["failure"]]
        # Each node's launcher saw its own ranks (side files written before these facts lack them).
        return cls(Side(label, saved[0]["spec"], saved[0]["env"]), directory, saved[0].get("log"),
                   "; ".join(failures) or None, max(s["seconds"] for s in saved),
                   [r for s in saved for r in s.get("ranks") or []], any(s.get("timed_out") for s in saved),
                   next((s["timeout"] for s in saved if s.get("timeout") is not None), None),
                   [p for s in saved for p in s.get("running_at_deadline") or []])


def job_environment(side: Side, directory: str, keep_bytes: int, inherit: bool = True) -> dict[str, str | None]:
    """The environment a side's job runs with: this process's (``inherit``) with the recorder
    switched on and the side's variables applied; without ``inherit`` only what the side sets
    (None: unset), for a job started elsewhere (SLURM, Kubernetes) with nccl_migrate installed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_MIGRATE_AB_")} if inherit else {}
    if inherit:  # nothing of an outer A/B run leaks in; the in-tree package is importable
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH", "")]))
    env[RECORD_VARIABLE] = directory
    # Always the side's own report, whatever the user named (run_files.report_into keeps a
    # user's file for `run`): two sides writing one file would lose one.
    env[run_files.REPORT_VARIABLE] = os.path.join(directory, run_files.REPORT_NAME)
    if not inherit:  # a job started elsewhere gets no launcher of ours to point its dumps
        env[run_files.DUMP_VARIABLE] = run_files.dump_prefix(directory)
    if keep_bytes:
        env[KEEP_VARIABLE] = str(keep_bytes)
    for key, value in side.env.items():
        if value is None and inherit:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _run(side: Side, command: list[str], nproc: int, timeout: float, directory: str, env: dict,
         launcher_args: list[str] | None = None) -> SideRun:
    os.makedirs(directory, exist_ok=True)
    clear(directory)
    return _launch(side, command, nproc, timeout, directory, env, os.path.join(directory, "job.log"), launcher_args)


def _launch(side: Side, command: list[str], nproc: int, timeout: float, directory: str, env: dict, log: str,
            launcher_args: list[str] | None) -> SideRun:
    if starts_own_ranks(command):
        return _started_once(side, command, timeout, directory, env, log)
    # torch's launcher tees each rank's output to this process's sys.stdout and sys.stderr.
    with open(log, "w") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        job = run_job(command, nproc, env=env, timeout=timeout, launcher_args=launcher_args)
    return SideRun.finished(side, directory, log, job)


def _started_once(side: Side, command: list[str], timeout: float | None, directory: str, env: dict,
                  log: str) -> SideRun:
    """A launch command (torchrun, srun, a shell script) run once, as given: it starts the ranks."""
    with open(log, "w") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        job = run_launcher(command, env=env, timeout=timeout)
    return SideRun.finished(side, directory, log, job, ranks_known=False)


def job_log(directory: str) -> str:
    """Where one launching process of ``ab record`` puts the job's output (one per node)."""
    return os.path.join(directory, f"job.{socket.gethostname()}.{os.getpid()}.log")


def record_side(side: Side, command: list[str], nproc: int, timeout: float | None, directory: str, keep_bytes: int,
                launcher_args: list[str] | None = None, log: str | None = None) -> SideRun:
    """``ab record``: one launching process of a side (one per node), recording into a directory
    it shares with the side's other nodes; earlier records are left alone (a rank recorded twice
    is reported when compared). ``timeout`` None: no limit."""
    os.makedirs(directory, exist_ok=True)
    log = log or job_log(directory)
    env = job_environment(side, directory, keep_bytes)
    return _launch(side, command, nproc, timeout, directory, env, log, launcher_args)


def run_side(side: Side, command: list[str], nproc: int, timeout: float, run_dir: str, keep_bytes: int) -> SideRun:
    directory = os.path.join(run_dir, side.label)
    return _run(side, command, nproc, timeout, directory, job_environment(side, directory, keep_bytes))


def run_shadowed(primary: Side, shadow: Side, command: list[str], nproc: int, timeout: float, run_dir: str,
                 keep_bytes: int) -> SideRun:
    """One run with ``primary``'s environment, every op also run on shadow groups with ``shadow``'s
    backend (SpecError when ``shadow`` sets more than its backend)."""
    shadow_env, perturb = shadow_environment(shadow)
    directory = os.path.join(run_dir, "shadow")
    env = job_environment(primary, directory, keep_bytes)
    env["NCCL_MIGRATE_ACTIVATE"] = "1"  # the toolkit's backends must be registered for the shadow groups
    env[SHADOW_VARIABLE] = json.dumps(shadow_env)
    if perturb:
        env[SHADOW_PERTURB_VARIABLE] = perturb
    return _run(primary, command, nproc, timeout, directory, env)
