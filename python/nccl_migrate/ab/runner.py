"""Runs one side of an A/B run: the job's command as N local ranks, with the side's environment
and the recorder switched on; the job's own output goes to the side's job.log."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass

from ..launch import JobResult, run_job
from ..record_files import write_whole
from . import KEEP_VARIABLE, RECORD_VARIABLE, SHADOW_PERTURB_VARIABLE, SHADOW_VARIABLE
from .sides import RecordError, clear
from .spec import Side, shadow_environment

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


SIDE_FILE = "side.json"  # what ran on a side, beside its records, for an offline compare


@dataclass
class SideRun:
    side: Side
    directory: str
    log: str | None  # the job's own output, when we started the job
    failure: str | None  # why the side's job failed, or None
    seconds: float

    @classmethod
    def finished(cls, side: Side, directory: str, log: str, job: JobResult) -> SideRun:
        failure = None if job.ok else f"side {side.label} ({side.text}): {job.describe_failure()}; its output: {log}"
        run = cls(side, directory, log, failure, job.seconds)
        run.save()
        return run

    def save(self) -> None:
        write_whole(os.path.join(self.directory, SIDE_FILE), json.dumps(
            {"label": self.side.label, "spec": self.side.text, "env": self.side.env, "log": self.log,
             "failure": self.failure, "seconds": self.seconds}, indent=1))

    @classmethod
    def recorded(cls, directory: str, label: str) -> SideRun:
        """A side recorded earlier (``ab record``, or records a job wrote with the environment
        alone, which have no side.json: their job's outcome is unknown here)."""
        path = os.path.join(directory, SIDE_FILE)
        if not os.path.exists(path):
            return cls(Side(label, f"records in {directory}"), directory, None, None, 0.0)
        try:
            with open(path) as f:
                saved = json.load(f)
            side = Side(label, saved["spec"], saved["env"])
            return cls(side, directory, saved["log"], saved["failure"], saved["seconds"])
        except (ValueError, KeyError, TypeError) as error:
            raise RecordError(f"{path}: not a side description ({error}); remove it to compare the records "
                              "alone") from None


def job_command(command: list[str]) -> tuple[list[str], bool]:
    """The command to start, and whether it launches its own ranks (torchrun)."""
    if command[0].endswith(".py"):
        return [sys.executable, *command], False
    launches = os.path.basename(command[0]) == "torchrun" or command[1:3] == ["-m", "torch.distributed.run"]
    return command, launches


def job_environment(side: Side, directory: str, keep_bytes: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_MIGRATE_AB_")}  # nothing leaks in
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH", "")]))
    env[RECORD_VARIABLE] = directory
    env["NCCL_MIGRATE_REPORT"] = os.path.join(directory, "report_{rank}.json")
    if keep_bytes:
        env[KEEP_VARIABLE] = str(keep_bytes)
    for key, value in side.env.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _run(side: Side, command: list[str], nproc: int, timeout: float, directory: str, env: dict) -> SideRun:
    os.makedirs(directory, exist_ok=True)
    clear(directory)
    argv, launches_ranks = job_command(command)
    log = os.path.join(directory, "job.log")
    with open(log, "w") as out, contextlib.redirect_stdout(out):
        job = run_job(argv, 1 if launches_ranks else nproc, env=env, timeout=timeout)
    return SideRun.finished(side, directory, log, job)


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
