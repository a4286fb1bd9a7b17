"""What a recording rank does when its launcher ends it with SIGTERM (torch's agent does, to every
rank, once one fails or the job outlives its timeout): it writes the records still queued for its
writer and its meta, which names the signal and the ops it was inside, then dies by that signal,
so its exit status is the one it would have had. Python runs no exit handler on SIGTERM, so
without this a rank ended that way loses its last records (up to one write interval) and its meta.

A Python signal handler alone would not do: it runs in the main thread between bytecodes, and a
rank ended because its peer died or hung is blocked in a collective, inside C++, where it never
gets there. Python's C-level handler writes the signal's number to a wakeup fd at once, though,
and a thread of ours waits on it. Whichever of the two gets there first does the work.

Installed only where it changes nothing else: in the main thread, while SIGTERM still has its
default action and no one else uses the wakeup fd. A job that installs its own SIGTERM handler
later keeps its own handling (ours then stands aside, and its exit handlers close the records)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading

ENDING_SIGNALS = (signal.SIGTERM,)  # what torch's agent sends its workers to end them
_WAIT_FOR_EXIT_HANDLERS = 10.0  # seconds the watcher lets a rank already exiting finish first

_installed: dict | None = None  # {"pid", "read", "write", "ending", "recorder"} once installed here
_ending_lock = threading.RLock()  # re-entrant: a second SIGTERM may arrive while the first holds it


def install(recorder) -> bool:
    """Handles SIGTERM in this process for ``recorder`` (its ``end_by_signal`` and ``exiting``);
    False where that would change what the process does otherwise."""
    global _installed
    if _installed is not None and _installed["pid"] == os.getpid():
        _installed["recorder"] = recorder
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    if any(signal.getsignal(signum) is not signal.SIG_DFL for signum in ENDING_SIGNALS):
        return False
    read, write = os.pipe()
    os.set_blocking(write, False)  # Python's C handler must never block on it
    try:
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except (ValueError, OSError):
        previous = None
    if previous != -1:  # someone else's (asyncio's, say): leave theirs, and SIGTERM's default action
        if previous is not None:
            signal.set_wakeup_fd(previous)
        os.close(read), os.close(write)
        return False
    _installed = {"pid": os.getpid(), "read": read, "write": write, "ending": None, "recorder": recorder}
    for signum in ENDING_SIGNALS:
        signal.signal(signum, _in_main_thread)
    threading.Thread(target=_watch, args=(read,), name="ab-termination", daemon=True).start()
    os.register_at_fork(after_in_child=_undo_in_forked_child)
    return True


def _ours() -> bool:
    return all(signal.getsignal(signum) is _in_main_thread for signum in ENDING_SIGNALS)


def _in_main_thread(signum, frame) -> None:
    _end(signum, in_main_thread=True)


def _watch(read: int) -> None:
    while True:
        try:
            numbers = os.read(read, 64)
        except OSError:
            return
        if not numbers:
            return
        for signum in ENDING_SIGNALS:
            if signum in numbers:  # one byte per signal caught; others (SIGINT) are the main thread's
                _end(signum, in_main_thread=False)


def _end(signum: int, in_main_thread: bool) -> None:
    state = _installed
    if state is None or state["pid"] != os.getpid() or not _ours():
        return  # a forked child's copy, or the job handles SIGTERM itself now
    recorder = state["recorder"]
    if in_main_thread and recorder.exiting():
        # Its exit handlers, on this very thread, are writing the records: let them finish (the
        # watcher waits for them, then ends the process).
        return
    me = threading.get_ident()
    with _ending_lock:
        ending, state["ending"] = state["ending"], state["ending"] or me
    if ending == me:
        return  # a second SIGTERM while this thread handles the first
    if ending is not None:  # the other thread is at it, and ends the process
        threading.Event().wait(_WAIT_FOR_EXIT_HANDLERS)
        return
    if recorder.exiting():
        recorder.wait_closed(_WAIT_FOR_EXIT_HANDLERS)
    else:
        recorder.end_by_signal(signum)
    _die_by(signum, in_main_thread)


# How long _die_by waits for its own signal before it exits with the status the signal would have
# given: a signal is delivered at once unless every thread blocks it.
SIGNAL_DELIVERY_WAIT = 1.0


def _die_by(signum: int, in_main_thread: bool) -> None:
    """Ends this process by ``signum``, as its default action would have, so its launcher sees
    the exit status it sent for."""
    if in_main_thread:
        signal.signal(signum, signal.SIG_DFL)
    else:  # signal.signal is the main thread's only; the C library's is anyone's
        libc = ctypes.CDLL(None, use_errno=True)
        libc.signal.restype, libc.signal.argtypes = ctypes.c_void_p, (ctypes.c_int, ctypes.c_void_p)
        libc.signal(signum, None)  # None: SIG_DFL
    os.kill(os.getpid(), signum)
    threading.Event().wait(SIGNAL_DELIVERY_WAIT)
    os._exit(128 + signum)


def _undo_in_forked_child() -> None:
    """A child forked without exec shares the pipe with its parent: its SIGTERM would wake the
    parent's watcher. It gets the default action back, and installs afresh if it records."""
    global _installed
    state, _installed = _installed, None
    if state is None:
        return
    with contextlib.suppress(ValueError, OSError):
        signal.set_wakeup_fd(-1)
        for signum in ENDING_SIGNALS:
            if signal.getsignal(signum) is _in_main_thread:
                signal.signal(signum, signal.SIG_DFL)
    for fd in (state["read"], state["write"]):
        with contextlib.suppress(OSError):
            os.close(fd)
