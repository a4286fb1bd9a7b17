"""A recording rank's SIGTERM handling (termination.py) in this process, the process's own end
stood in for: installed only where it changes nothing else, the first of the main thread and the
watcher to see the signal does the work once, a rank already exiting is let finish, and the
process then dies by the signal it got. Real ranks ended by their launcher are in
test_ab_faults.py."""

import os
import signal
import threading

import pytest
from nccl_migrate.ab import termination


class _Recorder:
    def __init__(self, exiting=False):
        self._exiting, self.calls = exiting, []

    def exiting(self):
        return self._exiting

    def end_by_signal(self, signum):
        self.calls.append(("end_by_signal", signum))

    def wait_closed(self, timeout):
        self.calls.append(("wait_closed", timeout))


@pytest.fixture
def clean(monkeypatch):
    """A process as a rank starts (SIGTERM's default action, no wakeup fd, nothing installed), and
    this one's handler, wakeup fd and the module's state as they were, after the test."""
    handler = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as a rank starts: its default action
    wakeup = signal.set_wakeup_fd(-1)
    monkeypatch.setattr(termination, "_installed", None)
    yield
    state = termination._installed
    if state is not None and state["pid"] == os.getpid():
        termination._undo_in_forked_child()  # closes our pipe: the watcher thread ends
    signal.set_wakeup_fd(wakeup)
    signal.signal(signal.SIGTERM, handler)


@pytest.fixture
def deaths(monkeypatch):
    """_die_by stood in for: (signal, in the main thread) of each time the process would die."""
    died = []
    monkeypatch.setattr(termination, "_die_by", lambda signum, in_main: died.append((signum, in_main)))
    return died


def _state(recorder, **more) -> dict:
    signal.signal(signal.SIGTERM, termination._in_main_thread)
    termination._installed = dict({"pid": os.getpid(), "read": -1, "write": -1, "ending": None,
                                   "recorder": recorder}, **more)
    return termination._installed


# --- installing --------------------------------------------------------------------------------------

def test_installed_in_the_main_thread_while_sigterm_has_its_default_action(clean):
    recorder = _Recorder()
    threads = {t.ident for t in threading.enumerate()}
    assert termination.install(recorder) is True
    state = termination._installed
    assert state["pid"] == os.getpid() and state["recorder"] is recorder and state["ending"] is None
    assert signal.getsignal(signal.SIGTERM) is termination._in_main_thread
    assert signal.set_wakeup_fd(state["write"]) == state["write"]  # ours, left as it was
    assert not os.get_blocking(state["write"])
    [watcher] = [t for t in threading.enumerate() if t.ident not in threads]
    assert watcher.name == "ab-termination" and watcher.daemon
    # Installed again (another recorder of this process): the same pipe, the new recorder.
    other = _Recorder()
    assert termination.install(other) is True
    assert termination._installed is state and state["recorder"] is other
    # The watcher ends when the pipe closes.
    termination._undo_in_forked_child()
    watcher.join(5)
    assert not watcher.is_alive()
    assert termination._installed is None and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.set_wakeup_fd(-1) == -1


def test_not_installed_where_it_would_change_what_the_process_does(clean):
    found = []
    thread = threading.Thread(target=lambda: found.append(termination.install(_Recorder())))
    thread.start(), thread.join()
    assert found == [False] and termination._installed is None
    # The job handles SIGTERM itself.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    assert termination.install(_Recorder()) is False
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN and signal.set_wakeup_fd(-1) == -1
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # Someone else's wakeup fd (asyncio's): theirs stays, and SIGTERM's default action.
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        signal.set_wakeup_fd(write)
        assert termination.install(_Recorder()) is False
        assert signal.set_wakeup_fd(-1) == write and termination._installed is None
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        os.close(read), os.close(write)


def test_a_state_left_by_the_parent_before_a_fork_is_installed_afresh(clean):
    termination._installed = {"pid": os.getpid() + 100000, "read": -1, "write": -1, "ending": None,
                              "recorder": None}
    recorder = _Recorder()
    assert termination.install(recorder) is True
    assert termination._installed["pid"] == os.getpid() and termination._installed["read"] >= 0


# --- handling the signal -------------------------------------------------------------------------------

def test_the_first_to_see_sigterm_writes_the_records_then_the_process_dies_by_it(clean, deaths):
    recorder = _Recorder()
    _state(recorder)
    termination._in_main_thread(signal.SIGTERM, None)
    assert recorder.calls == [("end_by_signal", signal.SIGTERM)]
    assert deaths == [(signal.SIGTERM, True)]
    assert termination._installed["ending"] == threading.get_ident()
    # A second SIGTERM on the same thread while it ends the process: nothing more.
    termination._end(signal.SIGTERM, in_main_thread=False)
    assert recorder.calls == [("end_by_signal", signal.SIGTERM)] and len(deaths) == 1


def test_the_watcher_thread_ends_the_process_as_the_main_thread_would(clean, deaths):
    recorder = _Recorder()
    _state(recorder)
    thread = threading.Thread(target=termination._end, args=(signal.SIGTERM, False))
    thread.start(), thread.join()
    assert recorder.calls == [("end_by_signal", signal.SIGTERM)] and deaths == [(signal.SIGTERM, False)]


def test_while_another_thread_ends_the_process_the_latecomer_waits_and_does_nothing(clean, deaths, monkeypatch):
    monkeypatch.setattr(termination, "_WAIT_FOR_EXIT_HANDLERS", 0.05)
    recorder = _Recorder()
    _state(recorder, ending=-1)  # another thread's ident
    termination._end(signal.SIGTERM, in_main_thread=False)
    assert recorder.calls == [] and deaths == []
    assert termination._installed["ending"] == -1


def test_a_rank_already_exiting_is_let_finish_its_records(clean, deaths):
    recorder = _Recorder(exiting=True)
    _state(recorder)
    # On the main thread its exit handlers are writing the records: the signal handler returns.
    termination._in_main_thread(signal.SIGTERM, None)
    assert recorder.calls == [] and deaths == [] and termination._installed["ending"] is None
    # The watcher waits for them, then ends the process.
    termination._end(signal.SIGTERM, in_main_thread=False)
    assert recorder.calls == [("wait_closed", termination._WAIT_FOR_EXIT_HANDLERS)]
    assert deaths == [(signal.SIGTERM, False)] and termination._WAIT_FOR_EXIT_HANDLERS == 10.0


def test_nothing_is_done_in_a_forked_copy_or_once_the_job_handles_sigterm_itself(clean, deaths):
    recorder = _Recorder()
    termination._end(signal.SIGTERM, in_main_thread=True)  # nothing installed
    _state(recorder, pid=os.getpid() + 100000)
    termination._end(signal.SIGTERM, in_main_thread=True)
    _state(recorder)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the job's own handling, installed later
    termination._end(signal.SIGTERM, in_main_thread=False)
    assert recorder.calls == [] and deaths == []


def test_the_watcher_ends_for_sigterm_only_and_stops_when_the_pipe_closes(clean, monkeypatch):
    ended = []
    monkeypatch.setattr(termination, "_end", lambda signum, in_main_thread: ended.append((signum, in_main_thread)))
    read, write = os.pipe()
    os.write(write, bytes([signal.SIGINT, signal.SIGTERM, signal.SIGINT]))
    os.close(write)
    termination._watch(read)
    assert ended == [(signal.SIGTERM, False)]
    os.close(read)
    termination._watch(read)  # a closed pipe: the watcher returns
    assert ended == [(signal.SIGTERM, False)]


def test_dying_by_the_signal_restores_its_default_action_then_sends_it(clean, monkeypatch):
    sent, exits = [], []

    class Exited(Exception):
        pass

    def _exit(code):
        exits.append(code)
        raise Exited

    monkeypatch.setattr(termination.os, "kill", lambda pid, signum: sent.append((pid, signum,
                                                                                 signal.getsignal(signum))))
    monkeypatch.setattr(termination.os, "_exit", _exit)
    monkeypatch.setattr(termination, "SIGNAL_DELIVERY_WAIT", 0.01)  # os.kill is stood in for: nothing arrives
    signal.signal(signal.SIGTERM, termination._in_main_thread)
    with pytest.raises(Exited):
        termination._die_by(signal.SIGTERM, in_main_thread=True)
    assert sent == [(os.getpid(), signal.SIGTERM, signal.SIG_DFL)]
    assert exits == [128 + signal.SIGTERM]


def test_undoing_in_a_forked_child_with_nothing_installed_changes_nothing(clean):
    termination._undo_in_forked_child()
    assert termination._installed is None and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    # A child whose job installed its own handler keeps it.
    read, write = os.pipe()
    termination._installed = {"pid": os.getpid(), "read": read, "write": write, "ending": None, "recorder": None}
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    termination._undo_in_forked_child()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN and termination._installed is None
    for fd in (read, write):
        with pytest.raises(OSError):
            os.fstat(fd)


class _NoThread:
    """threading.Thread stood in for: the watcher is noted, never started, so the pipe is the test's."""

    made = []

    def __init__(self, target, args, name, daemon):
        _NoThread.made.append((target, args, name, daemon))

    def start(self):
        pass


def test_a_full_pipe_drops_the_wakeup_byte_without_a_warning(clean, monkeypatch, capfd):
    monkeypatch.setattr(termination.threading, "Thread", _NoThread)
    assert termination.install(_Recorder()) is True
    state = termination._installed
    assert _NoThread.made[-1] == (termination._watch, (state["read"],), "ab-termination", True)
    try:
        while True:
            os.write(state["write"], b"\0" * 4096)
    except BlockingIOError:
        pass
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: None)
    try:
        signal.raise_signal(signal.SIGUSR1)  # Python's C handler writes its byte to the full pipe
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert "wakeup" not in capfd.readouterr().err


def test_a_wakeup_fd_that_cannot_be_set_leaves_everything_as_it_was(clean, monkeypatch):
    opened = []
    real_pipe = os.pipe

    def pipe():
        opened.extend(real_pipe())
        return tuple(opened[-2:])

    def refuse(fd, **kwargs):
        raise ValueError("the fd is not valid")

    monkeypatch.setattr(termination.os, "pipe", pipe)
    monkeypatch.setattr(termination.signal, "set_wakeup_fd", refuse)
    assert termination.install(_Recorder()) is False
    monkeypatch.undo()
    assert termination._installed is None and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    for fd in opened:
        with pytest.raises(OSError):
            os.fstat(fd)


def _disposition(signum):
    """The C library's handler of ``signum`` now (None: SIG_DFL), read by setting it to SIG_DFL."""
    import ctypes

    libc = ctypes.CDLL(None)
    libc.signal.restype, libc.signal.argtypes = ctypes.c_void_p, (ctypes.c_int, ctypes.c_void_p)
    return libc.signal(signum, None)


def test_a_watcher_thread_restores_the_default_action_through_the_c_library(clean, monkeypatch):
    sent, exits = [], []

    class Exited(Exception):
        pass

    def _exit(code):
        exits.append(code)
        raise Exited

    monkeypatch.setattr(termination.os, "kill", lambda pid, signum: sent.append((pid, signum, _disposition(signum))))
    monkeypatch.setattr(termination.os, "_exit", _exit)
    monkeypatch.setattr(termination, "SIGNAL_DELIVERY_WAIT", 0.01)  # os.kill is stood in for: nothing arrives
    signal.signal(signal.SIGTERM, termination._in_main_thread)  # Python's C handler in place
    assert _disposition(signal.SIGTERM) is not None
    signal.signal(signal.SIGTERM, termination._in_main_thread)

    def die():
        with pytest.raises(Exited):
            termination._die_by(signal.SIGTERM, in_main_thread=False)

    thread = threading.Thread(target=die)
    thread.start(), thread.join()
    assert sent == [(os.getpid(), signal.SIGTERM, None)] and exits == [128 + signal.SIGTERM]


def test_undoing_from_a_thread_other_than_the_main_one_still_closes_the_pipe(clean):
    read, write = os.pipe()
    termination._installed = {"pid": os.getpid(), "read": read, "write": write, "ending": None, "recorder": None}
    failed = []

    def undo():
        try:
            termination._undo_in_forked_child()  # signal's functions refuse to run here (ValueError)
        except Exception as error:  # noqa: BLE001 - the test reports what escaped
            failed.append(error)

    thread = threading.Thread(target=undo)
    thread.start(), thread.join()
    assert failed == [] and termination._installed is None
    for fd in (read, write):
        with pytest.raises(OSError):
            os.fstat(fd)
