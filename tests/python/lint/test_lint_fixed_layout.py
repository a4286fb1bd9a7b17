"""NM201's Python fix, as a reviewer reads it: one helper per module after its imports, each
check a call of it, every line the fix writes within the project's line length (its ruff, black
or flake8 configuration, else 88) and as `ruff format` writes it; the fixed file compiles and a
second --fix changes nothing."""

import os
import py_compile
import shutil
import subprocess
import sys

import pytest
from lint_cli import lint

RUFF = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")

SOURCE = '''"""A job."""

import torch
import torch.distributed as dist

WORLD = 8


def short(backend):
    return isinstance(backend, dist.ProcessGroupNCCL)


def long_operand(group):
    if isinstance(group._get_backend(torch.device("cuda", torch.cuda.current_device())), dist.ProcessGroupNCCL):
        return True
    return not isinstance(group._get_backend(torch.device("cuda", torch.cuda.current_device())), (dist.ProcessGroupNCCL, int))
'''

# (config file, its text, the line length it sets, ruff's option where it does not read the file)
CONFIGS = {
    "default": (None, "", 88, []),
    "ruff pyproject": ("pyproject.toml", "[tool.ruff]\nline-length = 100\n", 100, []),
    "ruff.toml": ("ruff.toml", "line-length = 120\n", 120, []),
    "black": ("pyproject.toml", "[tool.black]\nline-length = 79\n", 79, ["--line-length", "79"]),
    "flake8": ("setup.cfg", "[metadata]\nname = x\n\n[flake8]\nmax-line-length = 80\n", 80, ["--line-length", "80"]),
}


def _ruff(*args, cwd):
    if RUFF is None:
        pytest.skip("ruff is not installed next to this interpreter")
    return subprocess.run([RUFF, *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False)


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_fixed_lines_keep_the_line_length_and_ruff_format(tmp_path, config):
    name, text, length, ruff_options = CONFIGS[config]
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    if name:
        (project / name).write_text(text)
    job = project / "pkg" / "job.py"
    job.write_text(SOURCE)
    # The input is as ruff formats it at this length, so that any difference after is the fix's.
    done = _ruff("format", "--no-cache", *ruff_options, str(job), cwd=project)
    assert done.returncode == 0, done.stderr
    before = job.read_text()
    lint("--fix", "--unsafe-fixes", "--select", "NM201", str(job))
    after = job.read_text()
    assert after != before
    py_compile.compile(str(job), doraise=True)
    assert after.count("def _is_nccl_backend(") == 1
    assert "__import__" not in after and "lambda" not in after
    assert "isinstance(backend, dist.ProcessGroupNCCL)" not in after
    assert "    return _is_nccl_backend(backend)\n" in after
    too_long = [line for line in after.splitlines() if len(line) > length]
    assert not too_long, f"lines over {length}: {too_long}"
    done = _ruff("format", "--no-cache", "--diff", *ruff_options, str(job), cwd=project)
    assert done.returncode == 0, f"ruff format would change the fixed file:\n{done.stdout}{done.stderr}"
    lint("--fix", "--unsafe-fixes", "--select", "NM201", str(job))
    assert job.read_text() == after, "a second --fix changed the file"


# A check whose fixed call is 72 columns: one line within 88, split within 60.
LONG_CHECK = (
    "import torch.distributed as dist\n\n\n"
    "def f(group):\n"
    "    return isinstance(group.backend_of_this_group_for_cuda_device, dist.ProcessGroupNCCL)\n"
)


def test_the_line_length_comes_from_the_nearest_configuration(tmp_path):
    """A folder's own configuration wins over its parent's: a subproject with its own length."""
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 200\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / ".flake8").write_text("[flake8]\nmax-line-length = 60\n")
    job = sub / "job.py"
    job.write_text(LONG_CHECK)
    lint("--fix", "--unsafe-fixes", "--select", "NM201", str(job))
    assert "    return _is_nccl_backend(\n        group.backend_of_this_group_for_cuda_device\n    )\n" in job.read_text()
    assert all(len(line) <= 60 for line in job.read_text().splitlines()[-3:])


def test_a_ruff_file_without_a_line_length_ends_the_search_at_ruffs_default(tmp_path):
    """ruff takes the nearest file that configures it and its default (88) where that file sets
    no line length; a parent's longer or shorter setting does not apply below it."""
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 60\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "ruff.toml").write_text("[lint]\nselect = ['E']\n")
    job = sub / "job.py"
    job.write_text(LONG_CHECK)
    lint("--fix", "--unsafe-fixes", "--select", "NM201", str(job))
    assert "    return _is_nccl_backend(group.backend_of_this_group_for_cuda_device)\n" in job.read_text()
