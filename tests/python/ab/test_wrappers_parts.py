"""The wrappers around torch.distributed's functions, in-process and without installing them: each
wrapper is made around a function and called directly, with a stand-in for the recorder (what it
is told, in order) and, where torch must see a process group, a world of one over Gloo."""

import pytest
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from nccl_migrate.ab import BACKEND_VARIABLE, active
from nccl_migrate.ab.wrappers import (
    _binder,
    patch,
    wrap_init_process_group,
    wrap_new_group,
    wrap_object_collective,
    wrap_op,
)


class _Op:
    def __init__(self, spec, view):
        self.entry = {"op": spec.name, "group": "0", "seq": 0, "reduce_op": view.reduce_op}
        self.view, self.shadow, self.start = view, None, None


class _Shadow:
    def __init__(self, calls, skip=None):
        self.calls, self.skip = calls, skip

    def prepare(self, fn, spec, arguments, group, rank, group_name, seq):
        self.calls.append(("shadow.prepare", spec.name, sorted(arguments), rank, group_name, seq))
        if self.skip:
            return None, self.skip
        shadow = self

        class Issued:
            def issue(self):
                shadow.calls.append(("shadow.issue", active.inside.active))

        return Issued(), None

    def world_created(self, requested):
        self.calls.append(("shadow.world_created", requested, active.inside.active))

    def group_created(self, group, arguments):
        self.calls.append(("shadow.group_created", group, dict(arguments), active.inside.active))


class _Recorder:
    """Stands in for recorder.Recorder: notes each call the wrappers make, in order."""

    def __init__(self, capturing=False, shadow=None):
        self.calls, self._capturing, self.shadow, self.rank = [], capturing, shadow, 0

    def capturing(self):
        return self._capturing

    def settle(self):
        self.calls.append(("settle",))

    def begin(self, spec, view):
        self.calls.append(("begin", spec.name, view.reduce_op, active.inside.active))
        return _Op(spec, view)

    def finish(self, op, error=None):
        self.calls.append(("finish", op.entry["op"], error))

    def defer(self, op, result):
        self.calls.append(("defer", op.entry["op"]))
        return ("deferred", result)

    def initialised(self, seconds):
        self.calls.append(("initialised", seconds >= 0))

    def watch(self, group):
        self.calls.append(("watch", group))


@pytest.fixture
def recorder(monkeypatch):
    rec = _Recorder()
    monkeypatch.setattr(active, "recorder", rec)
    return rec


# --- binding a call's arguments ----------------------------------------------------------------

def _collective(tensor, op="sum", group=None, async_op=False, *, tag=0):
    return None


def _positional_only(tensor, /, dst, group=None):
    return None


def _with_rest(tensor, *rest):
    return None


def test_a_usual_call_binds_its_positional_and_keyword_arguments_by_name_without_defaults():
    bind = _binder(_collective)
    assert bind((1,), {}) == {"tensor": 1}
    assert bind((1, "max"), {"async_op": True}) == {"tensor": 1, "op": "max", "async_op": True}
    assert bind((), {"tensor": 2, "tag": 5}) == {"tensor": 2, "tag": 5}
    assert bind((1, "max", None, True), {}) == {"tensor": 1, "op": "max", "group": None, "async_op": True}
    assert _binder(_positional_only)((1, 2), {}) == {"tensor": 1, "dst": 2}


def test_a_call_the_fast_path_cannot_bind_is_bound_by_inspect_or_refused_as_torch_would():
    bind = _binder(_collective)
    with pytest.raises(TypeError, match="too many positional arguments"):
        bind((1, "max", None, True, 5), {})
    with pytest.raises(TypeError, match="unexpected keyword argument 'root'"):
        bind((1,), {"root": 0})
    assert _binder(_with_rest)((1, 2, 3), {}) == {"tensor": 1, "rest": (2, 3)}
    # An argument given both by position and by keyword is refused, as the call itself would be,
    # not bound with the keyword's value over the position's.
    with pytest.raises(TypeError, match="multiple values for argument 'op'"):
        bind((1, "max"), {"op": "sum"})
    # A positional-only parameter given by keyword is refused too, not bound by its name.
    with pytest.raises(TypeError, match="positional only"):
        _binder(_positional_only)((), {"tensor": 1, "dst": 2})


# --- an op's wrapper ---------------------------------------------------------------------------

def test_a_wrapped_op_passes_straight_through_without_a_recorder(world_of_one):
    seen = []
    recorded = wrap_op("all_reduce", lambda *a, **k: seen.append((a, k)) or "result")
    assert active.recorder is None
    assert recorded(torch.ones(2), op=dist.ReduceOp.MAX) == "result"
    assert len(seen) == 1 and seen[0][1] == {"op": dist.ReduceOp.MAX}


def test_a_wrapped_op_passes_through_inside_another_wrapped_call_or_a_graph_capture(world_of_one, recorder):
    recorded = wrap_op("all_reduce", lambda *a, **k: "result")
    with active.inside:
        assert recorded(torch.ones(2)) == "result"
    recorder._capturing = True
    assert recorded(torch.ones(2)) == "result"
    assert recorder.calls == []


def test_a_wrapped_op_passes_through_before_the_world_exists(recorder):
    assert not dist.is_initialized()
    assert wrap_op("all_reduce", lambda *a, **k: "result")(torch.ones(2)) == "result"
    assert recorder.calls == []


def test_a_wrapped_op_is_begun_run_inside_and_finished(world_of_one, recorder):
    inside_during_call = []

    def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        inside_during_call.append(active.inside.active)

    recorded = wrap_op("all_reduce", all_reduce)
    assert recorded.__name__ == "all_reduce"  # functools.wraps: the job sees torch's function
    assert recorded(torch.ones(2), op=dist.ReduceOp.MAX) is None
    assert inside_during_call == [True] and not active.inside.active
    assert recorder.calls == [("settle",), ("begin", "all_reduce", "MAX", False), ("finish", "all_reduce", None)]


def test_a_call_torch_rejects_is_passed_through_for_torch_to_refuse(world_of_one, recorder):
    def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        return None

    with pytest.raises(TypeError, match="5 were given"):
        wrap_op("all_reduce", all_reduce)(torch.ones(2), 1, 2, 3, 4)  # too many arguments
    assert recorder.calls == [("settle",)]  # not begun: no record of a call that never was an op


def test_a_failing_op_is_recorded_with_its_error_and_the_error_reaches_the_job(world_of_one, recorder):
    def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        raise RuntimeError("peer gone")

    with pytest.raises(RuntimeError, match="peer gone"):
        wrap_op("all_reduce", all_reduce)(torch.ones(2))
    assert recorder.calls[-1] == ("finish", "all_reduce", "RuntimeError: peer gone")
    assert not active.inside.active


def test_an_async_op_is_deferred_until_its_work_completes(world_of_one, recorder):
    recorded = wrap_op("all_reduce", lambda tensor, op=None, group=None, async_op=False: "work")
    assert recorded(torch.ones(2), async_op=True) == ("deferred", "work")
    assert recorder.calls[-1] == ("defer", "all_reduce")
    # A synchronous call (or an async one that returned nothing) is finished at once.
    assert recorded(torch.ones(2)) == "work"
    assert recorder.calls[-1] == ("finish", "all_reduce", None)
    recorded = wrap_op("all_reduce", lambda tensor, op=None, group=None, async_op=False: None)
    assert recorded(torch.ones(2), async_op=True) is None
    assert recorder.calls[-1] == ("finish", "all_reduce", None)


def test_an_asynchronous_op_is_deferred_without_async_op(world_of_one, recorder):
    p2p = dist.P2POp(dist.isend, torch.ones(2), 0)
    recorded = wrap_op("batch_isend_irecv", lambda p2p_op_list: ["work"])
    assert recorded([p2p]) == ("deferred", ["work"])
    assert recorder.calls[-1] == ("defer", "batch_isend_irecv")


def test_an_ops_shadow_is_prepared_and_issued_inside_after_the_job_op(world_of_one, recorder):
    recorder.shadow = _Shadow(recorder.calls)
    order = []
    recorded = wrap_op("all_reduce", lambda tensor, op=None, group=None, async_op=False: order.append("job"))
    recorded(torch.ones(2), op=dist.ReduceOp.SUM)
    assert [c[0] for c in recorder.calls] == ["settle", "begin", "shadow.prepare", "shadow.issue", "finish"]
    assert recorder.calls[2] == ("shadow.prepare", "all_reduce", ["op", "tensor"], 0, "0", 0)
    assert recorder.calls[3] == ("shadow.issue", True)


def test_an_op_whose_shadow_is_skipped_says_why_in_its_record(world_of_one, recorder):
    recorder.shadow = _Shadow(recorder.calls, skip="its group has no shadow")
    ops = []
    original_begin = recorder.begin

    def begin(spec, view):
        ops.append(original_begin(spec, view))
        return ops[-1]

    recorder.begin = begin
    wrap_op("all_reduce", lambda tensor, op=None, group=None, async_op=False: None)(torch.ones(2))
    assert ops[0].entry["shadow"] == {"skipped": "its group has no shadow"}
    assert "shadow.issue" not in [c[0] for c in recorder.calls]


# --- object collectives ----------------------------------------------------------------------------

def test_an_object_collective_names_the_ops_it_issues_and_the_outermost_wins():
    seen = []

    def inner():
        seen.append(active.object_collective.name)
        return "inner result"

    def broadcast_object_list():
        seen.append(active.object_collective.name)
        return wrapped_inner()

    wrapped_inner = wrap_object_collective(inner)
    wrapped = wrap_object_collective(broadcast_object_list)
    assert active.object_collective.name is None
    assert wrapped() == "inner result"
    assert seen == ["broadcast_object_list", "broadcast_object_list"]
    assert active.object_collective.name is None
    assert wrapped.__name__ == "broadcast_object_list"


def test_an_object_collective_that_fails_leaves_no_name_behind():
    def all_gather_object():
        raise RuntimeError("pickling failed")

    with pytest.raises(RuntimeError):
        wrap_object_collective(all_gather_object)()
    assert active.object_collective.name is None


# --- init_process_group and new_group ---------------------------------------------------------------

def _init(backend=None, init_method=None, world_size=-1, rank=-1, store=None):
    _init.called = {"backend": backend, "world_size": world_size, "rank": rank}
    return "initialised"


def test_the_sides_backend_replaces_the_jobs_and_the_recorder_is_told(monkeypatch, recorder):
    recorder.shadow = _Shadow(recorder.calls)
    monkeypatch.setenv(BACKEND_VARIABLE, "torch-nccl")
    wrapped = wrap_init_process_group(_init)
    assert wrapped("nccl", world_size=2, rank=1) == "initialised"
    assert _init.called == {"backend": "torch-nccl", "world_size": 2, "rank": 1}
    # The shadow learns what the job asked for, inside (its groups are not the job's).
    assert recorder.calls == [("initialised", True), ("shadow.world_created", "nccl", True)]
    assert wrapped.__name__ == "_init"


def test_without_a_sides_backend_the_jobs_own_call_goes_through(monkeypatch, recorder):
    monkeypatch.delenv(BACKEND_VARIABLE, raising=False)
    wrap_init_process_group(_init)(backend="gloo", rank=0)
    assert _init.called == {"backend": "gloo", "world_size": -1, "rank": 0}
    assert recorder.calls == [("initialised", True)]
    monkeypatch.setenv(BACKEND_VARIABLE, "")
    wrap_init_process_group(_init)("gloo")
    assert _init.called["backend"] == "gloo"


def test_init_without_a_recorder_only_replaces_the_backend(monkeypatch):
    monkeypatch.setenv(BACKEND_VARIABLE, "gloo")
    assert active.recorder is None
    assert wrap_init_process_group(_init)() == "initialised"
    assert _init.called["backend"] == "gloo"


def test_a_new_group_is_watched_and_shadowed_inside(recorder):
    recorder.shadow = _Shadow(recorder.calls)

    def new_group(ranks=None, timeout=None, backend=None):
        return "group"

    assert wrap_new_group(new_group)([0, 1], backend="gloo") == "group"
    assert recorder.calls == [("watch", "group"),
                              ("shadow.group_created", "group", {"ranks": [0, 1], "backend": "gloo"}, True)]


def test_a_new_group_is_left_alone_without_a_recorder_or_inside_a_wrapped_call(monkeypatch):
    def new_group(ranks=None):
        return "group"

    assert wrap_new_group(new_group)([0]) == "group"
    rec = _Recorder()
    monkeypatch.setattr(active, "recorder", rec)
    with active.inside:
        assert wrap_new_group(new_group)([0]) == "group"
    assert rec.calls == []
    assert wrap_new_group(new_group)([0]) == "group"
    assert rec.calls == [("watch", "group")]  # no shadow: watched only


def test_patch_replaces_the_function_where_jobs_and_torch_call_it(monkeypatch):
    for module in (dist, c10d):
        monkeypatch.setattr(module, "nccl_migrate_probe", None, raising=False)
    replacement = object()
    patch("nccl_migrate_probe", replacement)
    assert dist.nccl_migrate_probe is replacement and c10d.nccl_migrate_probe is replacement
