"""An op issued from C++ is replayed by --shadow with the reduce op it was issued with (read from
torch's dispatcher), or not at all, counted with its reason: a guessed reduce op would blame the
backend for the job's own choice. FSDP2, torch's own client, shows no divergence either way."""

import json
import os

from test_ab_cli import HERE, ab
from torch_support import requires_torch

CPP_REDUCTIONS_JOB = os.path.join(HERE, "cpp_reductions_job.py")
FSDP2_JOB = os.path.join(HERE, "fsdp2_job.py")


@requires_torch("backend_plugins", "process_group_hooks")
def test_reductions_from_cpp_are_replayed_with_their_own_reduce_op_or_not_at_all(tmp_path):
    status, report, stderr = ab(tmp_path, "--shadow", "--", CPP_REDUCTIONS_JOB)
    assert status == 0, stderr
    assert report["divergent"] == 0 and report["ops_compared"] == report["identical"] == 2 * 2
    skipped = report["not_shadowed"]
    assert skipped["count"] == 2 and "reduce op is not known" in skipped["first"]["reason"]
    with open(tmp_path / "run" / "shadow" / "rank1.jsonl") as f:
        records = sorted(map(json.loads, f), key=lambda e: e["seq"])
    assert [(e["op"], e["reduce_op"], e.get("via")) for e in records] == [
        ("all_reduce", "MAX", "hook"), ("reduce_scatter_tensor", "MAX", "hook"), ("all_reduce", None, "hook")]


@requires_torch("backend_plugins")
def test_fsdp2_under_shadow_shows_no_divergence(tmp_path):
    status, report, stderr = ab(tmp_path, "--shadow", "--", FSDP2_JOB)
    assert status == 0, stderr
    assert report["divergent"] == 0 and report["not_shadowed"]["count"] == 0
    counts = report["sides"]["b"]["op_counts"]
    assert counts.get("reduce_scatter_tensor", 0) >= 2 * 2 * 2 and counts.get("all_gather_into_tensor", 0) > 0, counts


@requires_torch("backend_plugins")
def test_fsdp2_under_two_runs_shows_no_divergence(tmp_path):
    status, report, stderr = ab(tmp_path, "--", FSDP2_JOB)
    assert status == 0, stderr
    assert report["verdict"] == "identical" and report["sides"]["a"]["op_counts"].get("reduce_scatter_tensor")


def _reduce_ops(run_dir, side, op):
    """Each (reduce op, source) rank 0 recorded ``op`` with: source None is torch.distributed's
    Python function (FSDP2 on torch 2.15 calls reduce_scatter_single), "hook" an op from C++."""
    with open(run_dir / side / "rank0.jsonl") as f:
        return {(e["reduce_op"], e.get("via")) for e in map(json.loads, f) if e["op"] == op}


@requires_torch("backend_plugins")
def test_fsdp2_premul_sum_is_named_by_its_factor_and_shows_no_divergence(tmp_path):
    """A PREMUL_SUM is a boxed ReduceOp: its record names the op and its factor, the same in every
    run, so two runs agree; --shadow replays it with that factor."""
    env = {"FSDP_DIVIDE_FACTOR": "3.0"}
    status, report, stderr = ab(tmp_path / "two", "--", FSDP2_JOB, env=env)
    assert status == 0, stderr
    assert report["verdict"] == "identical"
    assert _reduce_ops(tmp_path / "two" / "run", "a", "reduce_scatter_tensor") == {(f"PREMUL_SUM({1 / 3.0!r})", None)}
    status, report, stderr = ab(tmp_path / "shadow", "--shadow", "--", FSDP2_JOB, env=env)
    assert status == 0, stderr
    assert report["divergent"] == 0 and report["not_shadowed"]["count"] == 0 and report["identical"] > 0
