"""The lint CLI these tests drive, found as the other CLI tests find it, and the torch
installations to check fixed code against."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# The main build's CLI, which has the lint side, also where NCCL_MIGRATE_CLI names a build without
# it (tools/check-torch211.sh builds the torch side alone): the fixes are checked against another
# torch by the interpreters below, not by the CLI that wrote them.
CLI = os.environ.get("NCCL_MIGRATE_LINT_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))
HERE = os.path.dirname(os.path.abspath(__file__))

# Each torch the fixes must work with: this interpreter's (the .venv, torch 2.15), and torch 2.11
# in .venv-torch211 where a machine has it. A missing one is a reported skip, never a silent one.
TORCH_ENVIRONMENTS = {
    "this interpreter": sys.executable,
    "torch 2.11 (.venv-torch211)": os.path.join(ROOT, ".venv-torch211", "bin", "python"),
}


def lint(*args, timeout=120):
    assert os.access(CLI, os.X_OK), f"{CLI} is not built: run tools/build.sh first (or set NCCL_MIGRATE_LINT_CLI)"
    return subprocess.run([CLI, "lint", *args], capture_output=True, text=True, timeout=timeout)


def torch_of(python):
    """The torch version and its include directories under `python`, or None without torch."""
    script = (
        "import json, torch, torch.utils.cpp_extension as ext\n"
        "print(json.dumps({'version': torch.__version__, 'include': ext.include_paths()}))\n"
    )
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])
