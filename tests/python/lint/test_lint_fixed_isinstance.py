"""NM201's Python fix, run: the rewritten isinstance checks hold for every backend that runs
NCCL (torch's ProcessGroupNCCL, ProcessGroupNCCL2 and ProcessGroupNCCLLazy where torch has them,
the toolkit's backends by name()) and for nothing else, under each torch this machine has."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from lint_cli import HERE, TORCH_ENVIRONMENTS, lint, torch_of

ORIGINAL = os.path.join(HERE, "legacy_checks.py")
FIXED = os.path.join(HERE, "legacy_checks_fixed.py")  # what the fix writes: tests/lint/fix_legacy_class_check_test.cc


def _results(python, module):
    done = subprocess.run([python, os.path.join(HERE, "check_backends.py"), module], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _python(environment):
    python = TORCH_ENVIRONMENTS[environment]
    if not os.access(python, os.X_OK):
        pytest.skip(f"{environment}: {python} does not exist on this machine, so this torch is not checked")
    if torch_of(python) is None:
        pytest.skip(f"{environment}: {python} has no importable torch")
    return python


@pytest.mark.parametrize("environment", sorted(TORCH_ENVIRONMENTS))
def test_fixed_checks_hold_for_every_nccl_backend_and_no_other(environment):
    results = _results(_python(environment), FIXED)
    print(f"{environment}: torch {results['torch']}, NCCL stand-ins: {sorted(next(iter(results['nccl'].values())))}")
    for check, by_kind in results["nccl"].items():
        assert all(by_kind.values()), f"torch {results['torch']}: {check} is False for {by_kind}"
    for check, by_kind in results["other"].items():
        assert not any(by_kind.values()), f"torch {results['torch']}: {check} is True for {by_kind}"


@pytest.mark.parametrize("environment", sorted(TORCH_ENVIRONMENTS))
def test_the_original_checks_miss_the_rewritten_backends(environment):
    """What the fix is for: unfixed, the same checks are False for the rewritten backends."""
    results = _results(_python(environment), ORIGINAL)
    for check, by_kind in results["nccl"].items():
        assert by_kind["torch ProcessGroupNCCL"], check
        assert not by_kind["toolkit backend nccl2"], check


def test_cli_fixes_isinstance_end_to_end(tmp_path):
    path = str(tmp_path / "legacy_checks.py")
    shutil.copy(ORIGINAL, path)
    lint("--fix", "--unsafe-fixes", "--select", "NM201", path)
    with open(path) as f:
        text = f.read()
    with open(FIXED) as f:
        assert text == f.read()
    lint("--fix", "--unsafe-fixes", "--select", "NM201", path)
    with open(path) as f:
        assert f.read() == text, "a second --fix changed the file"


def test_fixed_module_runs_where_torch_lacks_the_rewritten_classes(tmp_path):
    """torch 2.11 has neither ProcessGroupNCCL2 nor ProcessGroupNCCLLazy: with both taken out of
    this torch, the module the fix wrote still imports, and its checks still recognise the legacy
    class and the toolkit's backends (by name()) and nothing else."""
    path = str(tmp_path / "legacy_checks.py")
    shutil.copy(ORIGINAL, path)
    lint("--fix", "--unsafe-fixes", "--select", "NM201", path)
    with open(path) as f:
        assert "def _is_nccl_backend(" in f.read()
    script = (
        "import runpy, sys, torch, torch.distributed as dist\n"
        "from torch._C import _distributed_c10d as c10d\n"
        "for name in ('ProcessGroupNCCL2', 'ProcessGroupNCCLLazy'):\n"
        "    for module in (c10d, dist):\n"
        "        if hasattr(module, name):\n"
        "            delattr(module, name)\n"
        "sys.argv = ['check_backends.py', sys.argv[1]]\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    done = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, timeout=300,
                          cwd=HERE, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for check, by_kind in results["nccl"].items():
        assert "torch ProcessGroupNCCL2" not in by_kind
        assert all(by_kind.values()), f"{check} is False for {by_kind}"
    for check, by_kind in results["other"].items():
        assert not any(by_kind.values()), f"{check} is True for {by_kind}"
