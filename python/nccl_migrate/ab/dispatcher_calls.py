"""The reduce op of an op issued from C++ (DDP's reducer, a ProcessGroup method), which torch's
ProcessGroup hooks do not carry: torch's dispatcher is given it, so a kernel of ours for those c10d
ops, registered at the Autograd key (ahead of their CPU and CUDA kernels), notes the call's
ReduceOp on this thread and passes the call on unchanged. The pre-hook that follows on the same
thread takes it when the tensors match; an op whose call was not seen (tensors made in inference
mode skip the Autograd key) has no reduce op, and is never replayed with a guessed one.

A Python kernel costs every reducing op about 25 µs, so it is installed only for --shadow, the one
mode that replays ops issued from C++ (and already runs each op twice); two runs compare digests,
which the reduce op does not change."""

from __future__ import annotations

import threading

import torch
import torch.distributed as dist

from .. import torch_features
from .op_table import OPS

# Older torch (2.11) cannot read the dispatcher's ReduceOp back in Python: no reduce op is known.
CAN_READ_REDUCE_OP = torch_features.has("reduce_op_unbox")

_last = threading.local()
below_autograd = torch._C._AutoDispatchBelowAutograd
_library = None  # the registrations live as long as this object


def _pointers(values) -> set[int]:
    found = set()
    for value in values:
        if isinstance(value, torch.Tensor):
            found.add(value.data_ptr())
        elif isinstance(value, (list, tuple)):
            found |= _pointers(value)
    return found


def _noting(name: str, position: int):
    op = getattr(torch.ops.c10d, name).default

    def noted(*args, **kwargs):
        reduce_op = kwargs["reduce_op"] if "reduce_op" in kwargs else args[position]
        _last.call = (name, _pointers(args) | _pointers(kwargs.values()), reduce_op)  # no tensor kept alive
        with below_autograd():
            return op(*args, **kwargs)

    return noted


def install() -> None:
    """Notes the reduce op of every reducing c10d op from now on (once per process)."""
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("c10d", "IMPL")
    for spec in OPS:
        if spec.dispatcher:
            schema = getattr(torch.ops.c10d, spec.dispatcher).default._schema
            position = [a.name for a in schema.arguments].index("reduce_op")
            _library.impl(spec.dispatcher, _noting(spec.dispatcher, position), "Autograd")


def reduce_op_of(dispatcher: str | None, tensors: list[torch.Tensor]):
    """The ReduceOp (torch.distributed's, PREMUL_SUM's factor included) the dispatcher was given
    for the op on ``tensors`` just issued on this thread, or None when that call was not seen or
    this torch cannot read it (``reduce_op_unbox``)."""
    call = getattr(_last, "call", None)
    _last.call = None
    if call is None or call[0] != dispatcher or not tensors or not _pointers(tensors) <= call[1]:
        return None
    return dist.ReduceOp.unbox(call[2]) if CAN_READ_REDUCE_OP else None


def forget() -> None:
    _last.call = None
