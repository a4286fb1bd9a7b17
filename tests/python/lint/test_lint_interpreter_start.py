"""When `lint` starts the interpreter that resolves imports leaving the tree: a run of many Python
files (a project's) starts it at once, beside the reads and parses, but uses its answer, and
reports its failure, only when the wrapper table asks; a small run starts it only when asked."""

import stat

from lint_cli import lint

CREATES_GROUPS = "import torch.distributed as dist\n\n\ndef make_{n}():\n    return dist.new_group([0])\n"
# An installed name (mypkg is not in the tree) called in a loop: the table must read its module.
CALLS_INSTALLED_IN_LOOP = (
    "import torch.distributed as dist\nfrom mypkg import make_group\n\n\ndef build():\n"
    "    for i in range(4):\n        make_group([i])\n"
)


def tree(root, files, needs_environment):
    root.mkdir()
    for n in range(files):
        (root / f"m{n}.py").write_text(CREATES_GROUPS.format(n=n))
    if needs_environment:
        (root / "loop.py").write_text(CALLS_INSTALLED_IN_LOOP)
    return root


def failing_interpreter(tmp_path):
    """An interpreter that notes it was started and prints no sys.path."""
    marker = tmp_path / "started"
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), marker


def test_a_project_that_needs_the_environment_reports_an_interpreter_that_fails(tmp_path):
    python, marker = failing_interpreter(tmp_path)
    done = lint("--python", python, str(tree(tmp_path / "project", 120, needs_environment=True)))
    assert done.returncode == 0, done.stderr  # one group per function: no hazard
    assert "no Python environment read" in done.stderr
    assert marker.exists()


def test_a_project_that_needs_none_starts_it_early_and_reports_nothing_of_it(tmp_path):
    python, marker = failing_interpreter(tmp_path)
    project = str(tree(tmp_path / "project", 120, needs_environment=False))
    done = lint("--output-format", "json", "--python", python, project)
    alone = lint("--output-format", "json", "--no-environment", project)
    assert done.returncode == alone.returncode == 0, done.stderr
    assert "no Python environment" not in done.stderr
    assert done.stdout == alone.stdout
    assert marker.exists(), "a run of 120 Python files starts the interpreter beside its reads"


def test_a_small_run_that_needs_none_never_starts_it(tmp_path):
    python, marker = failing_interpreter(tmp_path)
    done = lint("--python", python, str(tree(tmp_path / "small", 20, needs_environment=False)))
    assert done.returncode == 0, done.stderr  # one group per function: no hazard
    assert "no Python environment" not in done.stderr
    assert not marker.exists()


def test_a_small_run_that_needs_it_starts_it_when_asked(tmp_path):
    python, marker = failing_interpreter(tmp_path)
    done = lint("--python", python, str(tree(tmp_path / "small", 20, needs_environment=True)))
    assert "no Python environment read" in done.stderr
    assert marker.exists()
