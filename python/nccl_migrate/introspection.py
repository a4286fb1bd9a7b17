"""What the toolkit's backends have built: live communicators per group and per process, what
created each (policy, key, device, peers), when, and what it cost."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ._native import native


def communicators(group: dist.ProcessGroup | None = None, device: str | torch.device = "cpu") -> list[dict]:
    """Live communicators of the toolkit backend serving ``group`` (default: WORLD) on ``device``.

    Each entry has ``group``, ``policy`` (legacy, rewritten, rewritten-lazy-p2p), ``key``
    (``"cpu"``, ``"cuda:0"``, ``"cuda:0/p2p:0:1"``), ``purpose`` (collective or p2p),
    ``device``, ``rank``, ``size``, ``group_ranks``, ``implementation`` (nccl or gloo),
    ``created_at``, ``creation_seconds`` and ``device_memory_bytes`` (None when unknown).
    Raises TypeError when the group's backend on that device is not one of ours.
    """
    group = group or dist.group.WORLD
    return native.communicators(group._get_backend(torch.device(device)))


def process_communicators() -> list[dict]:
    """Every live communicator of every toolkit backend in this process (same fields)."""
    return native.process_communicators()
