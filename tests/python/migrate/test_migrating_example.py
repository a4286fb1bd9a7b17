"""The example of docs/migrating.md through the real binary, in detail the guide's own test
(test_migrating_guide.py, which also runs its A/B steps) does not show: lint finds each of the
example's hazards, `--fix --unsafe-fixes` rewrites what has a mechanical remedy into code that
compiles, and a second run changes nothing."""

import json
import os
import py_compile
import shutil
import subprocess

import pytest


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# The main build's CLI (a build of the torch side alone has no lint).
LINT_CLI = os.environ.get("NCCL_MIGRATE_LINT_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))
EXAMPLE = os.path.join(ROOT, "examples", "migrating")


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
