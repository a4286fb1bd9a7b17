"""Jobs launched the way users launch them: torchrun starts the ranks (env:// rendezvous, its
agent watching them), each rank binds its group to its own device, and torch's own DDP and
object collectives run on our backends."""

import json
import os
import subprocess
import sys

import pytest

from worlds import world_missing

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jobs", "bound_training_job.py")


def _torchrun(nproc, *args, timeout=240):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", JOB,
               *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("backend", ["migrate-legacy", "migrate-nccl2"])
@pytest.mark.parametrize("world", ["cpu-bound", "sim-bound"])
def test_torchrun_job_on_a_bound_world(world, backend, tmp_path):
    if why := world_missing(world):
        pytest.skip(why)
    done = _torchrun(3, world, backend, str(tmp_path))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(3)]
    # d(sum(W x + b))/dW = 3 * (rank + 1) per entry, averaged over three ranks: 3 * 2.
    for rank, r in enumerate(results):
        assert r["weight_grad"] == [[6.0] * 4] * 2
        assert r["pair_sum"] == ([2.0, 2.0] if rank < 2 else [1.0, 1.0])
        assert r["objects"] == [{"rank": q, "local_rank": q} for q in range(3)]
        assert r["backend_name"].startswith("sim-" if world == "sim-bound" else "migrate-")

