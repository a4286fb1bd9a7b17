"""`nccl-migrate ab --shadow`: one run, every op also executed on a shadow group with side b's
backend and compared live, reported in the same form and with the same exit codes as two runs."""

import json
import os

from test_ab_cli import DDP_JOB, HERE, TINY_JOB, ab
from torch_support import requires_torch

DDP_MODEL_JOB = os.path.join(HERE, "ddp_model_job.py")

PLANTED = '"NCCL_MIGRATE_AB_PERTURB=rank=1,group=0,seq=5"'


@requires_torch("backend_plugins")
def test_the_example_job_is_identical_under_shadow(tmp_path):
    status, report, stderr = ab(tmp_path, "--shadow", "--", DDP_JOB, env={"JOB_STEPS": "2"})
    assert status == 0, stderr
    assert report["mode"] == "shadow" and report["verdict"] == "identical"
    assert report["ops_compared"] > 0 and report["ops_compared"] == report["identical"]
    assert report["not_shadowed"]["count"] == 0
    for side in ("a", "b"):
        counts = report["sides"][side]["op_counts"]
        for op in ("broadcast", "all_reduce", "all_gather", "send", "recv"):
            assert counts.get(op, 0) > 0, (side, counts)
    assert report["sides"]["b"]["backend"] == ["migrate-nccl2: shadow groups"]  # rewritten, by the shim
    assert not os.path.exists(tmp_path / "run" / "a"), "one run, not two"


@requires_torch("backend_plugins")
def test_a_divergence_planted_in_the_shadow_is_named_exactly(tmp_path):
    status, report, stderr = ab(tmp_path, "--shadow", "--b", f"rewritten,{PLANTED}", "--", DDP_JOB,
                                env={"JOB_STEPS": "2"})
    assert status == 1, stderr
    first = report["first_divergence"]
    assert (first["rank"], first["group"], first["seq"], first["op"]) == (1, "0", 5, "all_reduce")
    assert first["shape"] == [32] and first["dtype"] == "float32"
    assert 0 < first["max_abs_error"] < 1e-3 and first["max_rel_error"] > 0  # measured live, no kept tensors
    assert report["divergent"] == 1  # the job saw the primary's outputs: nothing after it moved


@requires_torch("backend_plugins")
def test_a_divergence_planted_in_the_primary_flows_into_the_job(tmp_path):
    status, report, stderr = ab(tmp_path, "--shadow", "--a", f"legacy,{PLANTED}", "--", DDP_JOB,
                                env={"JOB_STEPS": "2"})
    assert status == 1, stderr
    assert (report["first_divergence"]["rank"], report["first_divergence"]["seq"]) == (1, 5)


@requires_torch("backend_plugins")
def test_tolerance_accepts_the_measured_error(tmp_path):
    status, report, stderr = ab(tmp_path, "--shadow", "--tolerance", "1e-6", "--b", f"rewritten,{PLANTED}", "--",
                                DDP_JOB, env={"JOB_STEPS": "2"})
    assert status == 0, stderr
    assert report["within_tolerance"] == 1 and report["verdict"] == "identical within tolerance 1e-06"


@requires_torch("backend_plugins")
def test_a_crash_under_shadow_exits_2_and_keeps_the_output(tmp_path):
    status, report, _ = ab(tmp_path, "--shadow", "--a", "legacy,TINY_CRASH=1", "--", TINY_JOB)
    assert status == 2
    assert "rank 1 exited with status 3" in report["verdict"]
    assert os.path.exists(report["sides"]["a"]["log"])
    assert os.path.exists(tmp_path / "run" / "report.html")


@requires_torch("backend_plugins")
def test_a_hang_under_shadow_is_ended_by_the_timeout(tmp_path):
    status, report, _ = ab(tmp_path, "--shadow", "--timeout", "20", "--a", "legacy,TINY_HANG=0", "--", TINY_JOB)
    assert status == 2 and "timeout" in report["verdict"]


def test_a_shadow_side_may_only_choose_a_backend(tmp_path):
    status, report, stderr = ab(tmp_path, "--shadow", "--b", "rewritten,NCCL_DEBUG=INFO", "--", TINY_JOB)
    assert status == 2 and report is None
    assert "sets NCCL_DEBUG, which would apply to the whole process" in stderr


@requires_torch("backend_plugins", "process_group_hooks")
def test_ddp_reducer_all_reduces_are_shadowed_too(tmp_path):
    status, report, stderr = ab(tmp_path / "first", "--shadow", "--", DDP_MODEL_JOB, env={"DDP_STEPS": "3"})
    assert status == 0, stderr
    assert report["not_shadowed"]["count"] == 0 and report["ops_compared"] == report["identical"]
    assert report["sides"]["b"]["op_counts"]["all_reduce"] == 3 * 2  # the reducer's buckets, replayed
    with open(tmp_path / "first" / "run" / "shadow" / "rank1.jsonl") as f:
        reducer = sorted((e for e in map(json.loads, f) if e["op"] == "all_reduce" and e.get("via") == "hook"),
                         key=lambda e: e["seq"])
    target = reducer[-1]
    perturb = f'"NCCL_MIGRATE_AB_PERTURB=rank=1,group={target["group"]},seq={target["seq"]}"'
    status, report, stderr = ab(tmp_path / "second", "--shadow", "--b", f"rewritten,{perturb}", "--", DDP_MODEL_JOB,
                                env={"DDP_STEPS": "3"})
    assert status == 1, stderr
    first = report["first_divergence"]
    assert (first["rank"], first["seq"], first["op"]) == (1, target["seq"], "all_reduce") and first["max_abs_error"] > 0
