"""What `import nccl_migrate` says when its native module cannot load: a copy of the package
without the module, its build record naming this torch (an unfinished build) or another
release, imported in a fresh interpreter."""

import json
import os
import shutil
import subprocess
import sys

import torch

PACKAGE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "python", "nccl_migrate")


def _import_without_module(tmp_path, built_for: "str | None") -> subprocess.CompletedProcess:
    copy = tmp_path / "nccl_migrate"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("_C.*", "__pycache__", "torch_build.json"))
    if built_for is not None:
        (copy / "torch_build.json").write_text(json.dumps({"torch": built_for}))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tmp_path)
    return subprocess.run([sys.executable, "-c", "import nccl_migrate"], env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_build_that_recorded_this_torch_but_made_no_module_says_not_built(tmp_path):
    done = _import_without_module(tmp_path, torch.__version__)
    assert done.returncode != 0
    assert "nccl_migrate's native module is not built" in done.stderr
    assert "tools/build.sh" in done.stderr
    assert "another ABI" not in done.stderr


def test_a_module_never_built_says_not_built(tmp_path):
    done = _import_without_module(tmp_path, None)
    assert done.returncode != 0 and "nccl_migrate's native module is not built" in done.stderr


def test_a_build_for_another_release_names_both_torches(tmp_path):
    other = "2.13.0+cu130" if torch.__version__.startswith("2.11.") else "2.11.0+cu130"  # not this torch's
    done = _import_without_module(tmp_path, other)
    assert done.returncode != 0
    assert f"was built for torch {other}, but this Python runs torch {torch.__version__}" in done.stderr
    assert f"or install torch {other.split('+')[0]}, which it was built for" in done.stderr
