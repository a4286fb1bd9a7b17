"""The verdict says first whether a backend is implicated. A job whose runs differ only through its
own inputs (distributed checkpointing pickles per-run ids into object collectives) gets "job
nondeterminism only", its object collectives named, and exit 0 when the user allows it."""

import os

from test_ab_cli import HERE, ab
from torch_support import requires_torch

CHECKPOINT_JOB = os.path.join(HERE, "checkpoint_job.py")
PIPELINE_JOB = os.path.join(HERE, "pipeline_job.py")
BATCH_JOB = os.path.join(HERE, "batch_job.py")


@requires_torch("backend_plugins")
def test_a_checkpointing_job_is_job_nondeterminism_only(tmp_path):
    env = {"CHECKPOINT_DIR": str(tmp_path / "checkpoint")}
    status, report, stderr = ab(tmp_path / "strict", "--", CHECKPOINT_JOB, env=env)
    assert status == 1, stderr
    assert report["verdict"].startswith("job nondeterminism only") and not report["backend_implicated"]
    assert report["divergence_classes"]["backend"] == 0 and report["divergence_classes"]["job_nondeterminism"] >= 1
    assert "broadcast_object_list" in report["object_collectives"] and "broadcast_object_list" in report["verdict"]
    first = report["first_divergence"]
    assert first["class"] == "job_nondeterminism" and first["object_collective"] in report["object_collectives"]
    assert len(report["divergences"]) == report["divergent"]  # every one listed (fewer than the bound)
    status, report, stderr = ab(tmp_path / "allowed", "--allow-job-nondeterminism", "--", CHECKPOINT_JOB, env=env)
    assert status == 0 and report["verdict"].startswith("job nondeterminism only"), stderr


@requires_torch("backend_plugins")
def test_p2p_between_some_ranks_is_classified_by_the_send_it_received(tmp_path):
    """A recv's output comes from its peer's send: when that send's input differs (the job's own
    doing), the recv is not the backend's fault, and p2p between some ranks does not misalign the
    collectives that follow."""
    status, report, stderr = ab(tmp_path, "--nproc", "3", "--b", "rewritten,PIPELINE_RANDOM=1", "--", PIPELINE_JOB)
    assert status == 1, stderr
    assert report["divergence_classes"]["backend"] == 0 and not report["backend_implicated"], report["divergences"]
    by_op = {(d["rank"], d["op"]): d["class"] for d in report["divergences"]}
    assert by_op[(0, "send")] == by_op[(1, "recv")] == "job_nondeterminism", by_op
    assert by_op[(1, "all_reduce")] == "propagated" and (2, "recv") not in by_op, by_op
    assert report["verdict"].startswith("job nondeterminism only")
    assert report["missing_in_a"] == report["missing_in_b"] == 0


@requires_torch("backend_plugins")
def test_a_batch_of_sends_and_recvs_is_judged_by_what_its_senders_sent(tmp_path):
    """A ring exchange by batch_isend_irecv: rank 0's tensor differs by the job's own doing, so
    rank 1's batch receives different data from identical inputs of its own; the data came from
    rank 0's send, so the backend that delivered it is not blamed."""
    status, report, stderr = ab(tmp_path, "--b", "rewritten,BATCH_RANDOM=1", "--", BATCH_JOB)
    assert status == 1, stderr
    by_op = {(d["rank"], d["op"]): d for d in report["divergences"]}
    assert by_op[(0, "batch_isend_irecv")]["class"] == "job_nondeterminism", by_op
    assert by_op[(1, "batch_isend_irecv")]["class"] == "job_nondeterminism", by_op
    assert by_op[(1, "batch_isend_irecv")]["inputs_differed_on_ranks"] == [0]
    assert report["divergence_classes"]["backend"] == 0 and report["verdict"].startswith("job nondeterminism only")


@requires_torch("backend_plugins")
def test_a_batch_whose_senders_sent_the_same_and_received_differently_is_the_backends(tmp_path):
    perturb = '"NCCL_MIGRATE_AB_PERTURB=rank=1,group=0/batch 1,seq=0"'  # rank 1's received tensor
    status, report, stderr = ab(tmp_path, "--b", f"rewritten,{perturb}", "--", BATCH_JOB)
    assert status == 1, stderr
    first = report["first_divergence"]
    assert (first["rank"], first["op"], first["class"]) == (1, "batch_isend_irecv", "backend"), first
    assert report["backend_implicated"]


@requires_torch("backend_plugins")
def test_a_job_that_issues_no_op_is_nothing_compared_not_identical(tmp_path):
    job = tmp_path / "no_ops.py"
    job.write_text("import os\nimport torch.distributed as dist\n"
                   "dist.init_process_group(os.environ.get('JOB_BACKEND', 'nccl'))\ndist.destroy_process_group()\n")
    status, report, stderr = ab(tmp_path, "--", str(job))
    assert status == 2, stderr
    assert report["verdict"].startswith("nothing compared") and report["ops_compared"] == 0
