"""Runs one side of an A/B run: the job's command as N local ranks, with the side's environment
and the recorder switched on; the job's own output goes to the side's job.log."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass

from ..launch import JobResult, run_job
from . import KEEP_VARIABLE, RECORD_VARIABLE, SHADOW_PERTURB_VARIABLE, SHADOW_VARIABLE
from .spec import Side, shadow_environment

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class SideRun:
    side: Side
    directory: str
    log: str
    job: JobResult

    def failure(self) -> str | None:
        """Why this side's job failed, or None."""
        if self.job.ok:
            return None
        return f"side {self.side.label} ({self.side.text}): {self.job.describe_failure()}; its output: {self.log}"


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
    argv, launches_ranks = job_command(command)
    log = os.path.join(directory, "job.log")
    with open(log, "w") as out, contextlib.redirect_stdout(out):
        job = run_job(argv, 1 if launches_ranks else nproc, env=env, timeout=timeout)
    return SideRun(side, directory, log, job)


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
