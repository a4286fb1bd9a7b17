"""How a rank's files reach disk intact: one process per rank file (an exclusive create claims it;
a second process for the same rank leaves a marker naming itself instead of writing), whole files
through a private temporary file and a rename, and JSON lines one ``write`` each, so a reader
never sees two writers' bytes interleaved or half a file."""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading

SECOND_WRITER = ".second-writer."  # <path>.second-writer.<host>.<pid>: a process found <path> taken
RESTART_VARIABLE = "TORCHELASTIC_RESTART_COUNT"  # torch's launcher numbers each restart of the workers
ATTEMPT = "attempt"  # <directory>/attempt<N>/: what the N-th restart recorded


def attempt_directory(directory: str) -> str:
    """Where this process records: ``directory`` on the first attempt, ``directory/attemptN`` when
    torch's launcher restarted the workers N times (--max-restarts), so a restarted rank claims its
    files afresh and the attempt that finished is read whole, never mixed with one that was killed."""
    restarts = os.environ.get(RESTART_VARIABLE, "0")
    return os.path.join(directory, f"{ATTEMPT}{int(restarts)}") if restarts.isdigit() and int(restarts) else directory


def last_attempt(directory: str) -> tuple[str, int]:
    """The directory of the last attempt recorded in ``directory`` and its number (0: no restart)."""
    numbers = [int(name[len(ATTEMPT):]) for name in os.listdir(directory)
               if name.startswith(ATTEMPT) and name[len(ATTEMPT):].isdigit()
               and os.path.isdir(os.path.join(directory, name))]
    if not numbers:
        return directory, 0
    return os.path.join(directory, f"{ATTEMPT}{max(numbers)}"), max(numbers)


def _private(path: str) -> str:
    # Unique per writer: host and pid tell processes apart only where pids are not shared (two
    # containers on one shared filesystem may share host name and pid), the thread tells a
    # process's threads apart, and the random token covers the rest.
    return f"{path}.{socket.gethostname()}.{os.getpid()}.{threading.get_ident():x}.{secrets.token_hex(8)}.tmp"


def claim(path: str) -> int | None:
    """An append-only descriptor for ``path``, created now by this process; None when another
    process created it first."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
    except FileExistsError:
        return None


def write_line(fd: int, text: str) -> None:
    """One JSON line in one ``write`` (retried only for what a short write left)."""
    data = (text + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def save_whole(path: str, save) -> None:
    """Writes ``path`` atomically with ``save(private_path)`` (torch.save of kept tensors): a reader
    sees the whole file or none, never one cut short by a rank killed while writing."""
    private = _private(path)
    try:
        save(private)
        os.replace(private, path)
    finally:
        if os.path.exists(private):
            os.unlink(private)


def write_whole(path: str, text: str, exclusive: bool = False) -> bool:
    """Writes ``path`` atomically (a reader sees the old file or the new one, never a part).
    With ``exclusive``, only if no other process wrote it first; returns False then."""
    private = _private(path)
    with open(private, "w") as f:
        f.write(text)
    try:
        if not exclusive:
            os.replace(private, path)
            return True
        try:
            os.link(private, path)  # atomic and fails if path exists, unlike rename
        except FileExistsError:
            return False
        except OSError:  # a filesystem without hard links (FUSE, object stores, SMB)
            return _create_exclusively(path, text)
        return True
    finally:
        if os.path.exists(private):
            os.unlink(private)


def _create_exclusively(path: str, text: str) -> bool:
    """``path`` created by this process with ``text``, or False when it exists: an exclusive create
    then one write and fsync (a reader may see it short while it is written, never interleaved)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    try:
        data = text.encode()
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def mark_second_writer(path: str, rank: int) -> str:
    """Leaves a marker beside ``path`` saying this process found it taken; returns the marker."""
    marker = f"{path}{SECOND_WRITER}{socket.gethostname()}.{os.getpid()}"
    write_whole(marker, json.dumps({"rank": rank, "host": socket.gethostname(), "pid": os.getpid(),
                                    "path": os.path.basename(path)}))
    return marker


def second_writer_message(rank: int, path: str) -> str:
    """The one text that says what a second writer means and what to do."""
    return (f"two processes recorded rank {rank} ({os.path.basename(path)}): does the job start its own ranks "
            "(mp.spawn, or a launcher inside the script)? use --nproc 1; or the directory held an earlier run's "
            "records: use an empty one")
