"""`nccl-migrate ab` on a real DistributedDataParallel job: the gradient all-reduces DDP's C++
reducer issues are recorded (through the ProcessGroup hooks), compared, and a divergence planted
in one of them is named exactly."""

import json
import os

from test_ab_cli import HERE, ab
from torch_support import requires_torch

DDP_MODEL_JOB = os.path.join(HERE, "ddp_model_job.py")


def _reducer_ops(run_dir, side="a", rank=1):
    with open(os.path.join(run_dir, side, f"rank{rank}.jsonl")) as f:
        ops = [json.loads(line) for line in f]
    return sorted((e for e in ops if e["op"] == "all_reduce" and e.get("via") == "hook"), key=lambda e: e["seq"])


@requires_torch("backend_plugins", "process_group_hooks")
def test_ddp_gradient_all_reduces_are_recorded_and_identical(tmp_path):
    status, report, stderr = ab(tmp_path, "--", DDP_MODEL_JOB, env={"DDP_STEPS": "3"})
    assert status == 0, stderr
    assert report["verdict"] == "identical" and report["ops_compared"] == report["identical"]
    for side in ("a", "b"):
        assert report["sides"][side]["op_counts"]["all_reduce"] == 3 * 2  # one bucket per step, per rank
    reducer = _reducer_ops(tmp_path / "run")
    assert len(reducer) == 3 and all(e["in"] and e["out"] for e in reducer)
    # An all-reduce's result is the same on every rank: each was read before DDP reused its bucket.
    assert [e["out"] for e in reducer] == [e["out"] for e in _reducer_ops(tmp_path / "run", rank=0)]


@requires_torch("backend_plugins", "process_group_hooks")
def test_a_divergence_planted_in_a_reducer_all_reduce_is_caught(tmp_path):
    status, _, stderr = ab(tmp_path / "first", "--", DDP_MODEL_JOB, env={"DDP_STEPS": "3"})
    assert status == 0, stderr
    target = _reducer_ops(tmp_path / "first" / "run")[1]  # the second step's gradient bucket
    perturb = f'"NCCL_MIGRATE_AB_PERTURB=rank=1,group={target["group"]},seq={target["seq"]}"'
    status, report, stderr = ab(tmp_path / "second", "--keep-tensors", "65536", "--b", f"rewritten,{perturb}", "--",
                                DDP_MODEL_JOB, env={"DDP_STEPS": "3"})
    assert status == 1, stderr
    first = report["first_divergence"]
    assert (first["rank"], first["group"], first["seq"], first["op"]) == (1, target["group"], target["seq"],
                                                                          "all_reduce")
    assert first["cause"].startswith("only outputs differ") and 0 < first["max_abs_error"] < 1e-3
