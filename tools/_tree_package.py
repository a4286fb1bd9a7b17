"""Where the bench programs, the test harnesses (tests/gpu/, tests/faults/) and the Python tests
import nccl_migrate from: the source tree's package directory (python/, where tools/build.sh
puts the native module), unless PYTHONPATH already names a directory holding a package of its
own. Such a directory is another build's (build-torch211/python, one per torch version through
NCCL_MIGRATE_PACKAGE_OUTPUT_DIR), and the in-tree package, built for another torch, must not
shadow it: a child process started by multiprocessing's spawn inherits this sys.path and would
otherwise import the wrong build.

A module, not a command: it lives in tools/ because bench/ and tests/ both import it and neither
should import the other's files; it imports nothing of the project's."""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREE_PACKAGE_DIR = os.path.join(ROOT, "python")


def package_named_by_pythonpath(pythonpath: str | None = None) -> str | None:
    """The first PYTHONPATH entry that holds an nccl_migrate package (made absolute, as Python
    makes sys.path's entries at start), or None."""
    value = os.environ.get("PYTHONPATH", "") if pythonpath is None else pythonpath
    entries = (os.path.abspath(p) for p in value.split(os.pathsep) if p)
    return next((p for p in entries if os.path.isdir(os.path.join(p, "nccl_migrate"))), None)


def use_tree_package() -> None:
    """Puts the source tree's package first on sys.path, unless PYTHONPATH names another. First,
    not merely present: tools/setup.sh's .pth file appends it after site-packages, where an
    installed nccl_migrate would shadow the tree's."""
    if package_named_by_pythonpath() is None and sys.path[:1] != [TREE_PACKAGE_DIR]:
        while TREE_PACKAGE_DIR in sys.path:
            sys.path.remove(TREE_PACKAGE_DIR)
        sys.path.insert(0, TREE_PACKAGE_DIR)


def child_pythonpath() -> str:
    """PYTHONPATH for a Python child process started with its own environment: the same choice."""
    existing = os.environ.get("PYTHONPATH", "")
    if package_named_by_pythonpath(existing) is not None:
        return existing
    return os.pathsep.join(p for p in [TREE_PACKAGE_DIR, existing] if p)
