"""Shared pytest setup: the in-tree package on sys.path, real multi-process runs, and nothing
written outside the suite's temporary directories (suite_home.py)."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A build with its own package directory (NCCL_MIGRATE_PACKAGE_OUTPUT_DIR, e.g. one per torch
# version) is tested by naming that directory on PYTHONPATH; tools/_tree_package.py decides, for
# the harnesses the tests import (tests/gpu/, tests/faults/) as well. Appended, so tools' modules
# shadow no test's.
sys.path.append(os.path.join(ROOT, "tools"))
from _tree_package import use_tree_package

use_tree_package()
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pytest  # noqa: E402
from suite_home import finish, start, suite_home  # noqa: E402, F401 - suite_home: every test's own HOME

# Files whose assertions bound how long real processes may take: a side's few-second timeout
# reached at a chosen op, a rank's exit, a 2 s meeting, a fault's detection time. Beside other
# workers' ranks on two cores those bounds measure the load, not the code (seen with three
# workers: test_ab_faults.py's jobs ended before their fault, test_exit_cpu.py's ranks late to a
# 2 s meeting), so tools/test.sh runs them after the parallel phase, one at a time (`-m timing`:
# 99 tests, all passing there; tests/README.md has their time).
TIMING_FILES = {
    "test_ab_faults.py", "test_exit_cpu.py", "test_failures_cpu.py", "test_fault_campaign.py",
    "test_membership_cpu.py", "test_recorder_threads.py", "test_recorder_hooks_parts.py",
}


def pytest_configure(config):
    config.addinivalue_line("markers", "timing: bounds real processes' time; run alone (tools/test.sh)")
    start(config)


def pytest_sessionfinish(session):
    finish(session)  # fails the run when the real HOME gained files while it ran (suite_home.py)


# Files holding the suite's longest tests (whole A/B runs under torchrun, the migration guide's
# every command: 30-150 s each; tests/README.md lists the ten slowest with their times). Their
# tests are handed out first (tools/test.sh: --dist load --maxschedchunk 1, which keeps two tests
# queued on each worker), so no worker starts a minutes-long test after the others have run out
# of work: the parallel phase then ends near its total work divided by the workers.
LONGEST_FIRST = (
    "test_migrating_guide.py", "test_ab_hooks.py", "test_ab_many_nodes.py", "test_side_behaviour.py",
    "test_ab_never_guess.py", "test_ab_verdict.py", "test_record_integrity.py", "test_ab_cli.py",
    "test_ab_html.py", "test_ab_path.py", "test_ab_shadow.py",
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in TIMING_FILES:
            item.add_marker(pytest.mark.timing)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
