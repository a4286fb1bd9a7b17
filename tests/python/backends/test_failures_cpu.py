"""A peer that dies or stops answering: every survivor's pending op fails within the group's
timeout plus a small margin, with the op's identity in the error and the flight recorder dumped;
no process hangs."""

import os
import pickle
import time

import pytest

from ranks import run_ranks
from torch_support import fr_name

TIMEOUT_S = 3
MARGIN_S = 2.0


def _peer_trouble(mode):
    def run(rank, world, store):
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        import nccl_migrate  # noqa: F401

        dist.init_process_group("migrate-nccl2", store=store, rank=rank, world_size=world,
                                timeout=timedelta(seconds=TIMEOUT_S))
        t = torch.ones(1 << 22)  # large enough that the next all_reduce is still moving data
        dist.all_reduce(t)  # everyone is connected and healthy
        if rank == world - 1:
            if mode == "killed":
                dist.all_reduce(t, async_op=True)  # joins the same collective, then dies mid-way
                time.sleep(0.01)
                os._exit(0)
            time.sleep(60)  # alive, but never joins again
            os._exit(0)
        started = time.monotonic()
        try:
            dist.all_reduce(t)
            outcome = ("no error", "")
        except Exception as error:  # noqa: BLE001
            outcome = (type(error).__name__, str(error).split("\n")[0])
        elapsed = time.monotonic() - started
        return outcome, elapsed

    return run


def _killed(r, w, s): return _peer_trouble("killed")(r, w, s)
def _silent(r, w, s): return _peer_trouble("silent")(r, w, s)


@pytest.mark.parametrize("runner", [_killed, _silent], ids=["killed", "silent"])
def test_survivors_fail_within_timeout_with_the_flight_recorder_dumped(runner, tmp_path):
    prefix = str(tmp_path / "fr_rank_")
    survivors = run_ranks(runner, 3, timeout=60, env={"TORCH_FR_DUMP_TEMP_FILE": prefix}, reporting=[0, 1])
    for rank, ((kind, message), elapsed) in enumerate(survivors):
        assert kind == "DistBackendError", message
        assert "all_reduce" in message and f"rank {rank}" in message and "sequence number 2" in message, message
        assert elapsed < TIMEOUT_S + MARGIN_S, f"rank {rank} took {elapsed:.1f} s"
        dump = pickle.load(open(prefix + str(rank), "rb"))
        names = [e["profiling_name"] for e in dump["entries"]]
        assert names.count(fr_name("nccl2", "all_reduce")) == 2, names
        # the op that failed is the last entry, and it did not complete
        assert dump["entries"][-1]["state"] == "started", dump["entries"][-1]


def _late_peer(rank, world, store):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    import nccl_migrate  # noqa: F401

    dist.init_process_group("migrate-nccl2", store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=TIMEOUT_S))
    t = torch.full((1 << 16,), float(rank + 1))
    dist.all_reduce(t)
    out = {}
    for op in ("send/recv", "all_reduce", "reduce_scatter"):
        if rank == 1:
            time.sleep(0.5)  # late, well within the timeout: the other rank's wait must simply last
        started = time.monotonic()
        if op == "send/recv":
            buf = torch.full((1 << 16,), float(rank))
            dist.send(buf, 1) if rank == 0 else dist.recv(buf, 0)
            out[op] = (buf[0].item(), time.monotonic() - started)
        elif op == "all_reduce":
            x = torch.ones(1 << 16)
            dist.all_reduce(x)
            out[op] = (x[0].item(), time.monotonic() - started)
        else:
            x = torch.empty(1 << 15)
            dist.reduce_scatter_tensor(x, torch.ones(1 << 16))
            out[op] = (x[0].item(), time.monotonic() - started)
    return out


def test_a_late_peer_is_not_a_dead_one():
    rank0, rank1 = run_ranks(_late_peer, 2, timeout=60)
    assert rank1["send/recv"][0] == 0.0  # what rank 0 sent
    for op in ("all_reduce", "reduce_scatter"):
        assert rank0[op][0] == rank1[op][0] == 2.0, (rank0, rank1)
    # rank 0 really waited for its late peer, and its ops still succeeded
    assert all(seconds > 0.3 for _, seconds in rank0.values()), rank0
