"""Where the bench programs, the harnesses and the tests import nccl_migrate from
(tools/_tree_package.py): the source tree's package, unless PYTHONPATH names a directory holding
another build's package, which it must not shadow. Checked in fresh interpreters, as a program
or a spawned rank starts: importing a bench program (bench/group_creation.py) or the GPU check
(tests/gpu/gpu_check.py), then asking where `import nccl_migrate` would load from."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# A program's own folder is first on its sys.path, as when it is run: each finds tools/ itself.
PROGRAMS = [(os.path.join(ROOT, "bench"), "group_creation"), (os.path.join(ROOT, "tests", "gpu"), "gpu_check")]
WHERE = ("import sys; sys.path.insert(0, {folder!r}); import {module}, importlib.util; "
         "print(importlib.util.find_spec('nccl_migrate').origin)")


@pytest.fixture(params=PROGRAMS, ids=[module for _, module in PROGRAMS])
def program(request):
    return request.param


def _origin_after_importing(program, pythonpath: str) -> str:
    folder, module = program
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run([sys.executable, "-c", WHERE.format(folder=folder, module=module)], env=env, cwd="/",
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _another_build(tmp_path) -> str:
    package = tmp_path / "other-build" / "nccl_migrate"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    return str(package.parent)


def test_a_package_named_by_pythonpath_is_not_shadowed_by_the_trees(program, tmp_path):
    other = _another_build(tmp_path)
    assert _origin_after_importing(program, other) == os.path.join(other, "nccl_migrate", "__init__.py")


def test_without_one_the_trees_package_is_used(program, tmp_path):
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    assert _origin_after_importing(program, str(unrelated)) == os.path.join(ROOT, "python", "nccl_migrate", "__init__.py")


def test_the_package_named_is_the_first_pythonpath_entry_that_holds_one(tmp_path, monkeypatch):
    from _tree_package import (
        package_named_by_pythonpath,  # tools/ is on the path (conftest.py)
    )

    other = _another_build(tmp_path)
    assert package_named_by_pythonpath(os.pathsep.join(["", str(tmp_path), other])) == other
    assert package_named_by_pythonpath(str(tmp_path)) is None
    assert package_named_by_pythonpath("") is None
    monkeypatch.chdir(tmp_path)  # a relative entry is read as Python reads it: against the directory
    assert package_named_by_pythonpath("other-build") == other


def test_the_trees_package_goes_first_even_where_a_pth_file_appended_it(monkeypatch):
    import _tree_package

    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setattr(sys, "path", ["/site-packages", _tree_package.TREE_PACKAGE_DIR])
    _tree_package.use_tree_package()
    assert sys.path == [_tree_package.TREE_PACKAGE_DIR, "/site-packages"]


def test_a_child_gets_the_same_choice(tmp_path, monkeypatch):
    import _tree_package

    other = _another_build(tmp_path)
    monkeypatch.setenv("PYTHONPATH", other)
    assert _tree_package.child_pythonpath() == other
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert _tree_package.child_pythonpath() == os.pathsep.join([_tree_package.TREE_PACKAGE_DIR, str(tmp_path)])
