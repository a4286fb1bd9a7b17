"""Shared pytest setup: the in-tree package on sys.path and real multi-process runs."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A build with its own package directory (NCCL_MIGRATE_PACKAGE_OUTPUT_DIR, e.g. one per torch
# version) is tested by naming that directory on PYTHONPATH; the in-tree package must not shadow it.
if not any(os.path.isdir(os.path.join(p, "nccl_migrate")) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p):
    sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
