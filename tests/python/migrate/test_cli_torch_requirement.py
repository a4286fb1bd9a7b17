"""The torch-side commands in a Python without torch: one line naming what to install, exit 2,
before anything imports torch (python/nccl_migrate_launcher.py)."""

import os
import subprocess
import sys
import venv

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLI = os.environ.get("NCCL_MIGRATE_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))


@pytest.fixture(scope="module")
def python_without_torch(tmp_path_factory):
    where = tmp_path_factory.mktemp("no-torch")
    venv.EnvBuilder(with_pip=False).create(where)
    python = os.path.join(where, "bin", "python")
    assert subprocess.run([python, "-c", "import torch"], capture_output=True).returncode != 0
    return python


@pytest.mark.parametrize("command", ["doctor", "ab", "run", "fr"])
def test_a_python_without_torch_is_told_what_to_install(python_without_torch, command):
    assert os.access(CLI, os.X_OK), f"{CLI} is not built: run tools/build.sh first (or set NCCL_MIGRATE_CLI)"
    done = subprocess.run([CLI, command], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, NCCL_MIGRATE_PYTHON=python_without_torch))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"nccl-migrate {command}: torch is not installed for {python_without_torch}")
    assert 'pip install "nccl-migrate[torch]"' in lines[0]
    import torch
    assert f"torch {torch.__version__}" in lines[0]
