"""Loads the native module, with a fix-it message when the build is missing."""

import atexit

import torch  # noqa: F401  (loads libtorch and torch_python before our module links to them)

try:
    from . import _C as native
except ImportError as error:  # pragma: no cover - exercised only on a broken install
    raise ImportError(
        f"nccl_migrate's native module is not built ({error}). "
        "Build it with tools/build.sh (or cmake --build build) first."
    ) from error

# Pending works hold tensors whose Python objects can be released only while the interpreter
# lives; atexit hooks run before it starts tearing down (backends/src/common/exit_gate.h).
atexit.register(native.prepare_for_exit)

__all__ = ["native"]
