"""isinstance checks against the legacy class, as jobs write them.

`nccl-migrate lint --fix --unsafe-fixes --select NM201` turns this file into
legacy_checks_fixed.py (tests/lint/fix_legacy_class_check_test.cc holds the two together;
test_lint_fixed_isinstance.py runs both).
"""

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroupNCCL


class Unrelated:
    pass


def plain(backend):
    return (lambda obj, classes, c10d=__import__("torch")._C._distributed_c10d: isinstance(obj, (classes, getattr(c10d, "ProcessGroupNCCL2", ()), getattr(c10d, "ProcessGroupNCCLLazy", ()))) or (isinstance(obj, c10d.Backend) and obj.name() in ("nccl", "nccl2", "nccl-lazy")))(backend, dist.ProcessGroupNCCL)


def bare_name(backend):
    return (lambda obj, classes, c10d=__import__("torch")._C._distributed_c10d: isinstance(obj, (classes, getattr(c10d, "ProcessGroupNCCL2", ()), getattr(c10d, "ProcessGroupNCCLLazy", ()))) or (isinstance(obj, c10d.Backend) and obj.name() in ("nccl", "nccl2", "nccl-lazy")))(backend, ProcessGroupNCCL)


def in_tuple(backend):
    return (lambda obj, classes, c10d=__import__("torch")._C._distributed_c10d: isinstance(obj, (classes, getattr(c10d, "ProcessGroupNCCL2", ()), getattr(c10d, "ProcessGroupNCCLLazy", ()))) or (isinstance(obj, c10d.Backend) and obj.name() in ("nccl", "nccl2", "nccl-lazy")))(backend, (Unrelated, torch.distributed.ProcessGroupNCCL))


def negated(backend):
    if not (lambda obj, classes, c10d=__import__("torch")._C._distributed_c10d: isinstance(obj, (classes, getattr(c10d, "ProcessGroupNCCL2", ()), getattr(c10d, "ProcessGroupNCCLLazy", ()))) or (isinstance(obj, c10d.Backend) and obj.name() in ("nccl", "nccl2", "nccl-lazy")))(backend, dist.ProcessGroupNCCL):
        return False
    return True


def multi_line(backend):
    return bool(
        backend is not None
        and (lambda obj, classes, c10d=__import__("torch")._C._distributed_c10d: isinstance(obj, (classes, getattr(c10d, "ProcessGroupNCCL2", ()), getattr(c10d, "ProcessGroupNCCLLazy", ()))) or (isinstance(obj, c10d.Backend) and obj.name() in ("nccl", "nccl2", "nccl-lazy")))(
            backend,  # the group's CUDA backend
            dist.ProcessGroupNCCL,
        )
    )
