"""Starts a job's ranks with torch's own launcher: torchrun's arguments, parsed by
torch.distributed.run, run in this process by torch's elastic launch API, so rendezvous (c10d,
many nodes), restarts, signals and the environment each rank gets are torchrun's. A rank that
fails ends the others (torch's agent does that), and a job that runs past its timeout is ended as
a whole (SIGTERM to this process, which torch's agent turns into stopping its workers; before the
workers start, while the rendezvous waits for a node that never comes, our own handler does), so
a run never hangs on a dead peer and always says why it ended. A command that starts its own launcher (torchrun) runs as it is.
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

PREFIX_TEMPLATE = "[rank${rank}] "  # torchrun's log-line prefix, as `nccl-migrate run` always printed it


@dataclass
class RankResult:
    rank: int
    returncode: int | None  # None: ended by the launcher (a peer failed, or the timeout)


@dataclass
class JobResult:
    ranks: list[RankResult] = field(default_factory=list)
    timed_out: bool = False
    seconds: float = 0.0
    error: str | None = None  # the launcher itself failed (rendezvous, a bad argument)

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.error is None and all(r.returncode == 0 for r in self.ranks)

    def describe_failure(self) -> str:
        if self.timed_out:
            return f"the job ran past its timeout ({self.seconds:.0f} s) and was ended"
        if self.error:
            return self.error
        failed = [r for r in self.ranks if r.returncode not in (0, None)]
        if failed:
            first = failed[0]
            if first.returncode < 0:
                return f"rank {first.rank} was killed by {signal.Signals(-first.returncode).name}"
            return f"rank {first.rank} exited with status {first.returncode}"
        return "a rank was ended after a peer failed"


class _Deadline:
    """Sends this process SIGTERM after ``seconds`` unless disarmed first: torch's agent stops its
    workers on that signal, as it does when a user's scheduler sends it."""

    def __init__(self, seconds: float):
        self.lock, self.armed, self.fired = threading.Lock(), True, False
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.daemon = True
        self.timer.start()

    def _fire(self) -> None:
        with self.lock:
            if self.armed:
                self.fired = True
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


def torchrun_arguments(command: list[str], nproc: int, launcher_args: list[str] | None = None) -> list[str]:
    """torchrun's arguments for ``command``: ``nproc`` ranks on this node, and either a local
    standalone rendezvous or the multi-node one ``launcher_args`` gives (--nnodes, --rdzv-*)."""
    extra = list(launcher_args or [])
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
            launcher_args: list[str] | None = None) -> JobResult:
    """Runs ``command`` (a .py script or a program) as ``nproc`` local ranks through torch's
    elastic launch; each rank gets torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE,
    MASTER_ADDR/PORT, TORCHELASTIC_*)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch
    from torch.distributed.run import config_from_args, parse_args

    started = time.monotonic()
    result = JobResult()
    with _environment(env), _stopped_by_signals():  # config_from_args sets variables the ranks inherit
        rejected = io.StringIO()  # torchrun's own usage message, for the error (stderr may be a log file)
        try:
            with contextlib.redirect_stderr(rejected):
                config, entrypoint, arguments = config_from_args(
                    parse_args(torchrun_arguments(_python_script(command), nproc, launcher_args)))
        except SystemExit:
            said = rejected.getvalue().strip().splitlines()
            result.error = f"torchrun rejected the launch arguments {launcher_args}: {said[-1] if said else ''}"
            return result
        except (ValueError, AssertionError, TypeError) as error:  # config_from_args checks by assert and int()
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
            # Ranks the agent ended (a signal) after a peer exited with a status are not the cause.
            exited = any(failure.exitcode > 0 for failure in failed.failures.values())
            order = sorted(failed.failures.items(), key=lambda item: (item[1].exitcode < 0, item[1].timestamp, item[0]))
            result.ranks = [RankResult(rank, None if exited and failure.exitcode < 0 else failure.exitcode)
                            for rank, failure in order]
        except SignalException as stopped:
            if deadline is not None and deadline.fired:
                result.timed_out = True
            else:
                result.error = f"the launcher was stopped by {stopped.sigval.name}"
        except Exception as error:  # noqa: BLE001 - rendezvous and agent errors: say which, never a traceback
            result.error = f"torch's launcher failed: {type(error).__name__}: {error}"
    result.seconds = time.monotonic() - started
    return result


def _pump(stream, sink) -> None:
    for line in iter(stream.readline, b""):
        sink.write(line.decode(errors="replace"))
        sink.flush()


def run_launcher(command: list[str], env: dict[str, str] | None = None, timeout: float | None = 600.0) -> JobResult:
    """Runs a command that starts its own ranks (torchrun, a SLURM step) as one process group;
    ends it as a whole past ``timeout`` (None: no limit)."""
    started = time.monotonic()
    result = JobResult()
    try:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
    except OSError as error:
        result.error = f"cannot start {command[0]}: {error}"
        return result
    pump = threading.Thread(target=_pump, args=(proc.stdout, sys.stdout), daemon=True)
    pump.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        result.timed_out = True
        _end(proc)
    pump.join(timeout=5)
    result.seconds = time.monotonic() - started
    if not result.timed_out:
        result.ranks = [RankResult(0, proc.returncode)]
        if proc.returncode:
            result.error = f"{os.path.basename(command[0])} exited with status {proc.returncode}"
    return result


def _end(proc: subprocess.Popen) -> None:
    """SIGTERM the launcher's process group (torchrun forwards it to its ranks), then SIGKILL
    what is left after a grace period."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
