"""A rank that exits while the toolkit still holds its ops exits cleanly (code 0), however long
its interpreter's teardown takes.

Once Python starts finalizing, a thread that takes the GIL is ended by the interpreter
(pthread_exit); inside a C++ destructor that ends the process (std::terminate, SIGABRT). Any
thread that drops the last reference to a tensor Python has seen takes the GIL. Each case
leaves such references with the toolkit's or Gloo's threads at exit, and keeps the interpreter
in its teardown (GIL released) for longer than the group's timeout, so that whatever those
threads do when the op fails or times out happens while the interpreter is finalizing."""

import contextlib
import os
import time

import pytest
from ranks import run_ranks

TIMEOUT_S = 2
TEARDOWN_S = TIMEOUT_S + 2.0  # past the op's timeout, and past the abort it leads to


class _SlowTeardown:
    """Collected while the interpreter finalizes (it sits in __main__'s globals); sleeps with
    the GIL released, as a teardown that frees devices or flushes files does, then leaves a
    mark, so the test knows the teardown really lasted. What it uses is bound now: the modules'
    globals may be gone by then."""

    def __init__(self, mark):
        self.mark = mark

    def __del__(self, sleep=time.sleep, seconds=TEARDOWN_S, open_file=open):
        sleep(seconds)
        with open_file(self.mark, "w") as out:
            out.write("slept")


def _leave_with_slow_teardown(rank):
    import __main__

    __main__._nccl_migrate_slow_teardown = _SlowTeardown(os.environ["EXIT_TEST_MARK"] + str(rank))


def _exiting_with(case):
    def run(rank, world, store):
        from datetime import timedelta

        import nccl_migrate  # noqa: F401
        import torch
        import torch.distributed as dist

        dist.init_process_group("migrate-nccl2", store=store, rank=rank, world_size=world,
                                timeout=timedelta(seconds=TIMEOUT_S))
        t = torch.ones(1 << 20)
        dist.all_reduce(t)  # connected and healthy
        peer = world - 1
        if rank == peer:
            if case == "peer killed":
                dist.all_reduce(t, async_op=True)  # joins the collective, then dies mid-way
                time.sleep(0.01)
                os._exit(0)
            time.sleep(60)  # alive, but never answers again
            os._exit(0)
        if case == "peer killed":
            with contextlib.suppress(Exception):  # the failure is expected; the exit is what is tested
                dist.all_reduce(t)
        elif case == "pending all_reduce":
            dist.all_reduce(t, async_op=True)
        elif case == "pending irecv future":  # Gloo gives no future for it: a thread of ours waits
            fut = dist.irecv(t, peer).get_future()
            fut.then(lambda f: None)
        elif case == "pending all_reduce future":
            fut = dist.all_reduce(t, async_op=True).get_future()
            fut.then(lambda f: None)
        _leave_with_slow_teardown(rank)
        del t
        return "leaving"

    return run


def _peer_killed(r, w, s): return _exiting_with("peer killed")(r, w, s)
def _pending_all_reduce(r, w, s): return _exiting_with("pending all_reduce")(r, w, s)
def _pending_irecv_future(r, w, s): return _exiting_with("pending irecv future")(r, w, s)
def _pending_all_reduce_future(r, w, s): return _exiting_with("pending all_reduce future")(r, w, s)


@pytest.mark.parametrize("runner", [_peer_killed, _pending_all_reduce, _pending_irecv_future,
                                    _pending_all_reduce_future],
                         ids=["peer-killed", "pending-all_reduce", "pending-irecv-future", "pending-all_reduce-future"])
def test_a_rank_exits_cleanly_while_its_ops_are_still_held(runner, tmp_path):
    mark = str(tmp_path / "teardown_")
    # run_ranks fails the test when a rank exits non-zero (SIGABRT: -6) or has not exited 10 s
    # after returning.
    assert run_ranks(runner, 3, timeout=60, env={"EXIT_TEST_MARK": mark}, reporting=[0, 1]) == ["leaving", "leaving"]
    for rank in (0, 1):
        with open(mark + str(rank)) as slept:
            assert slept.read() == "slept", f"rank {rank}'s teardown did not last"
