"""The shim: one switch for every job, on every torch.

The NCCL names (``nccl``, ``nccl2``, ``nccl-lazy``, ``nccl-legacy``) and ``TORCH_DIST_USE_NCCL2``
resolve exactly as torch 2.15 resolves them; ``NCCL_MIGRATE_IMPL=auto|torch|toolkit`` then picks
torch's implementation of that behaviour or the toolkit's (see docs/shim.md for the table). The
decision itself is the C++ shim's (one implementation for C++ and Python); this module reads the
live torch and environment, and routes names when activated.

Activation is explicit: ``import nccl_migrate``, or ``NCCL_MIGRATE_ACTIVATE=1`` for jobs that
cannot be edited (read through the package's ``torch.backends`` entry point at ``import torch``),
or ``nccl-migrate run -- CMD``. Names that resolve to torch's own implementation are left exactly
as torch registered them; only names that resolve to the toolkit (or to an error) are re-routed.
"""

from __future__ import annotations

import os
import warnings
from typing import Mapping

import torch
import torch.distributed as dist

from . import torch_features
from ._native import native

NCCL_NAMES = ("nccl", "nccl2", "nccl-lazy", "nccl-legacy")
ENV_KEYS = ("TORCH_DIST_USE_NCCL2", "NCCL_MIGRATE_IMPL", "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
ACTIVATE_VARIABLE = "NCCL_MIGRATE_ACTIVATE"

_activated: dict[str, dict] | None = None


def job_settings(environ: Mapping[str, str] | None = None) -> dict:
    """The variables that decide a job's backend; None where unset."""
    environ = os.environ if environ is None else environ
    return {key: environ.get(key) for key in ENV_KEYS}


def torch_capabilities() -> dict:
    """Which NCCL behaviours this torch has built in, under which names (None: it lacks it)."""
    version = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    has_nccl = dist.is_available() and dist.is_nccl_available()
    major_minor = tuple(int(p) for p in version.split("."))
    if not has_nccl:
        return {"version": version, "legacy": None, "rewritten": None, "rewritten-lazy-p2p": None}
    return {
        "version": version,
        # nccl-legacy appeared with the rewrite (2.14); before it, "nccl" was the legacy backend.
        "legacy": ("nccl-legacy" if major_minor >= (2, 14) else "nccl") if hasattr(dist, "ProcessGroupNCCL") else None,
        "rewritten": "nccl2" if hasattr(dist, "ProcessGroupNCCL2") else None,
        "rewritten-lazy-p2p": "nccl-lazy" if hasattr(dist, "ProcessGroupNCCLLazy") else None,
    }


def gpu_present() -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def resolve(backend: str, environ: Mapping[str, str] | None = None, capabilities: dict | None = None,
            gpu: bool | None = None) -> dict:
    """How ``backend`` (init_process_group's argument) resolves here: backend, behaviour,
    implementation, reason, warnings, error."""
    return native.resolve_backend(backend, job_settings(environ), capabilities or torch_capabilities(),
                                  gpu_present() if gpu is None else gpu)


def is_active() -> bool:
    return _activated is not None


def activate() -> dict[str, dict]:
    """Routes every NCCL name the way its resolution says; returns the resolution of each name.

    Reads the variables now, once, as torch reads TORCH_DIST_USE_NCCL2 once: set them before
    activating. Calling it again returns the first result.
    """
    global _activated
    if _activated is not None:
        return _activated
    from ._registration import BACKEND_NAMES, creator_for

    behaviour_to_toolkit = {behaviour: name for name, behaviour in BACKEND_NAMES.items()}
    resolutions = {}
    for name in NCCL_NAMES:
        r = resolve(name)
        resolutions[name] = r
        for message in r["warnings"]:
            warnings.warn(f"nccl_migrate: {message}", stacklevel=2)
        if r["error"]:
            _register(name, _failing_creator(name, r["error"]))
        elif r["implementation"] == "toolkit":
            toolkit = behaviour_to_toolkit[r["behaviour"]]
            _register(name, creator_for(toolkit, requested=name))
    _activated = resolutions
    return resolutions


def nccl_not_routed_warning(torch_version: str) -> str:
    """What importing the package says on a torch that creates "nccl" itself (the CLI's launcher,
    python/nccl_migrate_launcher.py, silences it by this text for its own commands)."""
    return (f"nccl_migrate: torch {torch_version} creates 'nccl' itself, so the shim cannot route 'nccl' to the "
            "toolkit here and it stays torch's ProcessGroupNCCL; name the toolkit's backend (migrate-nccl2, "
            "migrate-lazy, migrate-legacy) or nccl2 / nccl-lazy / nccl-legacy instead")


def _register(name: str, creator) -> None:
    if name == dist.Backend.NCCL and not torch_features.has("backend_plugins"):
        # Before torch created every backend through plugins, it created "nccl" itself and never
        # looked for one registered under that name: say so rather than route nothing silently.
        warnings.warn(nccl_not_routed_warning(torch.__version__), stacklevel=3)
        return
    from ._registration import register_name

    register_name(name, creator)
    # register_backend leaves an existing device default alone; the name must win where it was
    # torch's default for the device.
    for device, current in list(dist.Backend.default_device_backend_map.items()):
        if current == name:
            dist.Backend.default_device_backend_map[device] = name


def _failing_creator(name: str, error: str):
    def create(opts, pg_options):
        raise RuntimeError(f"backend {name!r} cannot run here: {error}")

    return create
