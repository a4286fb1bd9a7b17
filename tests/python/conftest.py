"""Shared pytest setup: the in-tree package on sys.path and real multi-process runs."""

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
