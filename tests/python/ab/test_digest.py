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
