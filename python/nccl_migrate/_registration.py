"""Registration of the toolkit's backends with torch.distributed.

Each backend name maps to a behaviour the engine implements through a communicator policy.
CPU communicators are torch's own ProcessGroupGloo instances, created here because the torch
wheel ships no Gloo headers; the engine only ever talks to them through c10d::Backend.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from ._native import native

# Our names, distinct from torch's own ("nccl", "nccl2", "nccl-lazy", "nccl-legacy"), and the
# behaviour each runs. name() on a backend reports torch's name for the behaviour.
BACKEND_NAMES = {
    "migrate-legacy": "legacy",
    "migrate-nccl2": "rewritten",
    "migrate-lazy": "rewritten-lazy-p2p",
}


def _bound_device(opts, behaviour: str) -> torch.device | None:
    """The device a new group is bound to, decided the way torch 2.15's nccl2 decides it.

    An explicit ``device_id`` wins. The rewritten behaviour otherwise falls back to the local
    rank (or global rank) modulo the device count; without GPUs it binds to the CPU, where our
    communicators run over Gloo. The legacy behaviour binds only when asked.
    """
    group = getattr(opts, "process_group", None)
    device = getattr(group, "bound_device_id", None) if group is not None else None
    if device is not None or behaviour == "legacy":
        return device
    count = torch.cuda.device_count()
    if count == 0:
        return torch.device("cpu")
    if "LOCAL_RANK" in os.environ:
        index = int(os.environ["LOCAL_RANK"]) % count
    else:
        ranks = list(opts.global_ranks_in_group or [])
        index = (ranks[opts.group_rank] if ranks else opts.group_rank) % count
    device = torch.device("cuda", index)
    if group is not None:
        group.bound_device_id = device
    return device


def _make_gloo(store, prefix: str, rank: int, size: int, timeout):
    """One Gloo context for one communicator, over its own key space of the group's store."""
    return dist.ProcessGroupGloo(dist.PrefixStore(prefix, store), rank, size, timeout)


def _lazy_init(pg_options) -> bool:
    """Whether the job asked for lazy communicator creation (``pg_options.lazy_init``)."""
    return bool(getattr(pg_options, "lazy_init", False))


def _creator(behaviour: str):
    def create(opts, pg_options):
        split_from = getattr(opts, "split_from", None)
        if split_from is not None and _is_ours(split_from):
            # new_group on a device-bound parent: torch asks the parent to split.
            return split_from.split(opts.store, list(opts.global_ranks_in_group or []), None)
        group = getattr(opts, "process_group", None)
        return native.create_backend(
            behaviour=behaviour,
            store=opts.store,
            rank=opts.group_rank,
            size=opts.group_size,
            timeout=opts.timeout,
            group_name=opts.group_id or "",
            group_desc=(group.group_desc if group is not None and hasattr(group, "group_desc") else "") or "",
            global_ranks=list(opts.global_ranks_in_group or []),
            bound_device=_bound_device(opts, behaviour),
            lazy_init=_lazy_init(pg_options),
            make_gloo=_make_gloo,
        )

    return create


def _is_ours(backend) -> bool:
    try:
        native.communicators(backend)
    except TypeError:
        return False
    return True


def register() -> None:
    """Registers every toolkit backend with torch.distributed; safe to call more than once."""
    for name, behaviour in BACKEND_NAMES.items():
        if name.upper() in dist.Backend._plugins:
            continue
        dist.Backend.register_backend(name, _creator(behaviour), extended_api=True, devices=["cpu", "cuda"])
