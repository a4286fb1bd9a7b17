"""A real job whose path depends on its backend (path_job.py: one flat bucket when the backend's
name() is "nccl", one all_reduce per tensor otherwise) under `nccl-migrate ab`: the verdict says the
job took a different path, names both calls, and the first divergence is rank 0's at the first
different call, in the JSON, text and HTML reports alike."""

import json
import os
import subprocess

from test_ab_cli import CLI, HERE, ab
from torch_support import requires_torch

PATH_JOB = os.path.join(HERE, "path_job.py")
CALL_A = "all_reduce SUM of float32 [161] (161 elements)"
CALL_B = "all_reduce SUM of float32 [16, 8] (128 elements)"


@requires_torch("backend_plugins")
def test_a_job_that_branches_on_its_backend_is_a_backend_dependent_path(tmp_path):
    status, report, stderr = ab(tmp_path, "--html", str(tmp_path / "ab.html"), "--", PATH_JOB)
    assert status == 1, stderr
    assert report["verdict"].startswith(
        f"divergent, the job took a different path under each behaviour: at rank 0, group 0, seq 1 side a issued "
        f"{CALL_A}, side b {CALL_B}; 2 op(s) diverged at a different call"), report["verdict"]
    assert "job nondeterminism" not in report["verdict"]
    assert report["path_differs"] and not report["backend_implicated"]
    assert report["divergence_classes"]["backend_dependent_path"] == 2
    assert report["divergence_classes"]["job_nondeterminism"] == 0
    first = report["first_divergence"]
    assert (first["rank"], first["group"], first["seq"], first["class"]) == (0, "0", 1, "backend_dependent_path")
    assert first["calls"] == {"a": CALL_A, "b": CALL_B}
    assert [d["rank"] for d in report["divergences"]] == [0, 1]
    assert report["identical"] == 2 and report["missing_in_a"] == 2  # the warm-up; side b's [33] per rank

    # The same records compared again, as text: the verdict and both calls lead.
    done = subprocess.run([CLI, "ab", "compare", str(tmp_path / "run" / "a"), str(tmp_path / "run" / "b"),
                           "--format", "text", "--quiet"], capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"nccl-migrate ab: {report['verdict']}"
    start = lines.index("  first divergence: rank 0, group 0, seq 1: a different call on each side")
    assert lines[start + 1:start + 3] == [f"    side a issued {CALL_A}", f"    side b issued {CALL_B}"]
    assert lines[start + 3].startswith("    class: backend dependent path; cause: a different call on each side")

    page = (tmp_path / "ab.html").read_text()
    assert (f"<h2>First divergence</h2><table><tr><td>side a issued</td><td>{CALL_A}</td></tr><tr><td>side b "
            f"issued</td><td>{CALL_B}</td></tr><tr><td>rank</td><td>0</td></tr>") in page
    with open(tmp_path / "run" / "report.json") as written:
        assert json.load(written)["first_divergence"]["class"] == "backend_dependent_path"
