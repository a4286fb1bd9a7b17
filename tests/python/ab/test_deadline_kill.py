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
