"""Starts a job's ranks with torch's own launcher: torchrun's arguments, parsed by
torch.distributed.run, run in this process by torch's elastic launch API, so rendezvous (c10d,
many nodes), restarts, signals and the environment each rank gets are torchrun's. A rank that
fails ends the others (torch's agent does that), and a job that runs past its timeout is ended as
a whole (SIGTERM to this process, which torch's agent turns into stopping its workers; before the
workers start, while the rendezvous waits for a node that never comes, our own handler does), so
a run never hangs on a dead peer and always says why it ended. At the deadline the ranks still
running are noted (pid, RANK, whether stopped), and a stopped one (SIGSTOP, a debugger) gets its
SIGTERM followed by SIGCONT: a stopped process keeps SIGTERM pending, so torch's agent would
otherwise wait out its 30 s grace and SIGKILL it. A command that starts its own launcher
(torchrun) runs as it is. A job with a run directory (`run`'s --run-dir; an `ab` side's folder,
where the environment puts its report) gets its flight-recorder dumps there, and torch's launcher
keeps its per-rank logs there (run_files.py).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field

from .run_files import keep_dumps_in, log_folder, run_directory

PREFIX_TEMPLATE = "[rank${rank}] "  # torchrun's log-line prefix, as `nccl-migrate run` always printed it


@dataclass
class RankResult:
    rank: int
    returncode: int | None  # None: ended by the launcher (a peer failed, or the timeout)


@dataclass
class RunningProcess:
    """A rank's process still running at the job's deadline."""
    pid: int
    rank: int | None  # its RANK variable, as its launcher set it (a recorder's meta names its group rank)
    stopped: bool  # stopped (SIGSTOP, a debugger), so it could not answer at all
    start_ticks: int | None = None  # when it started (/proc's clock ticks since boot): tells it from a later
    # process that got the same pid


@dataclass
class JobResult:
    ranks: list[RankResult] = field(default_factory=list)  # the failed ranks, the cause first
    timed_out: bool = False
    seconds: float = 0.0
    error: str | None = None  # the launcher itself failed (rendezvous, a bad argument)
    timeout: float | None = None  # the limit the job ran under
    running_at_deadline: list[RunningProcess] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.error is None and all(r.returncode == 0 for r in self.ranks)

    def describe_failure(self) -> str:
        if self.timed_out:
            limit = f"{self.timeout:g} s" if self.timeout is not None else "its limit"
            return f"the job ran past its timeout ({limit}) and was ended after {self.seconds:.0f} s"
        if self.error:
            return self.error
        failed = [r for r in self.ranks if r.returncode not in (0, None)]
        if failed:
            first = failed[0]
            if first.returncode < 0:
                return f"rank {first.rank} was killed by {signal.Signals(-first.returncode).name}"
            return f"rank {first.rank} exited with status {first.returncode}"
        return "a rank was ended after a peer failed"


AGENT_GRACE_SECONDS = 30  # torch's agent waits this long after its SIGTERM before it sends SIGKILL


def _stat(pid: int | str) -> tuple[int, str, int] | None:
    """(parent pid, state letter, start time in clock ticks since boot) of a process, from /proc;
    None once it ended."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), fields[0], int(fields[19])


def _processes() -> dict[int, tuple[int, str, int]]:
    """Every process on this host: pid -> its _stat."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := _stat(name)) is not None:
            found[int(name)] = stat
    return found


def _rank_variable(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            variables = f.read().split(b"\0")
    except OSError:
        return None
    for variable in variables:
        if variable.startswith(b"RANK="):
            value = variable[5:].decode(errors="replace")
            return int(value) if value.isdigit() else None
    return None


def ranks_running_under(root: int) -> tuple[list[RunningProcess], list[int]]:
    """The rank processes running below ``root`` (the topmost descendants with a RANK variable:
    their own children, data loaders, inherit it) and every stopped process below it."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    ranks, stopped = [], []
    todo = [(pid, False) for pid in children.get(root, [])]  # (pid, below a rank)
    while todo:
        pid, below_rank = todo.pop()
        is_stopped = table[pid][1] in "Tt"
        if is_stopped:
            stopped.append(pid)
        rank = None if below_rank else _rank_variable(pid)
        if rank is not None:
            ranks.append(RunningProcess(pid, rank, is_stopped, table[pid][2]))
        todo.extend((child, below_rank or rank is not None) for child in children.get(pid, []))
    return sorted(ranks, key=lambda p: (p.rank, p.pid)), stopped


def end_stopped(pids: list[int]) -> None:
    """SIGTERM, then SIGCONT, to each stopped process: a stopped process keeps SIGTERM pending until
    it runs again (only SIGKILL ends it where it stands), and SIGTERM first means it never runs on
    past its deadline."""
    for pid in pids:
        for signum in (signal.SIGTERM, signal.SIGCONT):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)


class _Deadline:
    """Sends this process SIGTERM after ``seconds`` unless disarmed first: torch's agent stops its
    workers on that signal, as it does when a user's scheduler sends it. Notes which ranks were
    still running first, and ends the stopped ones itself."""

    def __init__(self, seconds: float):
        self.lock, self.armed, self.fired = threading.Lock(), True, False
        self.running: list[RunningProcess] = []
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.daemon = True
        self.timer.start()

    def _fire(self) -> None:
        with self.lock:
            if self.armed:
                self.fired = True
                try:
                    self.running, stopped = ranks_running_under(os.getpid())
                except OSError:  # no /proc: torch's agent still ends them, a stopped one after its grace
                    self.running, stopped = [], []
                end_stopped(stopped)
                os.kill(os.getpid(), signal.SIGTERM)

    def disarm(self) -> None:
        with self.lock:
            self.armed = False
        self.timer.cancel()


@contextlib.contextmanager
def _stopped_by_signals():
    """SIGTERM and SIGINT raise torch's SignalException from the start of the launch, not only once
    torch's agent has started its workers (it installs its own handlers then): a timeout or a user's
    signal during the rendezvous (a peer node that never comes) ends the launch with a message
    instead of killing this process silently. The handlers this process had are back afterwards:
    torch's would otherwise raise, with a traceback, at a later signal."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; torch's agent then sets none either
        return
    from torch.distributed.elastic.multiprocessing.api import SignalException

    def stop(signum, frame):
        raise SignalException(f"Process {os.getpid()} got signal: {signum}", sigval=signal.Signals(signum))

    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    for signum in saved:
        signal.signal(signum, stop)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def _job_environment(env: dict[str, str] | None, run_dir: str | None) -> tuple[dict[str, str], str | None]:
    """What the job runs with, ``env`` (None: this process's) with its dumps kept in its run
    directory, and that directory (None: the job has none)."""
    job_env = dict(os.environ if env is None else env)
    directory = run_directory(job_env, run_dir)
    if directory is not None:
        keep_dumps_in(job_env, directory)
    return job_env, directory


@contextlib.contextmanager
def _environment(env: dict[str, str] | None):
    """The job's environment as this process's, for the launch: torch's agent hands its own
    environment to the ranks."""
    if env is None:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def torchrun_arguments(command: list[str], nproc: int, launcher_args: list[str] | None = None,
                       log_dir: str | None = None) -> list[str]:
    """torchrun's arguments for ``command``: ``nproc`` ranks on this node, and either a local
    standalone rendezvous or the multi-node one ``launcher_args`` gives (--nnodes, --rdzv-*);
    torch's agent keeps each rank's output in ``log_dir`` (None: a torchelastic_* folder of its
    own in the temporary directory, which it never removes)."""
    extra = list(launcher_args or []) + (["--log-dir", log_dir] if log_dir else [])
    # torchrun's --standalone, as torch.distributed.run.run applies it (config_from_args does not):
    # a c10d rendezvous on a free local port, with an id of its own.
    standalone = ["--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "--rdzv-id", str(uuid.uuid4())]
    rendezvous = [] if any(a.startswith(("--rdzv", "--master")) for a in extra) else standalone
    return ["--nproc-per-node", str(nproc), *rendezvous, "--max-restarts", "0", "--tee", "3",
            *_prefix_arguments(), *extra, *command]


def _prefix_arguments() -> list[str]:
    # torch 2.11's torchrun has no --log-line-prefix-template: its lines keep torchrun's own prefix.
    from torch.distributed.run import get_args_parser

    known = get_args_parser()._option_string_actions  # noqa: SLF001 - argparse keeps no public list
    return ["--log-line-prefix-template", PREFIX_TEMPLATE] if "--log-line-prefix-template" in known else []


def _python_script(command: list[str]) -> list[str]:
    # torchrun runs a script with its own interpreter; a binary is named with --no-python.
    return command if command[0].endswith(".py") else ["--no-python", *command]


def run_job(command: list[str], nproc: int, env: dict[str, str] | None = None, timeout: float | None = 600.0,
            launcher_args: list[str] | None = None, run_dir: str | None = None) -> JobResult:
    """Runs ``command`` (a .py script or a program) as ``nproc`` local ranks through torch's
    elastic launch; each rank gets torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE,
    MASTER_ADDR/PORT, TORCHELASTIC_*). ``run_dir``: where the job's own files go (None: the folder
    of its report, if the environment names one; run_files.py)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch
    from torch.distributed.run import config_from_args, parse_args

    started = time.monotonic()
    result = JobResult()
    job_env, run_dir = _job_environment(env, run_dir)
    log_dir = log_folder(run_dir) if run_dir else None
    with _environment(job_env), _stopped_by_signals():  # config_from_args sets variables the ranks inherit
        rejected = io.StringIO()  # torchrun's own usage message, for the error (stderr may be a log file)
        try:
            with contextlib.redirect_stderr(rejected):
                config, entrypoint, arguments = config_from_args(
                    parse_args(torchrun_arguments(_python_script(command), nproc, launcher_args, log_dir)))
        except SystemExit:
            said = rejected.getvalue().strip().splitlines()
            result.error = f"torchrun rejected the launch arguments {launcher_args}: {said[-1] if said else ''}"
            return result
        # config_from_args checks by assert and int(), and a --nnodes of more than MIN:MAX by RuntimeError
        except (ValueError, AssertionError, TypeError, RuntimeError) as error:
            result.error = (f"torchrun rejected the launch arguments {launcher_args}: "
                            f"{error or 'a value out of range'} (see torchrun --help for each option's form)")
            return result
        deadline = _Deadline(timeout) if timeout is not None else None
        try:
            try:
                elastic_launch(config, entrypoint)(*arguments)
            finally:
                if deadline is not None:
                    deadline.disarm()
            result.ranks = [RankResult(rank, 0) for rank in range(config.nproc_per_node)]
        except ChildFailedError as failed:
            result.ranks = failed_ranks({rank: (f.exitcode, f.timestamp) for rank, f in failed.failures.items()})
        except SignalException as stopped:
            if deadline is None or not deadline.fired:
                result.error = f"the launcher was stopped by {stopped.sigval.name}"
        except Exception as error:  # noqa: BLE001 - rendezvous and agent errors: say which, never a traceback
            result.error = f"torch's launcher failed: {type(error).__name__}: {error}"
    if deadline is not None and deadline.fired:  # the agent may have seen a rank we ended fail first
        result.timed_out, result.running_at_deadline = True, deadline.running
    result.timeout = timeout
    result.seconds = time.monotonic() - started
    return result


def failed_ranks(failures: dict[int, tuple[int, int]]) -> list[RankResult]:
    """The failed ranks (global rank -> (exit code, torch's timestamp in whole seconds)), the cause
    first. Once a rank fails, torch's agent sends the others SIGTERM, and SIGKILL to those still
    there after its grace: those are None (ended by the launcher) whenever another rank failed
    otherwise. A peer's death makes the survivors' collectives fail ("Connection closed by peer")
    and some exit with a status of their own before the agent ends them; so of the rest, deaths by
    a signal come first, then the earliest."""
    if not failures:
        return []
    first = min(timestamp for _, timestamp in failures.values())

    def by_the_agent(code: int, timestamp: int) -> bool:
        return code == -signal.SIGTERM or (code == -signal.SIGKILL and timestamp >= first + AGENT_GRACE_SECONDS - 1)

    causes = {rank: facts for rank, facts in failures.items() if not by_the_agent(*facts)}
    if not causes:  # every rank was ended by a signal like the agent's: none can be told from the others
        causes = failures
    order = sorted(causes, key=lambda rank: (causes[rank][0] >= 0, causes[rank][1], rank))
    ended = sorted(set(failures) - set(causes))
    return [RankResult(rank, causes[rank][0]) for rank in order] + [RankResult(rank, None) for rank in ended]


def _pump(stream, sink) -> None:
    for line in iter(stream.readline, b""):
        sink.write(line.decode(errors="replace"))
        sink.flush()


def run_launcher(command: list[str], env: dict[str, str] | None = None, timeout: float | None = 600.0,
                 run_dir: str | None = None) -> JobResult:
    """Runs a command that starts its own ranks (torchrun, a SLURM step) as one process group;
    ends it as a whole past ``timeout`` (None: no limit). ``run_dir`` as for run_job (the
    command's own launcher keeps its logs where it does)."""
    started = time.monotonic()
    result = JobResult()
    try:
        proc = subprocess.Popen(command, env=_job_environment(env, run_dir)[0], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as error:
        result.error = f"cannot start {command[0]}: {error}"
        return result
    pump = threading.Thread(target=_pump, args=(proc.stdout, sys.stdout), daemon=True)
    pump.start()
    result.timeout = timeout
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        result.timed_out = True
        try:
            result.running_at_deadline, stopped = ranks_running_under(proc.pid)
        except OSError:  # no /proc: the stopped ones are SIGKILLed after the grace periods
            stopped = []
        # torchrun's ranks run in sessions of their own, which the group's SIGTERM below does not
        # reach: torchrun forwards it, and a stopped one gets its own here.
        end_stopped(stopped)
        _end(proc, result.running_at_deadline)
    pump.join(timeout=5)
    result.seconds = time.monotonic() - started
    if not result.timed_out:
        result.ranks = [RankResult(0, proc.returncode)]
        if proc.returncode:
            result.error = f"{os.path.basename(command[0])} exited with status {proc.returncode}"
    return result


def _still_the_same(process: RunningProcess) -> bool:
    """The pid still names the process seen at the deadline, not a later one given its number."""
    stat = _stat(process.pid)
    return stat is not None and (process.start_ticks is None or stat[2] == process.start_ticks)


def _end(proc: subprocess.Popen, ranks: list[RunningProcess]) -> None:
    """SIGTERM the launcher's process group (torchrun forwards it to its ranks), then SIGKILL
    what is left, the ranks included, after a grace period longer than torchrun's own."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=AGENT_GRACE_SECONDS + 10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        for rank in ranks:  # in sessions of their own: the group's SIGKILL misses them
            if _still_the_same(rank):  # seen 40 s ago: its pid may have been reused since
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(rank.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
