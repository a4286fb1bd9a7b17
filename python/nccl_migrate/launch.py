"""Starts a job as N local ranks with the torch.distributed environment, and watches them.

Each rank is a real process. A rank that fails ends the others at once, and a job that runs
past its timeout is ended as a whole, so a run never hangs on a dead peer.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field


@dataclass
class RankResult:
    rank: int
    returncode: int | None  # None: ended by us (peer failure or timeout)


@dataclass
class JobResult:
    ranks: list[RankResult] = field(default_factory=list)
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(r.returncode == 0 for r in self.ranks)

    def describe_failure(self) -> str:
        if self.timed_out:
            return f"the job ran past its timeout ({self.seconds:.0f} s) and was ended"
        failed = [r for r in self.ranks if r.returncode not in (0, None)]
        if failed:
            first = failed[0]
            return f"rank {first.rank} exited with status {first.returncode}"
        return "a rank was ended after a peer failed"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pump(stream, prefix: str, sink) -> None:
    for line in iter(stream.readline, b""):
        sink.write(prefix + line.decode(errors="replace"))
        sink.flush()


def run_job(command: list[str], nproc: int, env: dict[str, str] | None = None, timeout: float = 600.0,
            prefix_output: bool = True) -> JobResult:
    """Runs ``command`` once per rank with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT set."""
    base = dict(os.environ if env is None else env)
    base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(nproc),
                LOCAL_WORLD_SIZE=str(nproc))
    procs: list[subprocess.Popen] = []
    pumps: list[threading.Thread] = []
    started = time.monotonic()
    for rank in range(nproc):
        rank_env = dict(base, RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0")
        proc = subprocess.Popen(command, env=rank_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        procs.append(proc)
        prefix = f"[rank{rank}] " if prefix_output else ""
        pump = threading.Thread(target=_pump, args=(proc.stdout, prefix, sys.stdout), daemon=True)
        pump.start()
        pumps.append(pump)

    result = JobResult()
    ended_by_us: set[int] = set()
    deadline = started + timeout
    while any(p.poll() is None for p in procs):
        failed = any(p.poll() not in (None, 0) for p in procs)
        if failed or time.monotonic() > deadline:
            result.timed_out = not failed
            for rank, p in enumerate(procs):
                if p.poll() is None:
                    ended_by_us.add(rank)
                    _end(p)
            break
        time.sleep(0.05)
    for p in procs:
        p.wait()
    for pump in pumps:
        pump.join(timeout=5)
    result.seconds = time.monotonic() - started
    result.ranks = [RankResult(rank, None if rank in ended_by_us else p.returncode) for rank, p in enumerate(procs)]
    return result


def _end(proc: subprocess.Popen) -> None:
    """SIGTERM the rank's process group, then SIGKILL what is left after a grace period."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
