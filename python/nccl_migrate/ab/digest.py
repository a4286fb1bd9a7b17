"""Bitwise digests of tensors: two tensors have the same digest exactly when their dtype, shape
and bytes are the same (up to blake2b collisions)."""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import torch

# Large tensors are hashed in chunks on several threads (hashlib releases the GIL), then the
# chunk digests are hashed: the recorder's cost must stay small next to the op it records.
_CHUNK = 4 << 20
_pool: ThreadPoolExecutor | None = None


def _hash_bytes(data: memoryview) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _parallel(data: memoryview) -> bytes:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="ab-digest")
    parts = _pool.map(_hash_bytes, (data[i:i + _CHUNK] for i in range(0, len(data), _CHUNK)))
    return b"".join(parts)


def bytes_of(tensor: torch.Tensor) -> memoryview:
    """The tensor's elements as raw bytes, in logical order (a copy only when it is not a dense
    CPU tensor)."""
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous().reshape(-1)
    if t.is_conj():
        t = t.resolve_conj()
    return memoryview(t.view(torch.uint8).numpy()).cast("B")


def digest_of(tensors: list[torch.Tensor]) -> str | None:
    """One digest over a list of tensors; None when the list is empty (the op has no such side)."""
    if not tensors:
        return None
    h = hashlib.blake2b(digest_size=16)
    for t in tensors:
        h.update(f"{t.dtype}{tuple(t.shape)};".encode())
        data = bytes_of(t)
        h.update(_parallel(data) if len(data) > 2 * _CHUNK else data)
    return h.hexdigest()
