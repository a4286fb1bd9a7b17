"""isinstance checks against the legacy class, as jobs write them.

`nccl-migrate lint --fix --unsafe-fixes --select NM201` turns this file into
legacy_checks_fixed.py (tests/lint/fix_legacy_class_check_test.cc holds the two together;
test_lint_fixed_isinstance.py runs both).
"""

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroupNCCL


def _is_nccl_backend(obj, classes=()):
    """Whether obj is a backend that runs NCCL, on any torch, or of classes."""
    from torch._C import _distributed_c10d as c10d

    names = "ProcessGroupNCCL", "ProcessGroupNCCL2", "ProcessGroupNCCLLazy"
    if isinstance(obj, (classes, *(getattr(c10d, n, ()) for n in names))):
        return True
    if not isinstance(obj, c10d.Backend):
        return False
    # The toolkit's backends reach Python as a Backend named for what it runs.
    nccl_names = "nccl", "nccl2", "nccl-lazy"
    try:
        return obj.name() in nccl_names
    except RuntimeError:  # a Backend subclass that does not name itself
        return False


class Unrelated:
    pass


def plain(backend):
    return _is_nccl_backend(backend)


def bare_name(backend):
    return _is_nccl_backend(backend)


def in_tuple(backend):
    return _is_nccl_backend(backend, (Unrelated, torch.distributed.ProcessGroupNCCL))


def negated(backend):
    if not _is_nccl_backend(backend):
        return False
    return True


def multi_line(backend):
    return bool(
        backend is not None
        and _is_nccl_backend(
            backend,  # the group's CUDA backend
            dist.ProcessGroupNCCL,
        )
    )
