"""A peer that dies or stops answering: every survivor's pending op fails within the group's
timeout plus a small margin, with the op's identity in the error and the flight recorder dumped;
no process hangs."""

import os
import pickle
import socket
import time

import pytest

from ranks import run_ranks
from torch_support import fr_name, requires_torch

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
    for op in ("send/recv", "irecv future", "all_reduce", "reduce_scatter"):
        if rank == 1:
            # Late, within the timeout but past the fifth of it that Gloo's contexts connect
            # under: the other rank's wait must simply last.
            time.sleep(1.5)
        started = time.monotonic()
        if op == "send/recv":
            buf = torch.full((1 << 16,), float(rank))
            dist.send(buf, 1) if rank == 0 else dist.recv(buf, 0)
            out[op] = (buf[0].item(), time.monotonic() - started)
        elif op == "irecv future":  # a future's wait, which torch's Gloo gives no timeout of its own
            buf = torch.full((1 << 16,), float(rank))
            dist.send(buf, 0) if rank == 1 else dist.irecv(buf, 1).get_future().wait()
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
    assert rank0["irecv future"][0] == 1.0  # what rank 1 sent
    for op in ("all_reduce", "reduce_scatter"):
        assert rank0[op][0] == rank1[op][0] == 2.0, (rank0, rank1)
    # rank 0 really waited for its late peer, and its ops still succeeded
    assert all(seconds > 1.3 for _, seconds in rank0.values()), rank0


def _first_p2p_with_a_dead_peer(world_kind):
    """Legacy behaviour: rank 2 dies right after init, before any op. Rank 0's first send to it
    creates their pair communicator, which waits for a peer that never comes; rank 1 waits for
    rank 0's word."""
    def run(rank, world, store):
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        from worlds import init

        init(world_kind, "migrate-legacy", rank, world, store, timeout=timedelta(seconds=TIMEOUT_S))
        hooked = []
        dist.group.WORLD.register_abort_hook(3, lambda: hooked.append("hook"))
        if rank == 2:
            os._exit(0)
        if rank == 1:
            store.wait(["sent"], timedelta(seconds=60))
            return None
        started = time.monotonic()
        try:
            dist.send(torch.ones(8), 2)
            outcome = ("no error", "")
        except Exception as error:  # noqa: BLE001
            outcome = (type(error).__name__, str(error).split("\n")[0])
        elapsed = time.monotonic() - started
        deadline = time.monotonic() + 5
        while not hooked and time.monotonic() < deadline:
            time.sleep(0.05)
        store.set("sent", "1")
        return outcome, elapsed, hooked

    return run


def _p2p_dead_peer_cpu(r, w, s): return _first_p2p_with_a_dead_peer("cpu-bound")(r, w, s)
def _p2p_dead_peer_sim(r, w, s): return _first_p2p_with_a_dead_peer("sim-bound")(r, w, s)


@pytest.mark.parametrize("runner,world", [(_p2p_dead_peer_cpu, "cpu-bound"), (_p2p_dead_peer_sim, "sim-bound")],
                         ids=["gloo", "sim"])
def test_a_pair_communicator_that_cannot_meet_its_dead_peer_fails_the_op_like_a_transfer(runner, world, tmp_path):
    from worlds import world_missing

    if world_missing(world):
        pytest.skip(world_missing(world))
    prefix = str(tmp_path / "fr_rank_")
    (kind, message), elapsed, hooked = run_ranks(runner, 3, timeout=90, env={"TORCH_FR_DUMP_TEMP_FILE": prefix},
                                                 reporting=[0, 1])[0]
    assert kind == "DistBackendError", message
    assert "send (backend nccl, group '0', rank 0" in message, message
    assert "its communicator ('cpu:0/p2p:0:2')" in message or "its communicator ('cpu/p2p:0:2')" in message, message
    assert elapsed < TIMEOUT_S + MARGIN_S, elapsed
    assert hooked == ["hook"]
    dump = pickle.load(open(prefix + "0", "rb"))
    assert dump["entries"][-1]["profiling_name"].endswith("send 0->2"), dump["entries"][-1]


def _peer_dies_inside_glooconnect(dying):
    """Legacy behaviour, CPU-bound: both ranks meet for the world's communicator (bound, so
    created at init). Rank `dying` starts Gloo's connect, posting its address, and dies; the
    other reaches Gloo's connect after that, as a rank slower between meeting and connect does.
    Which rank dies decides whether the survivor connects (and is refused) or listens."""
    def run(rank, world, store):
        import threading
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        import nccl_migrate._registration as registration
        from worlds import init

        real_make_gloo = registration._make_gloo
        connect_started = []

        def make_gloo(*args):
            if rank == dying:
                threading.Thread(target=real_make_gloo, args=args, daemon=True).start()
                time.sleep(0.3)
                os._exit(0)
            time.sleep(0.8)
            connect_started.append(time.monotonic())
            return real_make_gloo(*args)

        registration._make_gloo = make_gloo
        try:
            init("cpu-bound", "migrate-legacy", rank, world, store, timeout=timedelta(seconds=TIMEOUT_S))
            dist.all_reduce(torch.ones(8))
            outcome = ("no error", "")
        except Exception as error:  # noqa: BLE001
            outcome = (type(error).__name__, str(error).split("\n")[0])
        return outcome, time.monotonic() - connect_started[0] if connect_started else None

    return run


def _rank_0_dies_inside_glooconnect(r, w, s): return _peer_dies_inside_glooconnect(0)(r, w, s)
def _rank_1_dies_inside_glooconnect(r, w, s): return _peer_dies_inside_glooconnect(1)(r, w, s)


@requires_torch("cpu_device_id")  # the world is bound to the CPU: Gloo connects when the group is made
@pytest.mark.parametrize("runner,survivor", [(_rank_0_dies_inside_glooconnect, 1),
                                             (_rank_1_dies_inside_glooconnect, 0)], ids=["rank0-dies", "rank1-dies"])
def test_a_peer_that_dies_inside_glooconnect_fails_the_op_within_the_timeout(runner, survivor):
    # Gloo's full-mesh connect waits five times its context's timeout for a peer that posted its
    # address and died before connecting; the survivor must still fail within the group's
    # timeout, counted from its connect (without the bound, Gloo took 15 to 16 s here).
    (kind, message), elapsed = run_ranks(runner, 2, timeout=90, reporting=[survivor])[0]
    assert kind == "DistBackendError", message
    assert "Gloo could not connect" in message, message
    assert elapsed < TIMEOUT_S + MARGIN_S, elapsed


def _shrink_after_the_store_host_died(rank, world, store):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    import nccl_migrate  # noqa: F401

    dist.init_process_group("migrate-nccl2", rank=rank, world_size=world, timeout=timedelta(seconds=TIMEOUT_S))
    dist.all_reduce(torch.ones(4))
    if rank == 0:
        os._exit(0)  # hosts the TCP store (env:// rendezvous): the store goes with it
    try:
        dist.all_reduce(torch.ones(4))
    except Exception:  # noqa: BLE001 - the dead peer's failure; shrink is what this test is about
        pass
    started = time.monotonic()
    try:
        dist.shrink_group([0], shrink_flags=dist.distributed_c10d.SHRINK_ABORT)
        return ("no error", ""), time.monotonic() - started
    except Exception as error:  # noqa: BLE001
        return (type(error).__name__, str(error).split("\n")[0]), time.monotonic() - started


def test_shrink_names_the_dead_store_and_the_way_out(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The survivors' failed ops dump the flight recorder: into tmp_path, not torch's default.
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_")}
    for (kind, message), seconds in run_ranks(_shrink_after_the_store_host_died, 3, timeout=90, env=env,
                                              reporting=[1, 2]):
        assert kind == "DistStoreError", message
        assert "needs the group's store to connect the survivors, and the store cannot be reached" in message, message
        assert "torchrun's agent" in message and "re-form the job with init_process_group on a new store" in message
        assert seconds < TIMEOUT_S, seconds


def _next_op_after_a_lost_peer(rank, world, store):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    import nccl_migrate  # noqa: F401

    dist.init_process_group("migrate-nccl2", store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=TIMEOUT_S))
    dist.all_reduce(torch.ones(4))
    if rank == 2:
        os._exit(0)
    try:
        dist.all_reduce(torch.ones(1 << 16))  # Gloo loses its connection to rank 2: a transport failure
    except Exception:  # noqa: BLE001
        pass
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    # The error is recorded at once; the abort follows on the watchdog thread, after the hooks
    # and the dump (milliseconds here): 1.5 s leaves room for a loaded machine.
    time.sleep(1.5)
    started = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4))
        outcome = ("no error", "")
    except Exception as error:  # noqa: BLE001
        outcome = (type(error).__name__, str(error).split("\n")[0])
    # Backend.get_error came after torch 2.11: there the error is read from the next op's message alone.
    return outcome, time.monotonic() - started, str(backend.get_error()) if hasattr(backend, "get_error") else None


def test_a_transport_failure_aborts_the_group_so_the_next_op_says_so_at_once(tmp_path):
    import torch

    torch_has_get_error = hasattr(torch._C._distributed_c10d.Backend, "get_error")
    for (kind, message), seconds, error in run_ranks(_next_op_after_a_lost_peer, 3, timeout=90, reporting=[0, 1],
                                                     env={"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_")}):
        assert kind == "DistBackendError", message
        assert "process group '0' (nccl2) was aborted after a failed op" in message, message
        assert seconds < 1.0, seconds  # at once: not after Gloo's own 3 s timeout
        assert "COMM_ERROR" in error if torch_has_get_error else error is None, error
