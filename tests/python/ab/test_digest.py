"""Digests are bitwise: equal exactly when dtype, shape and bytes are equal, whichever path (small,
chunked, on the worker thread, strided copy) computes them."""

import torch
from nccl_migrate.ab import digest
from nccl_migrate.ab.digest import digest_of, later, overlaps


def test_equal_bytes_dtype_and_shape_give_equal_digests():
    a = torch.arange(1000, dtype=torch.float32)
    assert digest_of([a]) == digest_of([a.clone()])
    assert digest_of([]) is None


def test_one_flipped_bit_changes_the_digest():
    a = torch.randn(1000)
    b = a.clone()
    b.view(torch.int32)[999] ^= 1
    assert digest_of([a]) != digest_of([b])


def test_dtype_and_shape_are_part_of_the_digest():
    a = torch.zeros(16, dtype=torch.float32)
    assert digest_of([a]) != digest_of([a.view(torch.int32)])  # same bytes, another dtype
    assert digest_of([a]) != digest_of([a.reshape(4, 4)])  # same bytes, another shape
    assert digest_of([a[:8], a[8:]]) != digest_of([a])  # a list is not its concatenation


def test_a_strided_view_hashes_its_logical_elements():
    a = torch.arange(64.0).reshape(8, 8)
    assert digest_of([a.t()]) == digest_of([a.t().contiguous()])
    assert digest_of([a.t()]) != digest_of([a])


def test_large_tensors_are_hashed_in_parts_and_still_bitwise():
    big = torch.zeros((digest._TREE // 4) + 1000)  # past the chunked layout's threshold
    other = big.clone()
    other[-1] = 1e-30  # the last chunk only
    assert digest_of([big]) == digest_of([big.clone()])
    assert digest_of([big]) != digest_of([other])


def test_the_worker_thread_computes_the_same_digest():
    a = torch.randn(1 << 16)
    assert later([a]).result() == digest_of([a])


def test_in_place_and_aliased_arguments_are_detected():
    out = torch.zeros(8)
    assert overlaps([out], [out])
    assert overlaps([out[4:]], [out])  # an input that is a view into the output
    assert not overlaps([torch.zeros(8)], [out])
    assert not overlaps([], [out])


def test_digests_of_known_tensors_stay_the_same_from_one_version_to_the_next():
    """`ab compare` reads records written earlier (`ab record`), possibly by another version of the
    toolkit: a digest is a function of dtype, shape and bytes alone, fixed once written."""
    t = torch.arange(10, dtype=torch.float32)
    assert digest_of([t]) == "99ce27c523b1a1ef23053b3cf714bb14"
    assert digest_of([t.reshape(2, 5), torch.tensor([1, 2], dtype=torch.int64)]) == "01e7ff053c492433be65e99b0c45265f"
    # Up to _TREE bytes a tensor is hashed whole; past it, as parts.
    assert digest_of([torch.zeros(digest._TREE // 4)]) == "32ab06293fc058f30d4fc26c49d0d343"
    assert digest_of([torch.zeros(digest._TREE // 4 + 2)]) == "8440f5de4e28c86c98afcb674d4257dc"


def test_the_parts_of_a_large_tensor_give_one_digest_whatever_the_cores(monkeypatch):
    big = torch.arange((digest._TREE // 4) * 3, dtype=torch.float32)
    monkeypatch.setattr(digest, "_cores_per_rank", lambda: 1)
    alone = digest_of([big])
    monkeypatch.setattr(digest, "_cores_per_rank", lambda: 4)
    assert digest_of([big]) == alone


class _Computed:
    """What the native module's word_digest_enqueue hands back (python/digest: ready() and
    result()), here with the host reference's value already there."""

    def __init__(self, lanes, ready=True):
        self.lanes, self.is_ready = lanes, ready

    def ready(self):
        return self.is_ready

    def result(self):
        return self.lanes


def test_a_gpu_digest_hashes_each_tensors_dtype_shape_and_word_digest():
    from nccl_migrate._native import native
    from nccl_migrate.ab.digest import GPU_PREFIX, PendingDigest, resolved

    def enqueue(t):
        return _Computed(native.word_digest(t))

    t = torch.arange(10, dtype=torch.float32)
    pending = PendingDigest([t], enqueue)
    assert pending.ready() and pending.value() == "gpu:5c6d828f7c72eb8b8df9db942ae5ae06"
    assert resolved(pending) == pending.value() and resolved("abc") == "abc" and resolved(None) is None
    # Each lane, the dtype and the shape count.
    assert PendingDigest([t], lambda _: _Computed((1, 2))).value() != PendingDigest([t], lambda _: _Computed((1, 3))).value()
    assert PendingDigest([t], lambda _: _Computed((1, 2))).value() != PendingDigest([t], lambda _: _Computed((0, 2))).value()
    assert PendingDigest([t.view(torch.int32)], enqueue).value() != pending.value()
    assert PendingDigest([t.reshape(2, 5)], enqueue).value() != pending.value()
    assert PendingDigest([t, t], enqueue).value().startswith(GPU_PREFIX)
    waiting = PendingDigest([t, t], lambda _: _Computed((1, 2), ready=False))
    assert not waiting.ready()
    lanes = iter([_Computed((1, 2)), _Computed((1, 2), ready=False)])
    assert not PendingDigest([t, t], lambda _: next(lanes)).ready()  # one stream still at work


def test_an_empty_tensor_has_a_digest_of_its_dtype_and_shape():
    assert digest_of([torch.empty(0)]) == "402914d63928f131fd52160fc25213f6"
    assert digest_of([torch.empty(0, 3)]) != digest_of([torch.empty(0)])


def test_a_conjugate_view_hashes_its_conjugated_values():
    z = torch.tensor([1 + 2j, 3 - 4j])
    assert z.conj().is_conj()
    assert digest_of([z.conj()]) == digest_of([z.conj().resolve_conj()])
    assert digest_of([z.conj()]) != digest_of([z])


def test_only_host_tensors_are_on_the_host():
    from nccl_migrate.ab.digest import on_host

    assert on_host([torch.ones(1), torch.ones(2)]) and on_host([])
    assert not on_host([torch.ones(1), torch.ones(1, device="meta")])


def test_a_rank_has_a_spare_core_only_with_two_or_more_to_itself(monkeypatch):
    for cores, spare in ((1, False), (2, True), (3, True)):
        monkeypatch.setattr(digest, "_cores_per_rank", lambda cores=cores: cores)
        assert digest.has_spare_core() is spare


def test_the_cores_per_rank_are_the_hosts_shared_by_its_local_ranks(monkeypatch):
    cores_per_rank = digest._cores_per_rank.__wrapped__  # the cached one is read once per process
    monkeypatch.setattr(digest.os, "cpu_count", lambda: 8)
    for local, cores in (("4", 2), ("", 8), ("16", 1), ("0", 8)):
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local)
        assert cores_per_rank() == cores, local
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert cores_per_rank() == 8
    monkeypatch.setattr(digest.os, "cpu_count", lambda: None)
    assert cores_per_rank() == 1


def _threads(prefix):
    import threading

    return [t for t in threading.enumerate() if t.name.startswith(prefix + "_")]


def test_the_parts_of_a_large_tensor_run_on_one_thread_per_core_up_to_eight(monkeypatch):
    big = torch.zeros((digest._TREE // 4) * 4)
    for cores, threads in ((2, 2), (20, 8)):
        monkeypatch.setattr(digest, "_parts", None)
        monkeypatch.setattr(digest, "_cores_per_rank", lambda cores=cores: cores)
        before = set(_threads("ab-digest-part"))
        digest_of([big])
        pool = digest._parts
        try:
            assert pool is not None and pool._max_workers == threads  # noqa: SLF001 - its size is the point
            assert len(set(_threads("ab-digest-part")) - before) >= 1
        finally:
            pool.shutdown()
    monkeypatch.setattr(digest, "_parts", None)
    monkeypatch.setattr(digest, "_cores_per_rank", lambda: 1)
    digest_of([big])
    assert digest._parts is None  # one core: no threads of its own


def test_later_digests_run_on_one_worker_thread_of_their_own(monkeypatch):
    monkeypatch.setattr(digest, "_worker", None)
    before = set(_threads("ab-digest"))
    futures = [later([torch.randn(1 << 18)]) for _ in range(4)]
    assert [f.result() for f in futures] == [f.result() for f in futures]
    worker = digest._worker
    try:
        assert worker._max_workers == 1  # noqa: SLF001 - one thread, whatever the core count
        new = set(_threads("ab-digest")) - before
        assert len(new) == 1 and not next(iter(new)).name.startswith("ab-digest-part")
        assert later([torch.ones(1)]) is not None and digest._worker is worker  # made once
    finally:
        worker.shutdown()


class _OnDevice(torch.Tensor):
    """A host tensor that says it is a CUDA one (is_cuda), so that the path a GPU takes runs here."""

    @property
    def is_cuda(self):
        return True


def test_cuda_tensors_get_a_pending_digest_from_the_gpu_and_a_failed_kernel_falls_back_to_the_host(monkeypatch, capsys):
    t = torch.arange(10, dtype=torch.float32)
    enqueued = []

    def enqueue(tensor):
        enqueued.append(tensor)
        return _Computed((1, 2))

    monkeypatch.setattr(digest, "_native_gpu", type("Native", (), {"word_digest_enqueue": staticmethod(enqueue)})())
    on_device = t.as_subclass(_OnDevice)
    pending = digest.digest_soon([on_device])
    assert isinstance(pending, digest.PendingDigest) and enqueued == [on_device]
    assert pending.value() == digest.PendingDigest([t], lambda _: _Computed((1, 2))).value()
    assert digest.digest_soon([t]) == digest_of([t])  # a host tensor: hashed on the host
    assert digest.digest_soon([on_device, t]) == digest_of([t, t])  # not every tensor on the device
    assert digest.digest_soon([]) is None

    def fails(tensor):
        raise RuntimeError("no kernel image is available for execution on the device\ndetails")

    monkeypatch.setattr(digest, "_native_gpu", type("Native", (), {"word_digest_enqueue": staticmethod(fails)})())
    assert digest.digest_soon([on_device]) == digest_of([t])
    assert digest._native_gpu is False and digest._native_with_gpu_digest() is None
    assert capsys.readouterr().err == (
        "nccl-migrate ab: the GPU digest failed (no kernel image is available for execution on the device); "
        "hashing host copies of CUDA tensors instead, which costs more time\n")
    assert digest.digest_soon([on_device]) == digest_of([t])  # host copies from then on, said once
    assert capsys.readouterr().err == ""


def test_the_gpu_digest_is_used_where_the_native_module_has_its_kernel(monkeypatch):
    from nccl_migrate._native import native

    monkeypatch.setattr(digest, "_native_gpu", None)
    found = digest._native_with_gpu_digest()
    assert found is (native if native.device_digest_compiled else None)
    assert digest._native_gpu is (native if native.device_digest_compiled else False)  # looked up once
    monkeypatch.setattr(digest, "_native_gpu", None)
    monkeypatch.setattr(native, "device_digest_compiled", False)
    assert digest._native_with_gpu_digest() is None and digest._native_gpu is False
    monkeypatch.setattr(digest, "_native_gpu", None)
    monkeypatch.delattr(native, "device_digest_compiled")
    assert digest._native_with_gpu_digest() is None
