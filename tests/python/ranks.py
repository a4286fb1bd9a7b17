"""Runs a test function in N real processes that rendezvous through a FileStore, and returns
what each rank returned. A rank that raises fails the test with its traceback; ranks that
outlive `timeout` are killed and the test fails; a reporting rank that then exits non-zero (an
abort at exit) or has not exited EXIT_GRACE seconds after returning (a hang in shutdown) fails
it too.

The ranks are forked by rank_zygote.py, a process of this test process's that has imported
torch once (a spawned rank, as torch's MultiProcessTestCase starts them, spends about 2 s of CPU
importing torch: most of what the ranks of the suite's tests cost). A rank still gets this
process's environment, working directory, sys.path and output, and ends through Python's and
the C library's own exit, as a spawned one does (rank_zygote.py)."""

from __future__ import annotations

import atexit
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

from rank_zygote import HEADER

# How long a rank that returned may take to exit before it counts as hung in shutdown. A hang
# never ends, so the bound only has to outlast a slow exit: torch's teardown of a few ranks takes
# well over 10 s on two cores shared with the suite's other workers (tools/test.sh runs them in
# parallel), which is not a hang.
EXIT_GRACE = 30.0
POLL_S = 0.01  # how often a rank's result or exit is looked for
ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rank_zygote.py")


class _Zygote:
    """This process's rank_zygote.py, started on first use and ended with this process."""

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.owner = os.getpid()
        self.sock = ours
        self.proc = subprocess.Popen([sys.executable, ZYGOTE, str(theirs.fileno())], pass_fds=[theirs.fileno()])
        theirs.close()
        atexit.register(self.close)

    def fork(self, request: dict) -> int:
        body = pickle.dumps(request)
        try:
            # This process's descriptors 1 and 2, which a spawned rank would inherit (pytest's
            # capture points them at the test's own output).
            socket.send_fds(self.sock, [HEADER.pack(len(body)) + body], [1, 2])
            head = self._read(HEADER.size)
            return pickle.loads(self._read(HEADER.unpack(head)[0]))
        except BaseException:  # cut off mid-exchange (a test's timeout, say): the next run starts a new zygote
            self.close()
            raise

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise RuntimeError(f"the rank zygote ({ZYGOTE}) ended: exit code {self.proc.wait()}")
            data += chunk
        return data

    def close(self) -> None:
        if self.owner == os.getpid() and self.sock.fileno() != -1:
            self.sock.close()  # the zygote ends at the end of its socket
            self.proc.wait()


_zygote: _Zygote | None = None


def _the_zygote() -> _Zygote:
    global _zygote
    if (_zygote is None or _zygote.owner != os.getpid() or _zygote.sock.fileno() == -1
            or _zygote.proc.poll() is not None):
        _zygote = _Zygote()
    return _zygote


class _Rank:
    """A started rank: what the test needs of multiprocessing's Process (join, kill, exitcode)."""

    def __init__(self, pid: int, exit_path: str, zygote: _Zygote):
        self.pid, self.exit_path, self.zygote = pid, exit_path, zygote

    @property
    def exitcode(self) -> int | None:
        try:
            with open(self.exit_path) as written:
                return int(written.read())
        except FileNotFoundError:
            return None

    def is_alive(self) -> bool:
        if self.exitcode is not None:
            return False
        if self.zygote.proc.poll() is None:
            return True
        try:  # the zygote is gone (no exit code will come): alive while the pid is
            os.kill(self.pid, 0)
            return True
        except ProcessLookupError:
            return False

    def join(self, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.is_alive() and (deadline is None or time.monotonic() < deadline):
            time.sleep(POLL_S)

    def kill(self) -> None:
        if self.is_alive():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _next_result(folder: str, seen: set[int], world_size: int, timeout: float) -> tuple | None:
    """The next rank's (rank, status, value) written in `folder`, or None after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        for rank in range(world_size):
            path = os.path.join(folder, f"result_{rank}")
            if rank not in seen and os.path.exists(path):
                seen.add(rank)
                with open(path, "rb") as written:
                    return pickle.load(written)
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_S)


def run_ranks(fn: Callable[[int, int, Any], Any], world_size: int = 2, timeout: float = 120.0,
              env: dict[str, str] | None = None, reporting: list[int] | None = None) -> list[Any]:
    """`reporting`: the ranks expected to return (default all); ranks that die on purpose are
    left out and killed at the end. Returns the reporting ranks' results in rank order."""
    folder = tempfile.mkdtemp(prefix="nccl_migrate_ranks_")
    store_path = os.path.join(folder, "store")
    call = pickle.dumps((fn, world_size, store_path, env or {}))
    zygote = _the_zygote()
    procs = []
    for r in range(world_size):
        exit_path = os.path.join(folder, f"exit_{r}")
        pid = zygote.fork({"rank": r, "call": call, "environ": dict(os.environ), "cwd": os.getcwd(),
                           "sys_path": list(sys.path), "result_path": os.path.join(folder, f"result_{r}"),
                           "exit_path": exit_path})
        procs.append(_Rank(pid, exit_path, zygote))
    collected: dict[int, Any] = {}
    errors: list[str] = []
    expected = list(range(world_size)) if reporting is None else reporting
    seen: set[int] = set()
    try:
        for _ in range(len(expected)):
            got = _next_result(folder, seen, world_size, timeout)
            if got is None:
                errors.append(f"ranks {sorted(set(expected) - set(collected))} did not finish within {timeout} s")
                break
            rank, status, value = got
            if status == "ok":
                collected[rank] = value
            else:
                errors.append(f"rank {rank} raised:\n{value}")
    finally:
        # The reporting ranks first, each given EXIT_GRACE to exit on its own; a rank left out
        # of `reporting` is not waited for (it dies on purpose, or sleeps to stay silent): once
        # the reporting ranks are gone it has nothing left to show, and is killed.
        for rank in sorted(range(world_size), key=lambda r: r not in expected):
            p = procs[rank]
            p.join(timeout=EXIT_GRACE if rank in expected else 0)
            if p.is_alive():
                p.kill()
                p.join()
                if rank in collected:
                    errors.append(f"rank {rank} returned but did not exit within {EXIT_GRACE:.0f} s (killed)")
            elif rank in collected and p.exitcode != 0:
                errors.append(f"rank {rank} returned but exited with code {p.exitcode}")
        shutil.rmtree(folder, ignore_errors=True)
    if errors:
        raise AssertionError("\n".join(errors))
    return [collected[r] for r in expected]
