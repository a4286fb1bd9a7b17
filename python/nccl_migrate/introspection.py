"""What a group's backend has built: its live communicators and what they cost."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ._native import native


def communicators(group: dist.ProcessGroup | None = None, device: str | torch.device = "cpu") -> list[dict]:
    """Live communicators of the toolkit backend serving ``group`` (default: WORLD) on ``device``.

    Each entry says which policy key made it (``"cpu"``, ``"cuda:0"``), its purpose, device,
    ranks, implementation (``nccl`` or ``gloo``), creation time and device memory when known.
    Raises TypeError when the group's backend on that device is not one of ours.
    """
    group = group or dist.group.WORLD
    backend = group._get_backend(torch.device(device))
    return native.communicators(backend)
