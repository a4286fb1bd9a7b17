"""The CLI's torch-side commands through the real binary: run and doctor."""

import json
import os
import subprocess
import sys
import time

import pytest

from torch_support import requires_torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLI = os.environ.get("NCCL_MIGRATE_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))


@pytest.fixture(scope="module")
def cli():
    assert os.access(CLI, os.X_OK), f"{CLI} is not built: run tools/build.sh first (or set NCCL_MIGRATE_CLI)"
    return CLI


def _run(cli, *args, timeout=180, env=None):
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


@requires_torch("backend_plugins")
def test_run_the_example_job_on_two_cpu_ranks(cli):
    done = _run(cli, "run", "--nproc", "2", "--", os.path.join(ROOT, "examples", "ddp_job.py"),
                env={"JOB_STEPS": "2"})
    assert done.returncode == 0, done.stderr
    checksums = {line.split("checksum ")[1].split()[0] for line in done.stdout.splitlines() if "checksum" in line}
    assert len(checksums) == 1, f"ranks disagree after all-reducing gradients: {done.stdout}"
    assert "all 2 ranks finished" in done.stderr


def test_run_reports_a_failing_rank_and_exits_2(cli, tmp_path):
    job = tmp_path / "fails.py"
    job.write_text("import os, sys, time\nif os.environ['RANK'] == '1': sys.exit(3)\ntime.sleep(60)\n")
    started = time.monotonic()
    done = _run(cli, "run", "--nproc", "2", "--", str(job))
    assert done.returncode == 2
    assert "rank 1 exited with status 3" in done.stderr
    assert time.monotonic() - started < 30, "the surviving rank must be ended, not waited for"


def test_run_ends_a_job_that_outlives_its_timeout(cli, tmp_path):
    job = tmp_path / "hangs.py"
    job.write_text("import time\ntime.sleep(120)\n")
    started = time.monotonic()
    done = _run(cli, "run", "--nproc", "2", "--timeout", "2", "--", str(job))
    assert done.returncode == 2
    assert "ran past its timeout" in done.stderr
    assert time.monotonic() - started < 30


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_run_ends_a_rendezvous_whose_other_node_never_comes(cli, tmp_path):
    """The timeout fires before torch's agent has started any worker (it waits for the second
    node): the run says what happened and exits 2, never dies silently by the signal."""
    job = tmp_path / "never_started.py"
    job.write_text("raise SystemExit('a worker must not start without its peer node')\n")
    started = time.monotonic()
    done = _run(cli, "run", "--nproc", "1", "--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                f"localhost:{_free_port()}", "--timeout", "4", "--", str(job), timeout=120)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "ran past its timeout" in done.stderr and "Traceback" not in done.stderr
    assert time.monotonic() - started < 60


def test_run_without_a_command_is_a_usage_error(cli):
    done = _run(cli, "run", "--nproc", "2")
    assert done.returncode == 2
    assert "no command given" in done.stderr


def test_doctor_json_resolves_every_name(cli):
    done = _run(cli, "doctor", "--format", "json", env={"TORCH_DIST_USE_NCCL2": "0"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["names"]["nccl"]["behaviour"] == "legacy"
    assert report["names"]["nccl2"]["behaviour"] == "rewritten"
    assert report["names"]["nccl-lazy"]["behaviour"] == "rewritten-lazy-p2p"
    assert report["toolkit"]["nccl"] == report["torch"]["nccl"], "the toolkit must build against torch's NCCL"
    assert report["conflicts"] == []


def test_doctor_flags_a_mistyped_variable_and_exits_1(cli):
    done = _run(cli, "doctor", env={"TORCH_DIST_USE_NCCL2": "false"})
    assert done.returncode == 1
    assert "TORCH_DIST_USE_NCCL2" in done.stdout and "conflicts:" in done.stdout



def test_doctor_lists_the_torch_features_this_build_lacks(cli):
    report = json.loads(_run(cli, "doctor", "--format", "json").stdout)
    features = report["torch_features"]
    assert {"nccl2", "shrink", "reconfigure", "abort_hooks", "health_check"} <= set(features), features
    assert all({"present", "kind", "what"} <= set(f) for f in features.values()), features
    lacking = [name for name, f in features.items() if not f["present"] and f["kind"] == "feature"]
    text = _run(cli, "doctor").stdout
    assert all(name in text for name in lacking), text
    # torch 2.15 offers everything the toolkit uses: a feature missing there is a detection bug.
    version = tuple(int(p) for p in report["torch"]["version"].split("+")[0].split(".")[:2])
    if version >= (2, 15):
        assert lacking == [] and "the toolkit can use are present" in text, (lacking, text)
