"""A rank seen running at a job's deadline is SIGKILLed only if its pid still names that process:
the kill comes a grace period later, and a pid freed meanwhile may belong to another process."""

import os
import subprocess
import sys

from nccl_migrate.launch import RunningProcess, _stat, _still_the_same


def test_a_live_process_seen_at_the_deadline_is_the_same():
    mine = _stat(os.getpid())
    assert _still_the_same(RunningProcess(os.getpid(), 0, False, mine[2]))


def test_a_process_that_got_the_pid_later_is_not_the_one_seen():
    started = _stat(os.getpid())[2]
    assert not _still_the_same(RunningProcess(os.getpid(), 0, False, started - 1))


def test_a_process_that_ended_is_not_killed():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    seen = RunningProcess(child.pid, 0, False, _stat(child.pid)[2])
    child.wait()
    assert not _still_the_same(seen)


def _age_seconds(start_ticks):
    """How long ago a process started, from its start time and the machine's uptime (/proc/uptime,
    read independently of _stat)."""
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")


def test_the_start_time_is_the_processs_own():
    """_stat's third value is when the process started: a child started now is seconds old, and no
    younger than nothing; this process started before it."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = _stat(child.pid)[2]
        assert 0 <= _age_seconds(started) < 10
        assert started >= _stat(os.getpid())[2] > 0
    finally:
        child.kill()
        child.wait()


def _ended_at_the_deadline(monkeypatch, rank_start_ticks, patience):
    """Runs _end on a launcher that outlives its grace (its wait times out once) and a rank in a
    session of its own, seen at the deadline with `rank_start_ticks`; whether the rank ended within
    `patience` seconds after _end returned (its SIGKILL, if any, was sent before that)."""
    from nccl_migrate import launch

    launcher = subprocess.Popen(["sleep", "60"], start_new_session=True)
    rank = subprocess.Popen(["sleep", "60"], start_new_session=True)
    real_wait = launcher.wait
    waits = []

    def wait(timeout=None):
        waits.append(timeout)
        if len(waits) == 1:
            raise subprocess.TimeoutExpired(launcher.args, timeout)
        return real_wait()

    monkeypatch.setattr(launcher, "wait", wait)
    try:
        seen = RunningProcess(rank.pid, 0, False, _stat(rank.pid)[2] if rank_start_ticks is None else rank_start_ticks)
        launch._end(launcher, [seen])
        try:
            rank.wait(timeout=patience)
            return True
        except subprocess.TimeoutExpired:
            return False
    finally:
        for process in (launcher, rank):
            if process.poll() is None:
                process.kill()
        real_wait()
        rank.wait()


def test_a_rank_still_the_one_seen_is_killed_past_the_grace(monkeypatch):
    assert _ended_at_the_deadline(monkeypatch, None, patience=5)


def test_a_pid_that_names_another_process_by_then_is_left_alone(monkeypatch):
    # The same pid, but its start time is not the one seen at the deadline: another process now.
    # A SIGKILL sent before _end returned ends a sleeping process within microseconds: a second
    # after, it would long be gone.
    assert not _ended_at_the_deadline(monkeypatch, 1, patience=1)
