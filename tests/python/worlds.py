"""The worlds the backend suites run in, the way jobs run.

- ``cpu``: CPU ranks, no device binding (the toolkit's CPU path over Gloo).
- ``cpu-bound``: CPU ranks each bound with ``device_id=cpu:<rank>``, as every GPU job binds its
  ranks; torch then takes its device-bound paths (group splits, eager connects).
- ``sim-bound``: each rank bound to its own simulated device (sim:<rank>); the groups' NCCL
  communicators, the same code that runs on GPUs, run over the tests' simulated device.
"""

from __future__ import annotations

import glob
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORLDS = ["cpu", "cpu-bound", "sim-bound"]

# Where the build put the simulated-device module (NCCL_MIGRATE_TEST_MODULES for another build).
SIM_MODULE_DIR = os.environ.get("NCCL_MIGRATE_TEST_MODULES", os.path.join(ROOT, "build", "tests", "backends", "python"))


def simulated_device_missing() -> str | None:
    """Why sim-bound worlds cannot run here (a build without the NCCL communicator), or None
    when they can. A build with it must have the module: its absence is a failure, not a skip."""
    if glob.glob(os.path.join(SIM_MODULE_DIR, "_nccl_migrate_sim*.so")):
        return None
    from nccl_migrate._native import native

    if native.nccl_compiled():
        raise AssertionError(f"the simulated-device module is missing from {SIM_MODULE_DIR} although this build has "
                             "the NCCL communicator: run tools/build.sh, or point NCCL_MIGRATE_TEST_MODULES at it")
    return "this build has no NCCL communicator, so no simulated device to run it on"


def world_missing(world: str) -> str | None:
    """Why `world` cannot run here, or None. Bound worlds bind their ranks with a CPU device_id,
    which older torch (2.11) refuses: its group creation binds a group to no CPU device, and its
    init_process_group binds only to a GPU the machine has, so without a GPU no world there is
    bound. test_device_binding.py runs that torch's group creation of bound groups instead."""
    if world in ("cpu-bound", "sim-bound"):
        from nccl_migrate import torch_features

        if not torch_features.has("cpu_device_id"):
            return torch_features.lacks_reason("cpu_device_id")
    return simulated_device_missing() if world == "sim-bound" else None


def register_simulated(backend: str) -> str:
    """Registers the simulated-device twin of toolkit backend `backend` in this process."""
    import torch.distributed as dist

    if SIM_MODULE_DIR not in sys.path:
        sys.path.insert(0, SIM_MODULE_DIR)
    import _nccl_migrate_sim

    from nccl_migrate._registration import creator_for, register_name

    name = "sim-" + backend.split("-", 1)[1]
    if name.upper() not in dist.Backend._plugins:
        register_name(name, creator_for(backend, requested=name, create_native=_nccl_migrate_sim.create_backend),
                      devices=["cpu"])
    return name


def init(world: str, backend: str, rank: int, size: int, store, **kwargs) -> str:
    """init_process_group for `backend` (a toolkit name) in `world`; returns the name it ran as."""
    import torch
    import torch.distributed as dist

    import nccl_migrate  # noqa: F401  (registers the toolkit's backends)

    name = backend
    if world == "sim-bound":
        name = register_simulated(backend)
    if world in ("cpu-bound", "sim-bound"):
        kwargs.setdefault("device_id", torch.device("cpu", rank))
    # No store: torchrun's env:// rendezvous (MASTER_ADDR, MASTER_PORT), as launched jobs meet.
    dist.init_process_group(name, store=store, rank=rank, world_size=size, **kwargs)
    return name
