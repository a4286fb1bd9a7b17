"""docs/migrating.md, step by step, on examples/migrating through the real binary: lint finds the
example's hazards, `--fix --unsafe-fixes` rewrites what has a mechanical remedy (and a second run
changes nothing), and `nccl-migrate ab` finds the job divergent under the legacy and the rewritten
behaviour before the fix and identical after it."""

import json
import os
import py_compile
import shutil
import subprocess

import pytest

from torch_support import requires_torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLI = os.environ.get("NCCL_MIGRATE_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))
# lint and fix with the main build's CLI (a build of the torch side alone has no lint), ab with CLI.
LINT_CLI = os.environ.get("NCCL_MIGRATE_LINT_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))
EXAMPLE = os.path.join(ROOT, "examples", "migrating")


@pytest.fixture(scope="module")
def cli():
    assert os.access(CLI, os.X_OK), f"{CLI} is not built: run tools/build.sh first (or set NCCL_MIGRATE_CLI)"
    return CLI


@pytest.fixture(scope="module")
def lint_cli():
    assert os.access(LINT_CLI, os.X_OK), f"{LINT_CLI} is not built: run tools/build.sh first (or set NCCL_MIGRATE_LINT_CLI)"
    return LINT_CLI


def _run(cli, *args, timeout=300, cwd=None):
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=dict(os.environ, JOB_STEPS="2"))


def _findings(cli, path):
    done = _run(cli, "lint", "--format", "json", path)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)["findings"]


@pytest.fixture
def fixed_copy(lint_cli, tmp_path):
    copy = tmp_path / "migrating"
    shutil.copytree(EXAMPLE, copy)
    done = _run(lint_cli, "lint", "--fix", "--unsafe-fixes", ".", cwd=copy)
    assert done.returncode in (0, 1), done.stderr
    return copy


def test_lint_finds_every_hazard_of_the_example(lint_cli):
    found = {(os.path.basename(f["path"]), f["code"]) for f in _findings(lint_cli, EXAMPLE)}
    assert found >= {
        ("grad_sync.py", "NM201"),        # isinstance against the legacy class
        ("grad_sync.py", "NM202"),        # name() == "nccl"
        ("parallel_state.py", "NM401"),   # create_group, a multi-line wrapper, in loops
        ("launch.sh", "NM501"),           # TORCH_DIST_USE_NCCL2=0
        ("launch.sh", "NM301"),           # backend:cudaMallocAsync
    }, found


def test_the_fix_leaves_only_what_has_no_mechanical_remedy(lint_cli, fixed_copy):
    left = {(os.path.basename(f["path"]), f["code"]) for f in _findings(lint_cli, str(fixed_copy))}
    assert left == {("parallel_state.py", "NM401")}, left
    for name in ("grad_sync.py", "parallel_state.py", "train.py"):
        py_compile.compile(str(fixed_copy / name), doraise=True)
    launch = (fixed_copy / "launch.sh").read_text()
    assert "TORCH_DIST_USE_NCCL2" not in launch and "cudaMallocAsync" not in launch
    assert "expandable_segments:True" in launch, "the rest of the allocator setting is kept"
    assert subprocess.run(["bash", "-n", str(fixed_copy / "launch.sh")]).returncode == 0


def test_a_second_fix_changes_nothing(lint_cli, fixed_copy):
    before = {p.name: p.read_text() for p in fixed_copy.iterdir() if p.is_file()}
    done = _run(lint_cli, "lint", "--fix", "--unsafe-fixes", ".", cwd=fixed_copy)
    assert done.returncode in (0, 1), done.stderr
    assert {p.name: p.read_text() for p in fixed_copy.iterdir() if p.is_file()} == before


@requires_torch("backend_plugins")
def test_ab_finds_the_job_divergent_before_the_fix_and_identical_after(cli, fixed_copy):
    before = _run(cli, "ab", "--timeout", "240", "--", os.path.join(EXAMPLE, "train.py"))
    assert before.returncode == 1, before.stdout + before.stderr
    assert "a different call" in before.stdout + before.stderr
    after = _run(cli, "ab", "--timeout", "240", "--", str(fixed_copy / "train.py"))
    assert after.returncode == 0, after.stdout + after.stderr
