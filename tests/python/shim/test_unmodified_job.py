"""End to end on CPU: one unmodified job script (backend "nccl", no nccl_migrate import), run
under each behaviour by environment variables only. Which behaviour ran is read from the
toolkit's own report (groups it served and communicators it created), not from the job."""

import json
import os
import subprocess

import pytest

from torch_support import requires_torch

# The job names torch's "nccl": the shim routes it only where torch creates backends through plugins.
routes_nccl = requires_torch("backend_plugins")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CLI = os.environ.get("NCCL_MIGRATE_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))
JOB = os.path.join(HERE, "unmodified_job.py")
WORLD = 4


def _run(tmp_path, env, *flags):
    report = str(tmp_path / "report_{rank}.json")
    full_env = dict(os.environ, NCCL_MIGRATE_REPORT=report, **env)
    for key in ("TORCH_DIST_USE_NCCL2", "NCCL_MIGRATE_IMPL"):
        if key not in env:
            full_env.pop(key, None)
    done = subprocess.run([CLI, "run", "--nproc", str(WORLD), *flags, "--", JOB], capture_output=True, text=True,
                          timeout=300, env=full_env)
    reports = []
    for rank in range(WORLD):
        path = report.replace("{rank}", str(rank))
        reports.append(json.load(open(path)) if os.path.exists(path) else None)
    return done, reports


@pytest.mark.parametrize("use_nccl2,impl,behaviour,name", [
    ("0", "toolkit", "legacy", "nccl"),
    ("0", "auto", "legacy", "nccl"),
    (None, "toolkit", "rewritten", "nccl2"),
    (None, "auto", "rewritten", "nccl2"),
])
@routes_nccl
def test_one_script_four_behaviours_switched_by_environment(tmp_path, use_nccl2, impl, behaviour, name):
    env = {"NCCL_MIGRATE_IMPL": impl}
    if use_nccl2 is not None:
        env["TORCH_DIST_USE_NCCL2"] = use_nccl2
    done, reports = _run(tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    for rank, report in enumerate(reports):
        assert report is not None, f"rank {rank} wrote no report"
        assert [(g["requested"], g["behaviour"], g["name"]) for g in report["groups"]] == [("nccl", behaviour, name)]
        p2p = [c for c in report["communicators_created"] if c["purpose"] == "p2p"]
        collective = [c for c in report["communicators_created"] if c["purpose"] == "collective"]
        assert len(collective) == 1
        # Legacy gives each send/recv peer pair its own communicator; rewritten sends on the group's.
        assert len(p2p) == (2 if behaviour == "legacy" else 0), report["communicators_created"]
        assert {c["policy"] for c in report["communicators_created"]} == {behaviour}
    assert f"reports name {name}" in done.stdout


@routes_nccl
def test_torch_implementation_without_a_gpu_is_a_clear_error(tmp_path):
    done, _ = _run(tmp_path, {"NCCL_MIGRATE_IMPL": "torch"})
    assert done.returncode == 2
    assert "NCCL_MIGRATE_IMPL" in done.stdout and "GPU" in done.stdout, done.stdout[-2000:]


@routes_nccl
def test_invalid_implementation_value_lists_the_valid_ones(tmp_path):
    done, _ = _run(tmp_path, {"NCCL_MIGRATE_IMPL": "turbo"})
    assert done.returncode == 2
    assert "auto" in done.stdout and "toolkit" in done.stdout and "turbo" in done.stdout, done.stdout[-2000:]


def test_without_activation_torch_behaves_as_without_the_toolkit(tmp_path):
    done, reports = _run(tmp_path, {}, "--no-activate")
    from nccl_migrate import torch_features

    assert done.returncode == 2  # torch's own "nccl" needs a GPU: nccl2 where torch has it, else the legacy one
    needs_gpu = ("nccl2 requires at least one CUDA device" if torch_features.has("nccl2")
                 else "ProcessGroupNCCL is only supported with GPUs")
    assert needs_gpu in done.stdout, done.stdout[-2000:]
    assert all(r is None for r in reports), "the toolkit must not have run"


@routes_nccl
def test_a_group_can_ask_for_legacy_inside_a_rewritten_world(tmp_path):
    done, reports = _run(tmp_path, {"JOB_SUBGROUP_BACKEND": "nccl-legacy"})
    assert done.returncode == 0, done.stdout + done.stderr
    for report in reports:
        groups = [(g["requested"], g["behaviour"], g["name"]) for g in report["groups"]]
        assert groups == [("nccl", "rewritten", "nccl2"), ("nccl-legacy", "legacy", "nccl")], groups
