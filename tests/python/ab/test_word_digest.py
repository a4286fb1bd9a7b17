"""The word digest (python/digest): the native value equals the definition docs/ab.md states,
computed here independently in Python, for every size, dtype and memory layout; on a GPU the
kernel gives the host's value for the same bytes, ordered after the work on the tensor's stream."""

import random

import pytest
import torch
from nccl_migrate._native import native
from nccl_migrate.ab.digest import GPU_PREFIX, PendingDigest, digest_of, digest_soon

MASK = (1 << 64) - 1
POSITION_A, POSITION_B, LENGTH = 0x9E3779B97F4A7C15, 0xD6E8FEB86659FD93, 0xA0761D6478BD642F


def _xor_shift_multiply(x, s1, m1, s2, m2, s3):
    x ^= x >> s1
    x = (x * m1) & MASK
    x ^= x >> s2
    x = (x * m2) & MASK
    return x ^ (x >> s3)


def _mix_a(x):  # MurmurHash3's 64-bit finalizer
    return _xor_shift_multiply(x, 33, 0xFF51AFD7ED558CCD, 33, 0xC4CEB9FE1A85EC53, 33)


def _mix_b(x):  # SplitMix64's finalizer
    return _xor_shift_multiply(x, 30, 0xBF58476D1CE4E5B9, 27, 0x94D049BB133111EB, 31)


def word_digest_by_definition(data: bytes) -> tuple[int, int]:
    n = len(data)
    padded = data + bytes(-n % 8)
    a = b = 0
    for i in range(len(padded) // 8):
        word = int.from_bytes(padded[8 * i:8 * i + 8], "little")
        a = (a + _mix_a(word ^ ((i * POSITION_A) & MASK))) & MASK
        b = (b + _mix_b((word + (i + 1) * POSITION_B) & MASK)) & MASK
    return _mix_a(a ^ n), _mix_b((b + n * LENGTH) & MASK)


def logical_bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="no CUDA GPU here: the word digest's kernel cannot run on this machine")


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 1001])
def test_the_host_value_is_the_definition(size):
    data = bytes(random.Random(size).randrange(256) for _ in range(size))
    tensor = torch.frombuffer(bytearray(data), dtype=torch.uint8) if size else torch.empty(0, dtype=torch.uint8)
    assert native.word_digest(tensor) == word_digest_by_definition(data)


def test_layouts_hash_their_logical_elements():
    base = torch.arange(60, dtype=torch.float16).reshape(6, 10)
    for view in (base.t(), base[:, 3:7], base.reshape(-1)[1:], base[::2]):  # transposed, strided, odd offset
        assert native.word_digest(view) == word_digest_by_definition(logical_bytes(view))
    assert native.word_digest(base.t()) != native.word_digest(base)


def test_the_compiled_kernel_is_reported():
    # A CUDA build of torch with the toolkit present builds the kernel; without it, CUDA tensors are
    # copied to the host and hashed there.
    assert isinstance(native.device_digest_compiled, bool)
    if torch.version.cuda:
        assert native.device_digest_compiled


@needs_gpu
def test_the_gpu_gives_the_host_value():
    for dtype in (torch.uint8, torch.float16, torch.float32, torch.float64, torch.int64):
        for numel in (0, 1, 3, 1000, (1 << 20) + 3):
            host = (torch.rand(numel, dtype=torch.float64) * 1000).to(dtype)
            device = host.cuda()
            assert native.word_digest(device) == native.word_digest(host), (dtype, numel)
            # A buffer off 8-byte alignment is read bytewise by the kernel.
            assert native.word_digest(device[1:]) == native.word_digest(host[1:]), (dtype, numel)


@needs_gpu
def test_a_gpu_digest_is_ordered_after_the_streams_work():
    t = torch.zeros(1 << 24, device="cuda")
    torch.cuda._sleep(50_000_000)  # the stream is busy for a while before it writes t
    t.add_(1)
    assert native.word_digest(t) == native.word_digest(torch.ones(1 << 24))


@needs_gpu
def test_recorded_cuda_tensors_are_hashed_on_the_gpu_and_stay_bitwise():
    a = torch.randn(4096, device="cuda")
    b = a.clone()
    assert digest_of([a]).startswith(GPU_PREFIX) and digest_of([a]) == digest_of([b])
    b.view(torch.int32)[4095] ^= 1
    assert digest_of([a]) != digest_of([b])


@needs_gpu
def test_the_recorder_does_not_wait_for_the_gpu():
    t = torch.ones(1 << 24, device="cuda")
    torch.cuda._sleep(200_000_000)  # the stream is busy for a while
    pending = digest_soon([t])
    assert isinstance(pending, PendingDigest) and not pending.ready()
    assert pending.value() == digest_of([t])


@needs_gpu
def test_ops_captured_in_a_cuda_graph_are_told_apart_from_ops_that_run():
    from nccl_migrate.ab.recorder import Recorder

    assert not Recorder.capturing()
    x = torch.zeros(8, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(torch.cuda.Stream()):
        x.add_(1)  # warm-up outside the capture
        with torch.cuda.graph(graph):
            assert Recorder.capturing()  # an op issued now runs only at replay: not recorded
            x.add_(1)
    assert not Recorder.capturing()
