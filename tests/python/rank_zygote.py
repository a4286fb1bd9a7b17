"""The process that starts run_ranks' ranks (ranks.py): it imports torch once, then forks one
child per rank asked for, so a rank starts with torch already loaded instead of importing it
(about 2 s of CPU each on two cores, most of what a spawned rank costs). Nothing of the
toolkit's is imported here: a rank imports nccl_migrate itself, under its own environment.
torch's own import ran under the environment of the test that first asked for ranks in this
test process (what torch reads at import, not later, is the same for every rank of it).

A rank is a real process of its own that leaves this program's loop and ends the way a spawned
rank ends, by returning to the interpreter's top level: Python finalizes (atexit, __main__'s
globals collected, threads), then the C library's exit (static destructors), so a rank that
aborts or hangs in its teardown is seen as with spawn. It gets, per request, the test process's
environment, working directory, sys.path and its stdout and stderr (passed as descriptors, so
pytest's capture sees a rank's output under the test that started it).

Protocol, on the Unix socket whose descriptor the test process names in argv[1]: a
request is a length-prefixed pickle with the test's stdout and stderr attached (SCM_RIGHTS);
the reply is the rank's pid. When a rank ends, its exit code (multiprocessing's convention:
negative for a signal) is written to the request's `exit_path`, which the test process polls.
End of the socket (the test process gone) ends this program; ranks still running go on, as a
spawned rank outlives its parent."""

from __future__ import annotations

import os
import pickle
import select
import socket
import struct
import sys
import traceback

import torch  # the preload: what every rank imports first (torch.distributed: its store, below)
import torch.distributed

HEADER = struct.Struct("!I")
REAP_EVERY_S = 0.02  # how soon a rank's exit code is written once it exited


def _receive(sock: socket.socket) -> tuple[dict | None, list[int]]:
    head, fds, _, _ = socket.recv_fds(sock, HEADER.size, 2)
    if not head:
        return None, []
    while len(head) < HEADER.size:
        head += sock.recv(HEADER.size - len(head))
    (size,) = HEADER.unpack(head)
    body = b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None, fds
        body += chunk
    return pickle.loads(body), fds


def _reap(exit_paths: dict[int, str]) -> None:
    while exit_paths:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        path = exit_paths.pop(pid, None)
        if path is not None:
            with open(path + ".part", "w") as out:
                out.write(str(code))
            os.replace(path + ".part", path)


def serve(sock: socket.socket) -> tuple[dict, list[int]] | None:
    """Forks a rank per request. Returns in the rank (its request and descriptors), and None
    here once the test process has gone."""
    exit_paths: dict[int, str] = {}
    while True:
        ready, _, _ = select.select([sock], [], [], REAP_EVERY_S)
        _reap(exit_paths)
        if not ready:
            continue
        request, fds = _receive(sock)
        if request is None:
            return None
        pid = os.fork()
        if pid == 0:
            sock.close()
            return request, fds
        for fd in fds:
            os.close(fd)
        exit_paths[pid] = request["exit_path"]
        body = pickle.dumps(pid)
        sock.sendall(HEADER.pack(len(body)) + body)


def run_rank(request: dict, fds: list[int]) -> None:
    """In the rank: the test process's settings, then the rank's function; its result (or its
    traceback) written where the test process reads it."""
    for fd, target in zip(fds, (1, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["environ"])
    os.chdir(request["cwd"])
    sys.path[:] = request["sys_path"]
    rank, result_path = request["rank"], request["result_path"]
    try:
        fn, world_size, store_path, env = pickle.loads(request["call"])
        os.environ.update(env)
        store = torch.distributed.FileStore(store_path, world_size)
        outcome = (rank, "ok", fn(rank, world_size, store))
    except BaseException:  # noqa: BLE001 - every failure must reach the test
        outcome = (rank, "error", traceback.format_exc())
    try:
        written = pickle.dumps(outcome)
    except Exception:  # noqa: BLE001 - a result that cannot travel is the rank's failure
        written = pickle.dumps((rank, "error", f"its result cannot be pickled:\n{traceback.format_exc()}"))
    with open(result_path + ".part", "wb") as out:
        out.write(written)
    os.replace(result_path + ".part", result_path)
    sys.stdout.flush()
    sys.stderr.flush()


if __name__ == "__main__":
    served = serve(socket.socket(fileno=int(sys.argv[1])))
    if served is not None:
        run_rank(*served)
    # Both the server and a rank end here, through the interpreter's own finalization.
