"""What a job's COMMAND is, for `run`, `ab` and `ab record`: whether it starts its own ranks (a
launcher, or a shell script that calls one), so that it runs once as given, and why it cannot run
at all, checked before anything starts."""

from __future__ import annotations

import os
import shutil

# Programs that start a job's ranks themselves: torch's launcher, the schedulers' and MPI's, and
# the launchers of libraries built on torch's; a Python module that is torch's launcher.
LAUNCHERS = {"torchrun", "srun", "mpirun", "mpiexec", "deepspeed"}
LAUNCHER_MODULES = {"torch.distributed.run", "torch.distributed.launch"}
SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}


def _without_environment(command: list[str]) -> list[str]:
    """``command`` without a leading ``env [OPTIONS] [NAME=VALUE]...``, or NAME=VALUE words."""
    words = list(command)
    if words and os.path.basename(words[0]) == "env":
        words = words[1:]
        while words and words[0].startswith("-"):
            words = words[1:]
    while words and "=" in words[0] and not words[0].startswith(("-", "/", ".")):
        words = words[1:]
    return words


def _python_module(words: list[str]) -> str | None:
    """The module a Python interpreter is told to run (``python -u -m torch.distributed.run``)."""
    if not os.path.basename(words[0]).startswith("python"):
        return None
    for i, arg in enumerate(words[1:], start=1):
        if arg == "-m":
            return words[i + 1] if i + 1 < len(words) else None
        if not arg.startswith("-"):
            return None
    return None


def starts_own_ranks(command: list[str]) -> bool:
    """Whether ``command`` starts the ranks itself, so that it runs once as given: a launcher
    (torchrun, srun, mpirun, deepspeed, ``accelerate launch``, ``python -m
    torch.distributed.run``, after any ``env NAME=VALUE``) or a shell script (``./launch.sh``,
    ``bash launch.sh``), which is how a job's launcher is written; started once per rank instead,
    it would start every rank that many times over. Anything else (a .py job, ``python job.py``, a
    program) is one rank, started as many times as the job has ranks by torch's launcher."""
    words = _without_environment(command)
    if not words:
        return False
    program = os.path.basename(words[0])
    if program in LAUNCHERS or program in SHELLS or program.endswith(".sh"):
        return True
    if program == "accelerate" and words[1:2] == ["launch"]:
        return True
    return _python_module(words) in LAUNCHER_MODULES


def launcher_options_problem(command: list[str], given: list[str]) -> str | None:
    """Why the launch options ``given`` (--nproc, --nnodes, ...) cannot apply to ``command``: a
    command that starts its own ranks takes its own."""
    if not given or not starts_own_ranks(command):
        return None
    return (f"{', '.join(given)} apply to a .py job only: {command[0]} is a launch command, run once as given, and "
            "starts the ranks itself; give them to it (torchrun --nproc-per-node ...), or give the .py job itself")


def _looked_for(path: str) -> str:
    return "" if os.path.isabs(path) else f" (looked for {os.path.abspath(path)})"


def _script_problem(path: str) -> str | None:
    if not os.path.exists(path):
        return (f"the job's script {path} does not exist{_looked_for(path)}; give its path, absolute or from the "
                "current directory")
    if not os.path.isfile(path):
        return f"the job's script {path} is not a file; give the script the job runs"
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
    other COMMAND's program must be found (a path, or on PATH), and the script an interpreter is
    given too (``python job.py``, ``bash launch.sh``). What a launch command runs elsewhere (srun,
    a container) is its own business: only its program is checked here."""
    words = _without_environment(command) or command
    if words[0].endswith(".py"):
        return _script_problem(words[0])
    problem = _program_problem(words[0])
    program = os.path.basename(words[0])
    if problem or not (program.startswith("python") or program in SHELLS):
        return problem
    for arg in words[1:]:
        if arg in ("-m", "-c"):  # a module or a program text, not a script
            return None
        if not arg.startswith("-"):
            return _script_problem(arg) if arg.endswith(".py") or program in SHELLS else None
    return None
