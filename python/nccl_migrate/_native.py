"""Loads the native module, with a fix-it message when it is missing or was built for another torch.

The module is built against one torch release, which the build records beside it
(torch_build.json, python/CMakeLists.txt). Loaded into another torch, it fails with undefined
symbols at best and crashes at worst, so the recorded release is compared with the running
torch before the module is loaded, and a module that still fails to load is reported with both
versions and the command that rebuilds it."""

import atexit
import importlib.metadata
import json
import os
import sys

import torch  # noqa: F401  (loads libtorch and torch_python before our module links to them)

from ._version import __version__

BUILD_INFO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_build.json")


def _release(version: str) -> str:
    """2.15.0+cu130 -> 2.15.0: local builds of one release share its ABI."""
    return version.split("+", 1)[0]


def built_for_torch() -> "str | None":
    """The torch version the native module was built against, or None when no build recorded one."""
    try:
        with open(BUILD_INFO, encoding="utf-8") as f:
            return str(json.load(f)["torch"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _installed_by_pip() -> bool:
    """True when this package came from a wheel or the sdist (pip records itself as the installer),
    False for a source tree's build, whose package directory only carries entry-point metadata."""
    try:
        return importlib.metadata.distribution("nccl-migrate").read_text("INSTALLER") is not None
    except importlib.metadata.PackageNotFoundError:
        return False


def rebuild_command() -> str:
    """The command that builds the native module against the torch this interpreter runs."""
    if not _installed_by_pip():
        return ("rebuild it with this environment's torch: tools/build.sh in the source tree (or cmake --build "
                "on the build directory this package directory belongs to)")
    # --no-build-isolation: the build must see the installed torch; --no-binary: otherwise pip takes
    # a wheel (built for another torch); --no-deps: keep this torch; --no-cache-dir: a wheel pip built
    # from the sdist earlier, against another torch, must not be reused.
    return (f"rebuild it against this torch (needs a C++ compiler): {sys.executable} -m pip install scikit-build-core "
            f"cmake ninja \"cuda-toolkit[crt,cccl]\" && {sys.executable} -m pip install --no-build-isolation --no-binary nccl-migrate "
            f"--no-cache-dir --force-reinstall --no-deps \"nccl-migrate=={__version__}\"")


def mismatch_message(built_for: str, running: str, detail: str = "") -> str:
    """One message naming both torch versions and the command that fixes the mismatch."""
    because = f" ({detail})" if detail else ""
    if _release(built_for) != _release(running):
        what = (f"nccl_migrate's native module was built for torch {built_for}, but this Python runs "
                f"torch {running}{because}")
        alternative = f"; or install torch {_release(built_for)}, which it was built for"
    else:
        what = (f"nccl_migrate's native module, built for torch {built_for}, does not load into this Python's "
                f"torch {running}, a build of the same release with another ABI{because}")
        alternative = ""
    return f"{what}. To fix: {rebuild_command()}{alternative}"


def _module_file_present() -> bool:
    """Whether the native module's file (_C.<platform tag>.so) is beside this one."""
    directory = os.path.dirname(BUILD_INFO)
    return any(name.startswith("_C.") and name.endswith(".so") for name in os.listdir(directory))


def _load():
    built_for = built_for_torch()
    running = torch.__version__
    if built_for is not None and _release(built_for) != _release(running):
        raise ImportError(mismatch_message(built_for, running))
    try:
        from . import _C
    except ImportError as error:
        # The build records torch_build.json when it configures, before the module links: a
        # directory with the record and no module is an unfinished build, not another ABI.
        if built_for is None or not _module_file_present():
            raise ImportError(
                f"nccl_migrate's native module is not built ({error}). "
                "Build it with tools/build.sh (or cmake --build build) first."
            ) from error
        raise ImportError(mismatch_message(built_for, running, str(error))) from None
    return _C


native = _load()

# Pending works hold tensors whose Python objects can be released only while the interpreter
# lives; atexit hooks run before it starts tearing down (backends/src/common/exit_gate.h).
atexit.register(native.prepare_for_exit)

__all__ = ["native"]
