"""What this torch offers the toolkit and what it lacks.

Two sources: the build's table (``_C.torch_features()``, read from torch's headers when the
native module was configured; what torch lacks there was compiled out) and what only torch's
Python API tells, checked here at run time. The toolkit supports torch 2.11 through 2.15; older
releases lack some features, which ``nccl-migrate doctor`` lists and tests skip, naming them.
"""

from __future__ import annotations

import inspect

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from ._native import native


def _split_group_on_cpu() -> bool:
    # Newer torch picks the parent's backend by the group's device types, CPU included; older
    # torch always splits the CUDA backend and needs a device-bound default group. No public
    # flag tells them apart, the function's text does.
    try:
        return "_device_types" in inspect.getsource(c10d.split_group)
    except (OSError, TypeError):
        return False


def _cpu_device_id() -> bool:
    # Older torch refuses a CPU device_id in init_process_group ("must be an accelerator with an
    # index"); no flag says whether this one does, the group-creation function's text does.
    try:
        return "must be an accelerator with an index" not in inspect.getsource(c10d._new_process_group_helper)
    except (AttributeError, OSError, TypeError):
        return False


def hands_backends_their_group() -> bool:
    """Whether torch passes a backend creator the group it creates (``process_group`` in
    ``_DistributedBackendOptions``): the group's bound device reaches the creator that way. Older
    torch (2.11) sets the bound device on the group before calling the creator but passes it no
    group; the toolkit then reads it from the group torch is creating (``_registration``)."""
    try:
        return hasattr(c10d._DistributedBackendOptions(), "process_group")
    except (AttributeError, TypeError):
        return False


def _python_side() -> dict:
    return {
        "backend_options_process_group": {
            "present": hands_backends_their_group(),
            "kind": "adapted",
            "what": "torch hands a backend creator the group it creates, and with it the device the job bound it "
                    "to (init_process_group(device_id=...), and new_group / DeviceMesh groups of a bound world); "
                    "without it the toolkit reads the device from the group torch is creating",
        },
        "cpu_device_id": {
            "present": _cpu_device_id(),
            "kind": "feature",
            "what": "init_process_group(device_id=torch.device('cpu', N)): a group bound to the CPU, which takes "
                    "torch's device-bound paths (eager connects, group splits) without a GPU; without it torch binds "
                    "groups only to a GPU the machine has",
        },
        "backend_plugins": {
            # The entry-point loader came with the change that made torch create every backend,
            # its own names included, through Backend._plugins.
            "present": hasattr(dist.Backend, "_ensure_backend_registered"),
            "kind": "feature",
            "what": "torch creates every backend, its own names included, through registered plugins; without it "
                    "torch creates 'nccl' itself, so the shim cannot route 'nccl' to the toolkit (use the "
                    "toolkit's names, e.g. migrate-nccl2, or nccl2 / nccl-lazy / nccl-legacy, which it does route), "
                    "and the toolkit's backends are known only after import nccl_migrate or NCCL_MIGRATE_ACTIVATE=1",
        },
        "split_group_cpu": {
            "present": _split_group_on_cpu(),
            "kind": "feature",
            "what": "dist.split_group on CPU groups; without it torch splits only a CUDA backend of a default group "
                    "bound to a device",
        },
        "reduce_op_unbox": {
            "present": hasattr(dist.ReduceOp, "unbox"),
            "kind": "feature",
            "what": "ReduceOp.unbox: the ReduceOp torch's dispatcher is given read back in Python; without it an A/B "
                    "shadow run cannot know the reduce op of an op issued from C++ and replays none",
        },
        "fr_self_recording_backends": {
            "present": isinstance(getattr(c10d, "_FR_SELF_RECORDING_BACKENDS", None), set),
            "kind": "feature",
            "what": "torch.distributed's _FR_SELF_RECORDING_BACKENDS; without it torch attaches no generic "
                    "flight-recorder hook to groups, so the toolkit's backends have nothing to opt out of",
        },
    }


def features() -> dict:
    """{name: {"present": bool, "kind": "feature" | "adapted", "what": str, "source": "build" | "python"}}.

    A ``feature`` torch lacks is lost (compiled out, or absent from torch's Python API); an
    ``adapted`` one is spelled differently or missing in older torch, and the toolkit makes up for
    it."""
    table = {name: dict(row, source="build") for name, row in native.torch_features().items()}
    table.update({name: dict(row, source="python") for name, row in _python_side().items()})
    return table


def missing() -> dict:
    """{name: what} for every feature this torch lacks (adapted ones are not missing)."""
    return {name: row["what"] for name, row in features().items()
            if not row["present"] and row["kind"] == "feature"}


def has(name: str) -> bool:
    table = features()
    if name not in table:
        raise KeyError(f"unknown torch feature {name!r}; known: {', '.join(sorted(table))}")
    return table[name]["present"]


def lacks_reason(name: str) -> str:
    """Why something needing feature ``name`` cannot run here (for errors and test skips)."""
    return f"torch {torch.__version__} lacks {name}: {features()[name]['what']}"
