"""What a job's COMMAND is, for `run`, `ab` and `ab record`: whether it starts its own ranks (a
launcher, or a shell script that calls one), so that it runs once as given, and why it cannot run
at all, checked before anything starts."""

from __future__ import annotations

import os
import shutil

# Programs that start a job's ranks themselves: torch's launcher and the schedulers' and MPI's.
LAUNCHERS = {"torchrun", "srun", "mpirun", "mpiexec"}
SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}


def starts_own_ranks(command: list[str]) -> bool:
    """Whether ``command`` starts the ranks itself: a launcher (torchrun, srun, mpirun, python -m
    torch.distributed.run) or a shell script (``./launch.sh``, ``bash launch.sh``), which is how a
    job's launcher is written; started once per rank instead, it would start every rank that many
    times over. Anything else (a .py job, a program) is one rank, started by torch's launcher."""
    program = os.path.basename(command[0])
    if program in LAUNCHERS or command[1:3] == ["-m", "torch.distributed.run"]:
        return True
    if program.endswith(".sh"):
        return True
    return program in SHELLS


def _looked_for(path: str) -> str:
    return "" if os.path.isabs(path) else f" (looked for {os.path.abspath(path)})"


def _script_problem(path: str) -> str | None:
    if not os.path.exists(path):
        return (f"the job's script {path} does not exist{_looked_for(path)}; give its path, absolute or from the "
                "current directory")
    if not os.path.isfile(path):
        return f"the job's script {path} is not a file; give the .py script the job runs"
    if not os.access(path, os.R_OK):
        return f"the job's script {path} cannot be read by this user; make it readable (chmod a+r {path})"
    return None


def _program_problem(program: str) -> str | None:
    if os.sep not in program:
        return None if shutil.which(program) else (
            f"{program}: no such program on PATH; give the job's .py script, or the path of a program or launch "
            "command (torchrun, srun, a shell script)")
    if not os.path.isfile(program):
        return (f"{program} does not exist or is not a file{_looked_for(program)}; give the path of the job's "
                "program or launch command, absolute or from the current directory")
    if not os.access(program, os.X_OK):
        return f"{program} is not executable; make it so (chmod +x {program}), or give it to its interpreter (bash {program})"
    return None


def unrunnable(command: list[str]) -> str | None:
    """Why ``command`` cannot run, or None; checked before any side starts, so that a job that is
    not there fails once, at once, not as two failed sides. A .py job must be a readable file; any
    other COMMAND's program must be found (a path, or on PATH), and a Python interpreter's .py
    script too (``python job.py``). What a launch command runs elsewhere (srun, a container) is
    its own business: only its program is checked here."""
    if command[0].endswith(".py"):
        return _script_problem(command[0])
    problem = _program_problem(command[0])
    if problem or not os.path.basename(command[0]).startswith("python"):
        return problem
    for arg in command[1:]:
        if arg in ("-m", "-c"):  # a module or a program text, not a script
            return None
        if not arg.startswith("-"):
            return _script_problem(arg) if arg.endswith(".py") else None
    return None
