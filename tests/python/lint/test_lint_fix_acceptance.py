"""tools/lint_fix_acceptance.py on a small project of its own (fix_acceptance_tree: a wrapper,
aliases of the legacy class, isinstance and name() checks, ruff's line length 100): the real CLI's
fixes pass every check, and a CLI whose fixes are broken in one way each fails the check for it,
naming the file and line."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from lint_cli import CLI, HERE, ROOT

TOOL = os.path.join(ROOT, "tools", "lint_fix_acceptance.py")
TREE = os.path.join(HERE, "fix_acceptance_tree")


def accept(*args, cli=CLI, torch=True):
    assert os.access(CLI, os.X_OK), f"{CLI} is not built: run tools/build.sh first (or set NCCL_MIGRATE_LINT_CLI)"
    pythons = ["--python", sys.executable] if torch else ["--no-torch"]
    done = subprocess.run([sys.executable, TOOL, "--cli", cli, *pythons, "--json", "-", *args],
                          capture_output=True, text=True, timeout=300, check=False)
    report = json.loads(done.stdout) if done.stdout.strip() else None
    return done, report


def snapshot(root):
    files = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                files[os.path.relpath(os.path.join(folder, name), root)] = f.read()
    return files


def test_the_real_fixes_pass_and_the_tree_is_left_as_it_was():
    before = snapshot(TREE)
    done, report = accept(TREE)
    assert done.returncode == 0, done.stderr
    assert snapshot(TREE) == before
    (tree,) = report["trees"]
    assert tree["files_fixed"] == ["trainer/overlap.py", "trainer/parallel/groups.py"]
    assert tree["fixes_applied"] == 6 and tree["findings_with_fixes"] == 6
    assert tree["failures"] == [] and tree["not_checked"] == []
    passed = tree["checks_passed"]
    assert {"compiles": 2, "idempotent": 1, "line-length": 2, "ruff-format": 2, "untouched": 2}.items() <= passed.items()
    assert passed["torch"] == 6, "four isinstance checks and two name() tests, under this torch"
    assert "[lint-fix-acceptance] " in done.stderr and "6 fixes applied to 2 files" in done.stderr


def test_without_torch_the_checks_are_reported_as_not_run():
    done, report = accept(TREE, torch=False)
    assert done.returncode == 0, done.stderr
    assert report["trees"][0]["not_checked"] == ["torch: the fixed checks were not run (--no-torch)"]
    assert "torch" not in report["trees"][0]["checks_passed"]


# Each sabotage runs after the real --fix, so that the fixes are real and one thing is wrong: the
# check that must fail, and the line it must name (in the fixed file).
BROKEN_FIXERS = {
    "long-line": (
        (
            "text = text.replace('return _is_nccl_backend(cuda_backend(group))', "
            "'return _is_nccl_backend(cuda_backend(group), (' + ', '.join(['int'] * 40) + ',))', 1)"
        ),
        "line-length", "trainer/parallel/groups.py", 41, "columns, over the line length 100",
    ),
    "second-fix-changes-more": ("text = text + '\\n'", "idempotent", "trainer/overlap.py", None, "second"),
    "edit-outside-the-fix": (
        "text = text.replace('logger = logging.getLogger(__name__)', 'logger = logging.getLogger(\"t\")')",
        "untouched", "trainer/overlap.py", 30, "no fix edits",
    ),
    "not-ruff-format": (
        "text = text.replace('_is_nccl_backend(backend)', '_is_nccl_backend( backend )')",
        "ruff-format", "trainer/overlap.py", 36, "ruff format writes this fixed line otherwise",
    ),
    "wrong-helper": (
        "text = text.replace('nccl_names = \"nccl\", \"nccl2\", \"nccl-lazy\"', 'nccl_names = \"nccl\", \"nccl-lazy\"')",
        "torch", "trainer/parallel/groups.py", 41, "for backend named nccl2, want True",
    ),
    "syntax": (
        "text = text.replace('return _is_nccl_backend(cuda_backend(group))', 'return _is_nccl_backend(cuda_backend(group)')",
        "compiles", "trainer/parallel/groups.py", None, "does not compile",
    ),
}


def broken_cli(tmp_path, sabotage):
    """A CLI that runs the real one, then breaks what --fix wrote (each file holding the helper)."""
    path = tmp_path / "broken-nccl-migrate"
    path.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import os, subprocess, sys
        done = subprocess.run([{CLI!r}, *sys.argv[1:]])
        if "--fix" in sys.argv:
            for folder, _, names in os.walk(sys.argv[-1]):
                for name in names:
                    if not name.endswith(".py"):
                        continue
                    with open(os.path.join(folder, name)) as f:
                        text = f.read()
                    if "def _is_nccl_backend(" not in text:
                        continue
                    {sabotage}
                    with open(os.path.join(folder, name), "w") as f:
                        f.write(text)
        sys.exit(done.returncode)
        """))
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("broken", sorted(BROKEN_FIXERS))
def test_a_broken_fix_fails_the_check_for_it(tmp_path, broken):
    sabotage, check, rel, line, words = BROKEN_FIXERS[broken]
    # torch is imported (seconds) only where the broken fix is one that torch shows.
    done, report = accept(TREE, cli=broken_cli(tmp_path, sabotage), torch=check == "torch")
    assert done.returncode == 1, done.stderr
    assert report["passed"] is False
    failures = [f for f in report["trees"][0]["failures"] if f["check"] == check and f["path"] == rel]
    assert failures, f"no {check} failure in {rel}: {report['trees'][0]['failures']}"
    failure = failures[0]
    assert line is None or failure["line"] == line, failure
    assert words in failure["what"], failure
    assert f"FAIL {rel}:{failure['line']}: [{check}]" in done.stderr


def test_bad_usage_says_what_is_wrong(tmp_path):
    done, _ = accept(str(tmp_path / "missing"))
    assert done.returncode == 2
    assert "missing is not a folder" in done.stderr
    done, _ = accept(TREE, cli=str(tmp_path / "no-cli"))
    assert done.returncode == 2
    assert "no-cli is not an executable: build it (tools/build.sh) or pass --cli PATH" in done.stderr
    done = subprocess.run([sys.executable, TOOL, "--cli", CLI, "--python", str(tmp_path / "py"), TREE],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "py does not exist" in done.stderr


def test_the_tool_reads_the_line_length_as_the_fixes_do(tmp_path):
    """The order docs/lint.md states: the nearest folder's ruff, black or flake8 setting, a ruff
    file without one meaning 88; the tree's own pyproject.toml gives 100."""
    sys.path.insert(0, os.path.dirname(TOOL))
    try:
        import lint_fix_acceptance as tool
    finally:
        sys.path.pop(0)
    assert tool.line_length(os.path.join(TREE, "trainer", "overlap.py"))[0] == 100
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline_length = 100\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "setup.cfg").write_text("[flake8]\nmax-line-length = 79\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "pyproject.toml").write_text("[tool.ruff.lint]\nselect = ['E']\n[tool.black]\nline-length = 100\n")
    assert tool.line_length(str(tmp_path / "x.py"))[0] == 100
    assert tool.line_length(str(tmp_path / "a" / "x.py"))[0] == 79
    assert tool.line_length(str(tmp_path / "b" / "x.py"))[0] == 88
