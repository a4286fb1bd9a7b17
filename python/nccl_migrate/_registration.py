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

# Our names, distinct from torch's own ("nccl", "nccl2", "nccl-lazy", "nccl-legacy").
BACKEND_NAMES = {
    "migrate-legacy": "legacy",
    "migrate-nccl2": "rewritten",
}


def _bound_device(opts, behaviour: str) -> torch.device | None:
    """The device a new group is bound to, decided the way torch 2.15's nccl2 decides it.

    An explicit ``device_id`` wins. The rewritten behaviour otherwise falls back to the local
    rank (or global rank) modulo the device count; without GPUs it binds to the CPU, where our
    communicators run over Gloo. The legacy behaviour binds only when asked.
    """
    group = getattr(opts, "process_group", None)
    device = getattr(group, "bound_device_id", None) if group is not None else None
    if device is not None or behaviour != "rewritten":
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


def _gloo_maker(store, timeout):
    def make(prefix: str, rank: int, size: int):
        return dist.ProcessGroupGloo(dist.PrefixStore(prefix, store), rank, size, timeout)

    return make


def _creator(behaviour: str):
    def create(opts, pg_options):
        lazy_init = bool(getattr(pg_options, "lazy_init", False))
        return native.create_backend(
            behaviour=behaviour,
            store=opts.store,
            rank=opts.group_rank,
            size=opts.group_size,
            timeout=opts.timeout,
            group_name=opts.group_id or "",
            global_ranks=list(opts.global_ranks_in_group or []),
            bound_device=_bound_device(opts, behaviour),
            lazy_init=lazy_init,
            make_gloo=_gloo_maker(opts.store, opts.timeout),
        )

    return create


def register() -> None:
    """Registers every toolkit backend with torch.distributed; safe to call more than once."""
    for name, behaviour in BACKEND_NAMES.items():
        if name.upper() in dist.Backend._plugins:
            continue
        dist.Backend.register_backend(name, _creator(behaviour), extended_api=True, devices=["cpu", "cuda"])
