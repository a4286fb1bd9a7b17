"""The reduce op of an op issued below torch.distributed's Python functions (dispatcher_calls.py),
in this process: a world of one over Gloo, the kernel that notes each reducing c10d call
installed for the test and removed after it. The note is taken once, by the op on the same
tensors that the same dispatcher op was called for, and never guessed otherwise."""

import contextlib
import types

import pytest
import torch
import torch.distributed as dist
from nccl_migrate.ab import dispatcher_calls
from nccl_migrate.ab.op_table import OPS
from torch_support import requires_torch


@pytest.fixture
def noting():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    dispatcher_calls.install()
    try:
        yield dispatcher_calls._library
    finally:
        dispatcher_calls._library._destroy()  # the registrations go with it
        dispatcher_calls._library = None
        dispatcher_calls.forget()
        dist.destroy_process_group()


@requires_torch("reduce_op_unbox")
def test_the_reduce_op_of_a_reducing_call_is_noted_and_taken_once(noting):
    t = torch.ones(3)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert dispatcher_calls.reduce_op_of("allreduce_", [t]) == dist.ReduceOp.MAX
    assert dispatcher_calls.reduce_op_of("allreduce_", [t]) is None  # taken
    dist.reduce(t, dst=0, op=dist.ReduceOp.MIN)
    assert dispatcher_calls.reduce_op_of("reduce_", [t]) == dist.ReduceOp.MIN
    assert t.tolist() == [1.0, 1.0, 1.0]  # the call itself went through unchanged


def test_a_note_is_not_taken_by_another_op_or_other_tensors(noting):
    t, other = torch.ones(3), torch.ones(3)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert dispatcher_calls.reduce_op_of("reduce_", [t]) is None
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert dispatcher_calls.reduce_op_of("allreduce_", [other]) is None
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert dispatcher_calls.reduce_op_of("allreduce_", []) is None
    assert dispatcher_calls.reduce_op_of(None, [t]) is None  # every attempt takes the note
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    dispatcher_calls.forget()
    assert dispatcher_calls.reduce_op_of("allreduce_", [t]) is None


def test_a_torch_that_cannot_read_the_dispatchers_reduce_op_gives_none_never_a_guess(noting, monkeypatch):
    t = torch.ones(3)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    monkeypatch.setattr(dispatcher_calls, "CAN_READ_REDUCE_OP", False)
    assert dispatcher_calls.reduce_op_of("allreduce_", [t]) is None


def test_a_call_on_another_thread_is_not_seen_here(noting):
    import threading

    t = torch.ones(2)
    thread = threading.Thread(target=dist.all_reduce, args=(t,), kwargs={"op": dist.ReduceOp.MAX})
    thread.start(), thread.join()
    assert dispatcher_calls.reduce_op_of("allreduce_", [t]) is None
    # A thread that never made a reducing call has nothing noted.
    found = []
    thread = threading.Thread(target=lambda: found.append(dispatcher_calls.reduce_op_of("allreduce_", [t])))
    thread.start(), thread.join()
    assert found == [None]


def test_installed_once_for_every_reducing_op_of_the_table(noting, monkeypatch):
    registered = []
    assert dispatcher_calls.install() is None and dispatcher_calls._library is noting  # once per process
    monkeypatch.setattr(dispatcher_calls, "_library", None)
    monkeypatch.setattr(dispatcher_calls.torch.library, "Library",
                        lambda ns, kind: types.SimpleNamespace(impl=lambda name, fn, key: registered.append(
                            (ns, kind, name, key))))
    dispatcher_calls.install()
    assert registered == [("c10d", "IMPL", spec.dispatcher, "Autograd") for spec in OPS if spec.dispatcher]
    assert len(registered) == 6


def test_the_noting_kernel_finds_the_reduce_op_by_position_or_keyword_and_keeps_no_tensor(monkeypatch):
    passed, below = [], []
    fake_ops = types.SimpleNamespace(c10d=types.SimpleNamespace(
        op_=types.SimpleNamespace(default=lambda *a, **k: passed.append((a, k)) or "result")))
    monkeypatch.setattr(dispatcher_calls, "torch", types.SimpleNamespace(ops=fake_ops, Tensor=torch.Tensor))

    @contextlib.contextmanager
    def below_autograd():
        below.append(True)
        yield

    monkeypatch.setattr(dispatcher_calls, "below_autograd", below_autograd)
    noted = dispatcher_calls._noting("op_", 2)
    t, u = torch.ones(1), torch.ones(2)
    assert noted([t], "group", "MAX", async_op=False) == "result"
    assert passed == [(([t], "group", "MAX"), {"async_op": False})] and below == [True]
    name, pointers, reduce_op = dispatcher_calls._last.call
    assert (name, pointers, reduce_op) == ("op_", {t.data_ptr()}, "MAX")
    noted([t], "group", "MIN", reduce_op="AVG", extra=(u,))
    assert dispatcher_calls._last.call == ("op_", {t.data_ptr(), u.data_ptr()}, "AVG")
    dispatcher_calls.forget()


def test_pointers_are_gathered_from_nested_lists_and_tuples():
    a, b, c = torch.ones(1), torch.ones(1), torch.ones(1)
    assert dispatcher_calls._pointers([a, (b, [c]), "x", 3, None]) == {a.data_ptr(), b.data_ptr(), c.data_ptr()}
    assert dispatcher_calls._pointers([]) == set()
