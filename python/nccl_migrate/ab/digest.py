"""Bitwise digests of tensors: two tensors have the same digest exactly when their dtype, shape
and bytes are the same (up to XXH3-128 collisions). XXH3 reads memory at its bandwidth (about 15
times blake2b's speed) and releases the GIL, so a digest can also be computed on the recorder's
worker thread while an op runs (``later``).

A CUDA tensor is not copied to the host: the GPU computes its word digest (python/digest) on the
tensor's stream, and only those 16 bytes are hashed here. Such digests start with ``gpu:``, so a
comparison with a host-hashed digest of the same op can say why they cannot be equal. The
recorder does not even wait for them (``digest_soon``): the GPU computes them in stream order,
after the op and before the job's next kernel, and the record writer collects them later."""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from concurrent.futures import Future, ThreadPoolExecutor

import torch
import xxhash

# A tensor above _TREE bytes is hashed as _CHUNK-sized parts whose digests are then hashed; the
# parts run on several threads only when this rank has more than one core to itself. The layout
# depends on the size alone, so the digest never depends on the thread count.
_CHUNK = 8 << 20
_TREE = 2 * _CHUNK
_parts: ThreadPoolExecutor | None = None
_worker: ThreadPoolExecutor | None = None
GPU_PREFIX = "gpu:"
_native_gpu = None  # the native module once a CUDA tensor needs it; False without the kernel


def _native_with_gpu_digest():
    """The native module if this build has the word digest's CUDA kernel, else None (CUDA tensors
    are then copied to the host and hashed there)."""
    global _native_gpu
    if _native_gpu is None:
        try:
            from .._native import native

            _native_gpu = native if getattr(native, "device_digest_compiled", False) else False
        except ImportError:
            _native_gpu = False
    return _native_gpu or None


def _gpu_digest_failed(error: Exception) -> None:
    """The kernel could not run here (say, a driver too old for its code): this process hashes
    host copies from now on, and says so once."""
    global _native_gpu
    _native_gpu = False
    print(f"nccl-migrate ab: the GPU digest failed ({str(error).splitlines()[0]}); hashing host copies of CUDA "
          "tensors instead, which costs more time", file=sys.stderr)


@functools.cache
def _cores_per_rank() -> int:
    # A launcher sets LOCAL_WORLD_SIZE before the rank starts: read once, not per op.
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    return max(1, (os.cpu_count() or 1) // max(1, local))


def has_spare_core() -> bool:
    """Whether this rank has a core beyond the one its op runs on: only then does hashing on a
    worker thread while the op runs save time (without one, the worker takes the core from the
    op and the hand-off costs more than the hash)."""
    return _cores_per_rank() >= 2


def bytes_of(tensor: torch.Tensor):
    """The tensor's elements as raw bytes, in logical order (a copy only when it is not a dense
    CPU tensor)."""
    if tensor.device.type == "cpu" and tensor.is_contiguous() and not tensor.is_conj():
        if not tensor.nbytes:
            return b""
        # The tensor's own memory, without numpy's per-call cost (small ops are counted in µs).
        return (ctypes.c_char * tensor.nbytes).from_address(tensor.data_ptr())
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous().reshape(-1)
    if t.is_conj():
        t = t.resolve_conj()
    return memoryview(t.view(torch.uint8).numpy()).cast("B")


def _tree(data: memoryview) -> bytes:
    global _parts
    pieces = (data[i:i + _CHUNK] for i in range(0, len(data), _CHUNK))
    cores = _cores_per_rank()
    if cores < 2:
        return b"".join(xxhash.xxh3_128_digest(p) for p in pieces)
    if _parts is None:
        _parts = ThreadPoolExecutor(max_workers=min(cores, 8), thread_name_prefix="ab-digest-part")
    return b"".join(_parts.map(xxhash.xxh3_128_digest, pieces))


class PendingDigest:
    """The digest of CUDA tensors whose word digests are still running on their streams."""

    def __init__(self, tensors: list[torch.Tensor], word_digest_enqueue):
        self.headers = [_header(t) for t in tensors]
        self.lanes = [word_digest_enqueue(t) for t in tensors]

    def ready(self) -> bool:
        return all(lanes.ready() for lanes in self.lanes)

    def value(self) -> str:
        """The digest string, waiting for the streams if they are not there yet."""
        h = xxhash.xxh3_128()
        for header, lanes in zip(self.headers, self.lanes):
            h.update(header)
            h.update(_word_digest_piece(*lanes.result()))
        return GPU_PREFIX + h.hexdigest()


def _header(t: torch.Tensor) -> bytes:
    return f"{t.dtype}{tuple(t.shape)};".encode()


def _word_digest_piece(lane_a: int, lane_b: int) -> bytes:
    return b"word-digest" + lane_a.to_bytes(8, "little") + lane_b.to_bytes(8, "little")


def digest_soon(tensors: list[torch.Tensor]) -> str | PendingDigest | None:
    """digest_of(tensors), without waiting for a GPU: CUDA tensors give a PendingDigest whose
    value() is the same string."""
    if tensors and all(t.is_cuda for t in tensors) and (native := _native_with_gpu_digest()) is not None:
        try:
            return PendingDigest(tensors, native.word_digest_enqueue)
        except (RuntimeError, ValueError) as error:
            _gpu_digest_failed(error)
    return _host_digest(tensors)


def resolved(digest: str | PendingDigest | None) -> str | None:
    return digest.value() if isinstance(digest, PendingDigest) else digest


def digest_of(tensors: list[torch.Tensor]) -> str | None:
    """One digest over a list of tensors; None when the list is empty (the op has no such side)."""
    return resolved(digest_soon(tensors))


def _host_digest(tensors: list[torch.Tensor]) -> str | None:
    """The digest of the tensors' bytes read on the host (a tensor elsewhere is copied here)."""
    if not tensors:
        return None
    h = xxhash.xxh3_128()
    for t in tensors:
        h.update(_header(t))
        data = bytes_of(t)
        h.update(_tree(memoryview(data).cast("B")) if len(data) > _TREE else data)
    return h.hexdigest()


def on_host(tensors: list[torch.Tensor]) -> bool:
    """Whether every tensor is in host memory: only those are hashed on the worker thread (a
    device tensor's bytes are read on the caller's thread, ordered after its stream)."""
    return all(t.device.type == "cpu" for t in tensors)


def later(tensors: list[torch.Tensor]) -> Future:
    """The digest of ``tensors``, computed on the recorder's worker thread. The caller promises
    that nobody writes them until the future is read."""
    global _worker
    if _worker is None:
        _worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ab-digest")
    return _worker.submit(digest_of, list(tensors))


def overlaps(inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> bool:
    """Whether any input shares memory with any output (an in-place op, or an input that is a
    view into the output): then the input must be hashed before the op writes."""
    if not inputs or not outputs:
        return False
    written = {t.untyped_storage().data_ptr() for t in outputs}
    return any(t.untyped_storage().data_ptr() in written for t in inputs)
