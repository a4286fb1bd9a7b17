"""Registration of the toolkit's backends with torch.distributed.

Each backend name maps to a behaviour the engine implements through a communicator policy.
CPU communicators are torch's own ProcessGroupGloo instances, created here because the torch
wheel ships no Gloo headers; the engine only ever talks to them through c10d::Backend.
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import report, torch_features
from ._native import native

# Our names, distinct from torch's own ("nccl", "nccl2", "nccl-lazy", "nccl-legacy"), and the
# behaviour each runs. name() on a backend reports torch's name for the behaviour.
BACKEND_NAMES = {
    "migrate-legacy": "legacy",
    "migrate-nccl2": "rewritten",
    "migrate-lazy": "rewritten-lazy-p2p",
}


def _group_being_created(opts) -> tuple[dist.ProcessGroup | None, torch.device | None]:
    """The group torch is creating a backend for, and the device the job bound it to (None when
    it bound none), on every supported torch; (None, None) outside torch's group creation, which
    a torch that hands creators no group says once (the job's device is then unknown).

    torch that hands creators their group (``torch_features.hands_backends_their_group``) passes
    it in ``opts.process_group``, its bound device set. Older torch (2.11) passes no group,
    although the job's binding is already made when it calls the creator: torch creates every
    group in ``_new_process_group_helper``, which binds the new group to its ``device_id``
    argument (from ``init_process_group(device_id=...)``, or the world's device for ``new_group``
    and DeviceMesh groups of a bound world) before creating its backends. The creator then runs
    inside that call, so the group and device are its locals.
    """
    group = getattr(opts, "process_group", None)
    if group is not None:
        return group, group.bound_device_id
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_new_process_group_helper" and frame.f_globals.get("__name__") == c10d.__name__:
            group = frame.f_locals.get("pg")
            device = frame.f_locals.get("device_id")
            return (group if isinstance(group, dist.ProcessGroup) else None,
                    device if isinstance(device, torch.device) else None)
        frame = frame.f_back
    if not torch_features.hands_backends_their_group():
        _warn_creation_frame_missing()
    return None, None


_creation_frame_missing_said = False


def _warn_creation_frame_missing() -> None:
    """Once per process: this torch hands the creator no group and the group it is creating was
    not found where torch 2.11 creates groups, so a device the job bound the group to cannot be
    read. A job calling the creator itself lands here too; a torch that moved its group creation
    elsewhere would otherwise lose the job's binding without a word."""
    global _creation_frame_missing_said
    if _creation_frame_missing_said:
        return
    _creation_frame_missing_said = True
    warnings.warn(f"nccl_migrate: torch {torch.__version__} hands backend creators no group, and the group being "
                  f"created was not found in {c10d.__name__}._new_process_group_helper, where this torch binds it "
                  "to the job's device_id: a device the job bound it to is not seen, so the group binds to "
                  "LOCAL_RANK's device instead (the migrate-legacy backend to none); check init_process_group's "
                  "device_id against the device each rank uses", RuntimeWarning, stacklevel=3)


def _bound_device(opts, behaviour: str) -> torch.device | None:
    """The device a new group is bound to, decided the way torch 2.15's nccl2 decides it.

    The device the job bound the group to wins, on every torch. The rewritten behaviour otherwise
    binds by the shim's rule (the local rank, or the global rank, modulo the device count) and
    records that on the group, as nccl2 does; without GPUs it binds to the CPU, where our
    communicators run over Gloo. The legacy behaviour binds only when asked.
    """
    group, device = _group_being_created(opts)
    if device is not None or behaviour == "legacy":
        return device
    ranks = list(opts.global_ranks_in_group or [])
    global_rank = ranks[opts.group_rank] if ranks else opts.group_rank
    index = native.default_device_index(os.environ.get("LOCAL_RANK"), global_rank, torch.cuda.device_count())
    if index is None:
        return torch.device("cpu")
    device = torch.device("cuda", index)
    if group is not None:
        group.bound_device_id = device
    return device


def _make_gloo(store, prefix: str, rank: int, size: int, timeout):
    """One Gloo context for one communicator, over its own key space of the group's store."""
    return dist.ProcessGroupGloo(dist.PrefixStore(prefix, store), rank, size, timeout)


EAGER_SUBGROUPS_VARIABLE = "NCCL_MIGRATE_EAGER_SUBGROUPS"


def _lazy_init(pg_options, is_subgroup: bool) -> bool:
    """Whether the rewritten behaviour defers creating this group's communicator to first use.

    An explicit ``pg_options.lazy_init`` wins. Otherwise the world group connects eagerly, as
    torch 2.15's nccl2 does, while subgroups wait for their first op: a group that never runs a
    collective then costs no communicator and no device memory. ``NCCL_MIGRATE_EAGER_SUBGROUPS=1``
    restores torch's eager subgroups.
    """
    explicit = getattr(pg_options, "lazy_init", None)
    if explicit is not None:
        return bool(explicit)
    if not is_subgroup:
        return False
    value = os.environ.get(EAGER_SUBGROUPS_VARIABLE, "0")
    if value not in ("0", "1"):
        raise ValueError(f"{EAGER_SUBGROUPS_VARIABLE}={value!r} is not valid; use 1 (eager subgroups, as torch) "
                         "or 0 (lazy subgroups, the default)")
    return value == "0"


def _create(behaviour: str, opts, pg_options, create_native=None):
    """The backend of one new group.

    A group of a device-bound world arrives with ``split_from`` (the world's backend): its
    communicators still form from its own members, with its own name, timeout and laziness, so
    it is created afresh rather than as a copy of the parent's settings.
    """
    return (create_native or native.create_backend)(
        behaviour=behaviour,
        store=opts.store,
        rank=opts.group_rank,
        size=opts.group_size,
        timeout=opts.timeout,
        group_name=opts.group_id or "",
        # torch names the world "default_pg" and other groups "undefined" unless told; its
        # flight-recorder analyzer relies on the first.
        group_desc="undefined" if opts.global_ranks_in_group else "default_pg",
        global_ranks=list(opts.global_ranks_in_group or []),
        bound_device=_bound_device(opts, behaviour),
        lazy_init=_lazy_init(pg_options, is_subgroup=bool(opts.global_ranks_in_group)),
        make_gloo=_make_gloo,
        enable_reconfigure=bool(getattr(opts, "enable_reconfigure", False)),
        device_comms=_device_comm_options(pg_options),
    )


# ncclConfig_t's "not set" (NCCL_CONFIG_UNDEF_INT), which torch's Options.config fields start as.
_NCCL_UNSET = -(2**31)


def _device_comm_options(pg_options) -> dict:
    """What ``pg_options`` (torch's ProcessGroupNCCL.Options) asks of a group's NCCL
    communicators: the config fields the job set, and a high-priority stream."""
    wanted = {}
    config = getattr(pg_options, "config", None)
    for field in ("blocking", "max_ctas", "min_ctas", "cga_cluster_size", "split_share"):
        value = getattr(config, field, None)
        if isinstance(value, int) and value != _NCCL_UNSET:
            wanted[field] = value
    if getattr(pg_options, "is_high_priority_stream", False):
        wanted["high_priority_stream"] = True
    return wanted


def creator_for(name: str, requested: str | None = None, create_native=None):
    """The backend creator of toolkit backend `name` (torch's extended creator API); `requested`
    is the name the job used, when the shim routes one of torch's names here. `create_native`
    replaces the native constructor (tests run the same creator over a simulated device)."""
    behaviour = BACKEND_NAMES[name]

    def create(opts, pg_options):
        backend = _create(behaviour, opts, pg_options, create_native)
        report.record_group(requested or name, behaviour, backend)
        return backend

    return create


def serving_devices() -> list[str]:
    """The device types a name served by the toolkit covers, as torch's NCCL backends do: CUDA
    where there are GPUs, else the CPU (over Gloo). Never both: torch would then run object
    collectives and barriers of a GPU job on the CPU, which a group bound to a GPU rejects."""
    return ["cuda"] if _gpus_present() else ["cpu"]


def _gpus_present() -> bool:
    """Whether the machine has GPUs, asked of NVML where it can answer: registration runs at
    import, and initialising CUDA there would break jobs that fork workers afterwards."""
    count = getattr(torch.cuda, "_device_count_nvml", lambda: -1)()
    return count > 0 if count >= 0 else torch.cuda.is_available()


def register_name(name: str, creator, devices: list[str] | None = None) -> None:
    """Registers `name` with torch for the toolkit: our creator, our devices, our recorder."""
    dist.Backend.register_backend(name, creator, extended_api=True, devices=devices or serving_devices())
    _declare_self_recording(name)


def register_one(name: str) -> None:
    """Registers one toolkit backend by name; the entry point torch calls for that name."""
    if name.upper() in dist.Backend._plugins:
        return
    register_name(name, creator_for(name))


def _declare_self_recording(name: str) -> None:
    """Our backends keep their own flight recorder (torch's format, dumped where torch dumps),
    as legacy ProcessGroupNCCL does. torch attaches its generic FlightRecorderHook to groups of
    backends it does not know to record themselves, by the name the job asked for; on ours it
    would record every op twice and add its per-op cost, so we say that they do."""
    self_recording = getattr(c10d, "_FR_SELF_RECORDING_BACKENDS", None)
    if isinstance(self_recording, set):
        self_recording.add(name)


def register() -> None:
    """Registers every toolkit backend with torch.distributed; safe to call more than once."""
    for name in BACKEND_NAMES:
        register_one(name)


# Entry points (group "torch.distributed.backends"): torch >= 2.14 loads the one named like the
# requested backend and calls it, so an installed package works without an import.
def register_migrate_legacy() -> None:
    register_one("migrate-legacy")


def register_migrate_nccl2() -> None:
    register_one("migrate-nccl2")


def register_migrate_lazy() -> None:
    register_one("migrate-lazy")
