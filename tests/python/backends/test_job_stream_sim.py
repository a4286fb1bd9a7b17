"""A job with a stream of its own on the simulated device, as a GPU job has its CUDA stream:
work.wait() without a timeout orders the job's stream after the op and leaves the host alone
(torch's Work.wait() on CUDA), so the job's later stream work reads the op's result while the
host never waited; an op's future hands a comm hook the op's result. Elsewhere in the Python
suites the simulated device's current stream is the host, where every such wait blocks."""

import functools
import time

import pytest

from ranks import run_ranks
from worlds import init, world_missing

BACKENDS = ["migrate-legacy", "migrate-nccl2", "migrate-lazy"]
LATE_S = 1.5  # rank 1 joins every op this late, so rank 0's op is in flight that long


def _skip_unless_runnable():
    if why := world_missing("sim-bound"):
        pytest.skip(why)


def _job_stream_rank(backend, rank, size, store):
    import torch
    import torch.distributed as dist

    init("sim-bound", backend, rank, size, store)
    import _nccl_migrate_sim  # importable once init registered the simulated twin

    out = {}
    x = torch.full((1 << 12,), float(rank + 1))
    dist.all_reduce(x)  # both communicators exist before anything is timed
    with _nccl_migrate_sim.JobStream() as job:
        if rank == 1:
            time.sleep(LATE_S)
        x = torch.full((1 << 12,), float(rank + 1))
        issued = time.monotonic()
        work = dist.all_reduce(x, async_op=True)
        work.wait()
        out["wait_s"] = time.monotonic() - issued
        seen = {}

        def read_on_the_job_stream():
            seen["value"] = x[0].item()
            seen["at_s"] = time.monotonic() - issued

        job.enqueue(read_on_the_job_stream)
        out["host_after_enqueue_s"] = time.monotonic() - issued
        job.synchronize()
        out["job_stream_read"] = seen["value"]
        out["job_stream_read_at_s"] = seen["at_s"]

        # A comm hook's chain (DDP's default allreduce hook is get_future().then(...)).
        y = torch.full((4,), float(rank + 1))
        hooked = dist.all_reduce(y, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
        out["hook_result"] = hooked.wait().tolist()
        job.synchronize()
    dist.destroy_process_group()
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_wait_orders_the_jobs_stream_and_leaves_the_host_alone(backend):
    _skip_unless_runnable()
    rank0, rank1 = run_ranks(functools.partial(_job_stream_rank, backend), world_size=2, timeout=120)
    for r in (rank0, rank1):
        assert r["job_stream_read"] == 3.0, r  # the job's stream read after the op wrote
        assert r["hook_result"] == [6.0] * 4, r
    # Rank 0's op waits LATE_S for rank 1: its wait() and the enqueue after it returned at once,
    # and the job's stream read the result only once the op finished.
    assert rank0["wait_s"] < LATE_S / 3, rank0
    assert rank0["host_after_enqueue_s"] < LATE_S / 3, rank0
    assert rank0["job_stream_read_at_s"] > LATE_S * 0.6, rank0
