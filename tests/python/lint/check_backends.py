"""Runs each function of a module of isinstance checks on stand-ins for every kind of backend
and prints what it returned, as JSON: run under each torch by test_lint_fixed_isinstance.py.

    python check_backends.py MODULE.py
"""

import importlib.util
import json
import sys
from unittest import mock

import torch
import torch.distributed as dist

c10d = torch._C._distributed_c10d


def backend_named(name):
    """A backend as torch hands the toolkit's to Python: its Backend binding, name() telling
    which behaviour it runs."""
    backend = mock.Mock(spec=c10d.Backend)
    backend.name.return_value = name
    return backend


def stand_ins():
    nccl = {"torch ProcessGroupNCCL": mock.Mock(spec=dist.ProcessGroupNCCL)}
    for cls in ("ProcessGroupNCCL2", "ProcessGroupNCCLLazy"):
        if hasattr(dist, cls):
            nccl[f"torch {cls}"] = mock.Mock(spec=getattr(dist, cls))
    for name in ("nccl", "nccl2", "nccl-lazy"):
        nccl[f"toolkit backend {name}"] = backend_named(name)
    gloo = mock.Mock(spec=dist.ProcessGroupGloo)
    gloo.name.return_value = "gloo"
    other = {"torch ProcessGroupGloo": gloo, "toolkit backend gloo": backend_named("gloo"), "not a backend": object()}
    return nccl, other


def main(path):
    spec = importlib.util.spec_from_file_location("checks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    checks = {name: f for name, f in vars(module).items() if callable(f) and getattr(f, "__module__", "") == "checks"
              and not isinstance(f, type)}
    nccl, other = stand_ins()
    results = {
        "torch": torch.__version__,
        "nccl": {check: {kind: bool(f(obj)) for kind, obj in nccl.items()} for check, f in checks.items()},
        "other": {check: {kind: bool(f(obj)) for kind, obj in other.items()} for check, f in checks.items()},
    }
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1])
