"""run_ranks (ranks.py) as the suite's multi-process tests rely on it: ranks are real processes
that meet through the FileStore, get the test's environment, working directory and output, and
end through the interpreter's own exit, so a rank that fails, aborts or hangs in its teardown,
or never returns, fails the test, naming the rank."""

import atexit
import os
import sys
import time

import pytest
import ranks
from ranks import run_ranks


def _meet(rank, world, store):
    store.set(f"rank{rank}", str(os.getpid()))
    store.wait([f"rank{r}" for r in range(world)])
    return {"pids": sorted(int(store.get(f"rank{r}")) for r in range(world)), "pid": os.getpid(),
            "env": (os.environ.get("RANKS_TEST_SET"), os.environ.get("RANKS_TEST_GIVEN")), "cwd": os.getcwd()}


def test_ranks_are_processes_of_their_own_that_meet_with_the_tests_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("RANKS_TEST_SET", "by the test")
    monkeypatch.chdir(tmp_path)
    results = run_ranks(_meet, world_size=3, env={"RANKS_TEST_GIVEN": "by run_ranks"})
    pids = {r["pid"] for r in results}
    assert len(pids) == 3 and os.getpid() not in pids
    assert all(r["pids"] == sorted(pids) for r in results)
    assert all(r["env"] == ("by the test", "by run_ranks") and r["cwd"] == str(tmp_path) for r in results)


def _speak(rank, world, store):
    print(f"rank {rank} on stdout", flush=True)
    print(f"rank {rank} on stderr", file=sys.stderr, flush=True)
    return rank


def test_a_ranks_output_reaches_the_test_that_started_it(capfd):
    assert run_ranks(_speak) == [0, 1]
    out, err = capfd.readouterr()
    assert sorted(out.split("\n")[:-1]) == ["rank 0 on stdout", "rank 1 on stdout"]
    assert "rank 1 on stderr" in err


def _raise_on_rank_1(rank, world, store):
    if rank == 1:
        raise ValueError("rank 1 went wrong")
    return rank


def test_a_rank_that_raises_fails_the_test_with_its_traceback():
    with pytest.raises(AssertionError, match=r"(?s)rank 1 raised:\n.*ValueError: rank 1 went wrong"):
        run_ranks(_raise_on_rank_1)


def _abort_at_exit(rank, world, store):
    if rank == 0:
        atexit.register(os.abort)  # runs only where the interpreter finalizes, as a spawned rank's does
    return rank


def test_a_rank_that_aborts_in_its_teardown_fails_the_test():
    with pytest.raises(AssertionError, match=r"rank 0 returned but exited with code -6"):
        run_ranks(_abort_at_exit)


class _Mark:
    def __init__(self, path):
        self.path = path

    def __del__(self, open_file=open):
        with open_file(self.path, "w") as out:
            out.write("finalized")


def _leave_a_mark_in_main(rank, world, store):
    import __main__

    __main__._ranks_test_mark = _Mark(os.environ["RANKS_TEST_MARK"] + str(rank))  # collected as Python finalizes
    return rank


def test_a_ranks_interpreter_finalizes_at_its_exit(tmp_path):
    mark = str(tmp_path / "mark_")
    assert run_ranks(_leave_a_mark_in_main, env={"RANKS_TEST_MARK": mark}) == [0, 1]
    for rank in (0, 1):
        with open(mark + str(rank)) as left:
            assert left.read() == "finalized"


def _hang_at_exit(rank, world, store):
    if rank == 1:
        atexit.register(time.sleep, 60)
    return rank


def test_a_rank_that_hangs_in_its_teardown_is_killed_and_fails_the_test(monkeypatch):
    monkeypatch.setattr(ranks, "EXIT_GRACE", 1.0)
    began = time.monotonic()
    with pytest.raises(AssertionError, match=r"rank 1 returned but did not exit within 1 s \(killed\)"):
        run_ranks(_hang_at_exit)
    assert time.monotonic() - began < 30


def _never_return_on_rank_0(rank, world, store):
    if rank == 0:
        time.sleep(60)
    return rank


def test_a_rank_that_never_returns_is_killed_at_the_timeout(monkeypatch):
    monkeypatch.setattr(ranks, "EXIT_GRACE", 1.0)  # what it is given to exit after the timeout
    began = time.monotonic()
    with pytest.raises(AssertionError, match=r"ranks \[0\] did not finish within 5 s"):
        run_ranks(_never_return_on_rank_0, timeout=5)
    assert time.monotonic() - began < 30


def _die_on_rank_1(rank, world, store):
    if rank == 1:
        os._exit(3)
    return rank


def test_a_rank_left_out_of_reporting_may_die_and_the_others_are_returned():
    assert run_ranks(_die_on_rank_1, world_size=3, reporting=[0, 2]) == [0, 2]


def test_a_zygote_that_ended_is_replaced_by_the_next_run():
    assert run_ranks(_speak) == [0, 1]
    ended = ranks._zygote
    ended.proc.kill()
    ended.proc.wait()
    assert run_ranks(_speak) == [0, 1]
    assert ranks._zygote is not ended and ranks._zygote.proc.poll() is None
