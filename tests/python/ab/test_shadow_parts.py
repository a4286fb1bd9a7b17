"""A shadow run's parts, in-process and without installing the recorder: the shadow side's backend,
each op's cloned arguments, its replay on a shadow group and its judgement against the primary,
over a world of one on Gloo (the shadow groups Gloo too)."""

import time

import pytest
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from nccl_migrate import shim
from nccl_migrate.ab import BACKEND_VARIABLE, shadow
from nccl_migrate.ab.digest import digest_of
from nccl_migrate.ab.op_table import BY_FUNCTION, BY_NAME
from nccl_migrate.ab.perturb import Perturbation
from nccl_migrate.ab.shadow import Shadow, ShadowError, ShadowOp, _clone, shadow_backend


@pytest.fixture
def resolved(monkeypatch):
    """shim.resolve stood in for: what it was asked, and what it answers."""
    asked, answer = [], {"backend": "gloo", "error": None, "reason": "used as given"}

    def resolve(name, environ):
        asked.append((name, dict(environ)))
        return dict(answer)

    monkeypatch.setattr(shim, "resolve", resolve)
    return asked, answer


# --- the shadow side's backend -----------------------------------------------------------------

def test_the_shadow_backend_is_what_the_shadow_sides_environment_makes_of_the_request(monkeypatch, resolved):
    asked, _ = resolved
    monkeypatch.setenv("KEPT", "1")
    monkeypatch.setenv("TORCH_DIST_USE_NCCL2", "0")
    assert shadow_backend("nccl", {"TORCH_DIST_USE_NCCL2": None, "ADDED": "2"}) == "gloo"
    ((name, environ),) = asked
    assert name == "nccl"
    assert environ["KEPT"] == "1" and environ["ADDED"] == "2" and "TORCH_DIST_USE_NCCL2" not in environ
    shadow_backend("nccl", {"TORCH_DIST_USE_NCCL2": None, "NOT_SET_ANYWHERE": None})  # nothing to unset: fine


def test_the_shadow_sides_backend_variable_wins_and_nothing_asked_means_nccl(resolved):
    asked, _ = resolved
    shadow_backend("gloo", {BACKEND_VARIABLE: "migrate-nccl2"})
    shadow_backend(None, {})
    shadow_backend("gloo", {BACKEND_VARIABLE: ""})
    assert [name for name, _ in asked] == ["migrate-nccl2", "nccl", "gloo"]


def test_a_shadow_backend_that_resolves_to_nothing_is_refused_with_the_reason(resolved):
    _, answer = resolved
    answer.update(error="TORCH_DIST_USE_NCCL2=2 is not valid")
    with pytest.raises(ShadowError, match=r"^nccl-migrate ab --shadow: the shadow side cannot run here: backend "
                                          r"'nccl' resolves to nothing: TORCH_DIST_USE_NCCL2=2 is not valid$"):
        shadow_backend("nccl", {})
    answer.update(error=None, backend=None, reason="no NCCL here")
    with pytest.raises(ShadowError, match="resolves to nothing: no NCCL here$"):
        shadow_backend("nccl", {})


def test_the_real_shim_resolves_a_non_nccl_name_as_given():
    assert shadow_backend(None, {BACKEND_VARIABLE: "gloo"}) == "gloo"


# --- cloned arguments --------------------------------------------------------------------------

def test_clones_are_new_tensors_of_the_same_values_in_containers_of_the_same_kind():
    t = torch.arange(3.0, requires_grad=True)
    clone = _clone(t)
    assert torch.equal(clone, t) and clone.data_ptr() != t.data_ptr() and not clone.requires_grad
    pair = _clone((t, [t, 5]))
    assert type(pair) is tuple and type(pair[1]) is list and pair[1][1] == 5
    assert pair[0].data_ptr() != t.data_ptr() and pair[1][0].data_ptr() != t.data_ptr()
    group = object()
    assert _clone(group) is group and _clone(None) is None


# --- one op's shadow ---------------------------------------------------------------------------

def _shadow_group():
    return c10d.new_group(backend="gloo")


def test_a_shadow_op_runs_on_clones_in_its_shadow_group_and_matches_the_primary(world_of_one):
    group = _shadow_group()
    t = torch.arange(4.0)
    op = ShadowOp(dist.all_reduce, BY_FUNCTION["all_reduce"], {"tensor": t, "op": dist.ReduceOp.SUM}, group, False)
    assert op.arguments["group"] is group and op.arguments["tensor"].data_ptr() != t.data_ptr()
    assert op.name == "all_reduce" and op.view.outputs[0] is op.arguments["tensor"]
    t.add_(100)  # the primary overwrites its input: the shadow's copy keeps what the op was given
    op.issue()
    assert op.error is None and op.ms >= 0
    record = op.judge([torch.arange(4.0)], digest_of([torch.arange(4.0)]))
    assert record == {"ms": record["ms"], "out": digest_of([torch.arange(4.0)])}
    assert record["ms"] >= op.ms


def test_a_shadows_time_is_in_milliseconds_until_its_op_returned_or_its_work_completed():
    def slow(**arguments):
        time.sleep(0.05)

    op = ShadowOp(slow, BY_FUNCTION["all_reduce"], {"tensor": torch.ones(1)}, "g", False)
    op.issue()
    assert 50 <= op.ms < 5000
    time.sleep(0.1)
    record = op.judge([torch.ones(1)], digest_of([torch.ones(1)]))
    assert record["ms"] == op.ms  # a synchronous op's time ends when it returned, not at the judgement

    class Work:
        def wait(self):
            time.sleep(0.05)

    op = ShadowOp(lambda **a: Work(), BY_FUNCTION["all_reduce"], {"tensor": torch.ones(1)}, "g", False)
    op.issue()
    record = op.judge([torch.ones(1)], digest_of([torch.ones(1)]))
    assert 50 <= record["ms"] < 5000 and record["ms"] >= op.ms


def test_a_shadow_whose_outputs_differ_is_measured_against_the_primarys(world_of_one):
    op = ShadowOp(dist.all_reduce, BY_FUNCTION["all_reduce"], {"tensor": torch.ones(4)}, _shadow_group(), False)
    op.issue()
    primary = [torch.tensor([1.0, 1.0, 1.5, 1.0])]
    record = op.judge(primary, digest_of(primary))
    assert record["out"] == digest_of([torch.ones(4)])
    assert record["measured"]["max_abs_error"] == 0.5
    assert record["measured"]["max_rel_error"] == pytest.approx(0.5 / 1.5)
    assert record["measured"]["needed"] > 0


def test_a_perturbed_shadow_flips_a_bit_of_its_output_and_so_differs(world_of_one):
    op = ShadowOp(dist.all_reduce, BY_FUNCTION["all_reduce"], {"tensor": torch.ones(4)}, _shadow_group(), True)
    op.issue()
    record = op.judge([torch.ones(4)], digest_of([torch.ones(4)]))
    assert record["out"] != digest_of([torch.ones(4)]) and record["measured"]["max_abs_error"] > 0
    assert not torch.equal(op.arguments["tensor"], torch.ones(4))


def test_an_async_shadow_is_waited_for_before_it_is_judged(world_of_one):
    waited = []

    class Work:
        def wait(self):
            waited.append(True)

    def all_reduce(tensor, op=None, group=None, async_op=False):
        tensor.mul_(2)
        return [Work(), 3]  # a list of works and, as recv returns, a rank

    op = ShadowOp(all_reduce, BY_FUNCTION["all_reduce"], {"tensor": torch.ones(2), "async_op": True}, "g", False)
    op.issue()
    record = op.judge([torch.full((2,), 2.0)], digest_of([torch.full((2,), 2.0)]))
    assert waited == [True] and "measured" not in record and "error" not in record


def test_a_shadow_that_fails_to_issue_or_to_complete_records_its_error_only(world_of_one):
    def refused(**arguments):
        raise RuntimeError("the shadow backend refuses")

    op = ShadowOp(refused, BY_FUNCTION["all_reduce"], {"tensor": torch.ones(2)}, "g", False)
    op.issue()
    assert op.error == "RuntimeError: the shadow backend refuses" and op.ms >= 0
    record = op.judge([torch.ones(2)], "digest")
    assert record == {"error": "RuntimeError: the shadow backend refuses", "ms": op.ms, "out": None}

    class Failing:
        def wait(self):
            raise RuntimeError("timed out")

    op = ShadowOp(lambda **a: Failing(), BY_FUNCTION["all_reduce"], {"tensor": torch.ones(2)}, "g", False)
    op.issue()
    record = op.judge([torch.ones(2)], "digest")
    assert record["error"] == "RuntimeError: timed out" and record["out"] is None


def test_a_batch_shadow_sends_through_the_shadow_group_on_clones(world_of_one):
    group = _shadow_group()
    t = torch.ones(3)
    p2p = dist.P2POp(dist.isend, t, 0, tag=7)
    op = ShadowOp(dist.batch_isend_irecv, BY_FUNCTION["batch_isend_irecv"], {"p2p_op_list": [p2p]}, group, False)
    (copy,) = op.arguments["p2p_op_list"]
    assert copy.group is group and copy.peer == 0 and copy.tag == 7 and copy.op is dist.isend
    assert torch.equal(copy.tensor, t) and copy.tensor.data_ptr() != t.data_ptr()
    assert "group" not in op.arguments


# --- the shadow of a job --------------------------------------------------------------------------

def test_the_shadow_environment_is_json_and_a_bad_one_is_named():
    made = Shadow.from_environment('{"TORCH_DIST_USE_NCCL2": null, "X": "1"}', "rank=1,group=0,seq=5")
    assert made.env == {"TORCH_DIST_USE_NCCL2": None, "X": "1"}
    assert made.perturb.applies(1, "0", 5) and not made.perturb.applies(0, "0", 5)
    assert made.backend is None and made.groups == {}
    assert Shadow.from_environment("{}", None).perturb is None
    with pytest.raises(ValueError, match=r"^NCCL_MIGRATE_AB_SHADOW='\{nope' is not valid; it holds the shadow side's "
                                         r"environment as JSON \(nccl-migrate ab --shadow sets it\)$") as raised:
        Shadow.from_environment("{nope", None)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_the_world_and_each_new_group_get_a_shadow_group_with_the_shadow_backend(world_of_one, resolved):
    asked, _ = resolved
    s = Shadow({"X": "1"}, None)
    group = c10d.new_group(ranks=[0], backend="gloo")
    s.group_created(group, {"ranks": [0]})
    assert s.groups == {}  # before the world's shadow exists, nothing is shadowed
    s.world_created("gloo")
    assert s.backend == "gloo" and asked[0][0] == "gloo"
    world_shadow = s.groups[id(c10d._get_default_group())]
    assert world_shadow is not None and dist.get_backend(world_shadow) == "gloo"
    s.group_created(group, {"ranks": [0], "backend": "nccl", "pg_options": None, "group_desc": "mine"})
    assert dist.get_process_group_ranks(s.groups[id(group)]) == [0]
    assert s.groups[id(group)] is not group and s.groups[id(group)] is not world_shadow
    s.group_created(c10d.GroupMember.NON_GROUP_MEMBER, {"ranks": [0]})
    s.group_created(None, {"ranks": [0]})
    assert len(s.groups) == 2


def test_the_worlds_shadow_group_has_the_shadow_backend(world_of_one, monkeypatch, resolved):
    made = []
    monkeypatch.setattr(c10d, "new_group", lambda **kwargs: made.append(kwargs) or "shadow world")
    s = Shadow({}, None)
    s.world_created(None)
    assert made == [{"backend": "gloo"}] and s.groups == {id(c10d._get_default_group()): "shadow world"}


def test_a_group_shadow_passes_on_the_jobs_group_arguments_but_the_backend(world_of_one, monkeypatch):
    made = []
    monkeypatch.setattr(c10d, "new_group", lambda **kwargs: made.append(kwargs) or "shadow group")
    s = Shadow({}, None)
    s.backend = "gloo"
    arguments = {"ranks": [0], "timeout": 5, "backend": "nccl", "pg_options": "x", "use_local_synchronization": True,
                 "group_desc": "d", "device_id": None, "sort_ranks": False}
    s.group_created("group", arguments)
    assert made == [{"backend": "gloo", "ranks": [0], "timeout": 5, "use_local_synchronization": True,
                     "group_desc": "d", "device_id": None, "sort_ranks": False}]
    assert s.groups == {id("group"): "shadow group"}


def test_an_op_on_a_group_without_a_shadow_says_why(world_of_one):
    s = Shadow({}, None)
    op, why = s.prepare(dist.all_reduce, BY_FUNCTION["all_reduce"], {"tensor": torch.ones(2)}, "group", 0, "0", 3)
    assert op is None
    assert why == "its group has no shadow (created before the recorder, or not through new_group)"


def test_an_op_is_perturbed_only_where_the_perturbation_applies(world_of_one):
    s = Shadow({}, Perturbation("rank=0,group=g,seq=3"))
    s.groups[id("group")] = "shadow group"
    arguments = {"tensor": torch.ones(2)}
    op, why = s.prepare(dist.all_reduce, BY_FUNCTION["all_reduce"], arguments, "group", 0, "g", 3)
    assert why is None and op.perturb is True and op.arguments["group"] == "shadow group"
    assert s.prepare(dist.all_reduce, BY_FUNCTION["all_reduce"], arguments, "group", 0, "g", 4)[0].perturb is False
    assert s.prepare(dist.all_reduce, BY_FUNCTION["all_reduce"], arguments, "group", 1, "g", 3)[0].perturb is False
    s.perturb = None
    assert s.prepare(dist.all_reduce, BY_FUNCTION["all_reduce"], arguments, "group", 0, "g", 3)[0].perturb is False


# --- ops issued from C++ ------------------------------------------------------------------------------

def test_an_op_from_cpp_is_replayed_with_the_reduce_op_the_dispatcher_saw(world_of_one, monkeypatch):
    monkeypatch.setattr(shadow, "_originals", {"all_reduce": "torch's all_reduce"})
    s = Shadow({}, None)
    s.groups[id("group")] = "shadow group"
    t = torch.ones(2)
    op, why = s.prepare_hooked(BY_NAME["all_reduce"], [t], [t], None, "group", 0, "0", 1, dist.ReduceOp.MAX)
    assert why is None and op.fn == "torch's all_reduce"
    assert op.arguments["op"] == dist.ReduceOp.MAX and op.arguments["group"] == "shadow group"
    assert torch.equal(op.arguments["tensor"], t) and op.arguments["tensor"].data_ptr() != t.data_ptr()


def test_an_op_from_cpp_the_shadow_cannot_replay_says_why(world_of_one, monkeypatch):
    monkeypatch.setattr(shadow, "_originals", {"all_reduce": "torch's all_reduce"})
    s = Shadow({}, None)
    s.groups[id("group")] = "shadow group"
    t = torch.ones(2)
    assert s.prepare_hooked(BY_NAME["all_reduce"], [t], [t], None, "group", 0, "0", 1) == \
        (None, ("an op issued from C++ whose reduce op is not known (all_reduce): torch's hooks do not carry it and "
                "its dispatcher call was not seen (tensors created in inference mode?)"))
    assert s.prepare_hooked(BY_NAME["all_reduce"], [t, t], [t, t], None, "group", 0, "0", 1, dist.ReduceOp.SUM) == \
        (None, "an op issued from C++ with a tensor layout the shadow cannot replay (all_reduce)")
    unreplayable = next(spec for spec in BY_NAME.values() if spec.replay is None)
    assert s.prepare_hooked(unreplayable, [t], [t], None, "group", 0, "0", 1) == \
        (None, f"an op issued from C++ that the shadow cannot replay ({unreplayable.name})")


def test_an_op_from_cpp_is_replayed_from_its_outputs_and_root_and_perturbed_where_planted(world_of_one, monkeypatch):
    monkeypatch.setattr(shadow, "_originals", {"all_gather": "torch's all_gather", "broadcast": "torch's broadcast"})
    s = Shadow({}, Perturbation("rank=0,group=g,seq=4"))
    world = c10d._get_default_group()
    s.groups[id(world)] = "shadow group"
    t, out = torch.ones(2), torch.zeros(2)
    op, why = s.prepare_hooked(BY_NAME["all_gather"], [t], [out], None, world, 0, "g", 4)
    assert why is None and [o.tolist() for o in op.arguments["tensor_list"]] == [[0.0, 0.0]] and op.perturb is True
    op, why = s.prepare_hooked(BY_NAME["broadcast"], [t], [t], 0, world, 0, "g", 5)
    assert why is None and op.arguments["src"] == 0 and op.perturb is False


def test_an_op_from_cpp_that_does_not_reduce_needs_no_reduce_op(world_of_one, monkeypatch):
    monkeypatch.setattr(shadow, "_originals", {"barrier": "torch's barrier"})
    s = Shadow({}, None)
    s.groups[id("group")] = "shadow group"
    op, why = s.prepare_hooked(BY_NAME["barrier"], [], [], None, "group", 0, "0", 1)
    assert why is None and op.fn == "torch's barrier" and op.arguments == {"group": "shadow group"}
