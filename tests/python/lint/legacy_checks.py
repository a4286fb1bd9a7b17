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
    return isinstance(backend, dist.ProcessGroupNCCL)


def bare_name(backend):
    return isinstance(backend, ProcessGroupNCCL)


def in_tuple(backend):
    return isinstance(backend, (Unrelated, torch.distributed.ProcessGroupNCCL))


def negated(backend):
    if not isinstance(backend, dist.ProcessGroupNCCL):
        return False
    return True


def multi_line(backend):
    return bool(
        backend is not None
        and isinstance(
            backend,  # the group's CUDA backend
            dist.ProcessGroupNCCL,
        )
    )
