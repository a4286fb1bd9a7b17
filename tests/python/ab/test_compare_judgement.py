"""How one op present on both sides is judged (a different call, a failed op, a digest never
computed, values measured live or from kept tensors, the tolerance), how an op missing on one side
is reported, and what observers see: on records made by hand, each side a few ranks' records."""

import pytest
import torch
from nccl_migrate.ab.compare import (
    compare,
    errors_between,
    received_messages,
    sent_messages,
)
from records_in_memory import Records


def op(seq, inp="i", out="o", t=None, rank=0, group="0", **more):
    return dict({"rank": rank, "group": group, "seq": seq, "op": "all_reduce", "dtype": "float32",
                 "in_shapes": [[2]], "out_shapes": [[2]], "reduce_op": "SUM", "peer": None,
                 "t": float(seq) if t is None else t, "in": inp, "out": out}, **more)


class Observer:
    def __init__(self):
        self.events = []

    def seen(self, label, entry):
        self.events.append(("seen", label, entry["rank"], entry["seq"]))

    def paired(self, key, status):
        self.events.append(("paired", key, status))

    def classified(self, key, position, cls):
        self.events.append(("classified", key, position, cls))


@pytest.mark.parametrize("field, value", [("op", "broadcast"), ("dtype", "float16"), ("in_shapes", [[3]]),
                                          ("out_shapes", [[3]]), ("reduce_op", "MAX"), ("peer", 1)])
def test_a_different_call_diverges_whatever_its_digests(field, value):
    result = compare(Records(op(0)), Records(op(0, **{field: value})))
    assert result.counts["divergent"] == 1
    assert result.first_divergence["reason"].startswith("a different call: all_reduce [[2]] on side a, ")


def test_a_different_call_is_named_by_its_op_and_shapes():
    result = compare(Records(op(0, out_shapes=[])), Records(op(0, op="broadcast", in_shapes=[[5]], out_shapes=[])))
    assert result.first_divergence["reason"] == "a different call: all_reduce [[2]] on side a, broadcast [[5]] on side b"


def test_a_failed_or_unfinished_op_diverges_naming_each_sides_error():
    result = compare(Records(op(0, error="Connection closed by peer")), Records(op(0)))
    assert result.first_divergence["reason"] == "side a: Connection closed by peer; side b: ok"
    result = compare(Records(op(0)), Records(op(0, error="timeout")))
    assert result.first_divergence["reason"] == "side a: ok; side b: timeout"
    for a, b in ((op(0, unfinished=True), op(0)), (op(0), op(0, unfinished=True))):
        assert compare(Records(a), Records(b)).counts["divergent"] == 1


def test_a_digest_never_computed_on_either_side_is_named():
    result = compare(Records(op(0, digests_unfinished=["in"])), Records(op(0)))
    assert result.counts["divergent"] == 1
    assert result.first_divergence["reason"].endswith("side a lacks ['in'], side b lacks []")


def test_equal_digests_are_identical_and_either_digest_differing_is_not():
    assert compare(Records(op(0)), Records(op(0))).counts["identical"] == 1
    assert compare(Records(op(0)), Records(op(0, out="X"))).counts["divergent"] == 1
    assert compare(Records(op(0)), Records(op(0, inp="X"))).counts["divergent"] == 1


def test_errors_measured_live_by_a_shadow_decide_against_the_tolerance():
    measured = {"max_abs_error": 0.5, "max_rel_error": 0.25, "needed": 0.01}
    a, b = Records(op(0)), Records(op(0, out="X", measured=measured))
    assert compare(a, b, tolerance=0.01).counts["within_tolerance"] == 1
    assert compare(a, b, tolerance=0.009).counts["divergent"] == 1
    result = compare(a, b)  # no tolerance: any difference diverges
    assert result.counts["divergent"] == 1
    assert (result.first_divergence["max_abs_error"], result.first_divergence["max_rel_error"]) == (0.5, 0.25)
    zero = Records(op(0, out="X", measured=dict(measured, needed=0.0)))
    assert compare(a, zero, tolerance=0.0).counts["divergent"] == 1


def test_kept_tensors_measure_the_error_and_decide_against_the_tolerance():
    x, y = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.002])
    a = Records(op(0), kept={(0, 0): {"in": [x], "out": [x]}})
    b = Records(op(0, out="X"), kept={(0, 0): {"in": [x], "out": [y]}})
    assert compare(a, b, tolerance=0.0011).counts["within_tolerance"] == 1  # |0.002| <= 0.0011 * max(1, 2)
    assert compare(a, b, tolerance=0.0009).counts["divergent"] == 1
    first = compare(a, b).first_divergence
    assert first["max_abs_error"] == pytest.approx(0.002, rel=1e-3) and first["max_rel_error"] == pytest.approx(0.001, rel=1e-3)
    assert "reason" not in first


def test_without_kept_tensors_on_both_sides_the_error_is_unknown():
    x = torch.tensor([1.0])
    for kept_a, kept_b in (({(0, 0): {"in": [x], "out": [x]}}, None), (None, {(0, 0): {"in": [x], "out": [x]}})):
        first = compare(Records(op(0), kept=kept_a), Records(op(0, out="X"), kept=kept_b)).first_divergence
        assert (first["max_abs_error"], first["max_rel_error"]) == (None, None)
        assert first["reason"] == "digests differ; error unknown (rerun with --keep-tensors to measure it)"


def test_kept_tensors_tell_whether_inputs_differed_where_digests_cannot():
    x, y = torch.tensor([1.0]), torch.tensor([2.0])
    same_in = compare(Records(op(0, inp="gpu:1", out="gpu:2"), kept={(0, 0): {"in": [x], "out": [x]}}),
                      Records(op(0, inp="1", out="2"), kept={(0, 0): {"in": [x], "out": [y]}}))
    assert same_in.classes["backend"] == 1 and same_in.first_divergence["inputs_differed_on_ranks"] == []
    other_in = compare(Records(op(0, inp="gpu:1", out="gpu:2"), kept={(0, 0): {"in": [x], "out": [x]}}),
                       Records(op(0, inp="1", out="2"), kept={(0, 0): {"in": [y], "out": [y]}}))
    assert other_in.classes["job_nondeterminism"] == 1 and other_in.first_divergence["inputs_differed_on_ranks"] == [0]
    assert "inputs_differed" not in other_in.first_divergence


def test_a_description_names_the_op_its_single_shape_and_the_object_collective():
    first = compare(Records(op(3, rank=1, group="2", peer=None, object_collective="gather_object")),
                    Records(op(3, rank=1, group="2", out="X"))).first_divergence
    assert {k: first[k] for k in ("rank", "group", "seq", "op", "dtype", "shape", "reduce_op", "peer",
                                  "object_collective")} == {
        "rank": 1, "group": "2", "seq": 3, "op": "all_reduce", "dtype": "float32", "shape": [2], "reduce_op": "SUM",
        "peer": None, "object_collective": "gather_object"}
    two = compare(Records(op(0, out_shapes=[[2], [3]])), Records(op(0, out_shapes=[[2], [3]], out="X"))).first_divergence
    assert two["shape"] == [[2], [3]]
    inputs_only = compare(Records(op(0, out_shapes=[])), Records(op(0, out_shapes=[], out="X"))).first_divergence
    assert inputs_only["shape"] == [2]


def test_the_first_missing_op_is_the_earliest_by_op_order_then_rank_whatever_the_clocks_say():
    a = Records(op(0), op(1, t=5.0), op(0, rank=1), op(1, rank=1, t=0.5), op(2, rank=1, t=3.0))
    b = Records(op(0), op(0, rank=1), op(7, rank=0, t=9.0))
    result = compare(a, b)
    assert result.counts == {"identical": 2, "within_tolerance": 0, "divergent": 0, "missing_in_a": 1, "missing_in_b": 3}
    # rank 0's op 1 and rank 1's op 1 are both each rank's second op: the lower rank's, though
    # rank 1's clock says it came first.
    assert result.first_missing == {"rank": 0, "group": "0", "seq": 1, "op": "all_reduce", "dtype": "float32",
                                    "shape": [2], "reduce_op": "SUM", "peer": None, "missing_on": "b"}
    later_rank_earlier_op = compare(Records(op(0), op(1), op(2, rank=1)), Records(op(0)))
    assert (later_rank_earlier_op.first_missing["rank"], later_rank_earlier_op.first_missing["seq"]) == (1, 2)
    assert compare(Records(), Records(op(0))).first_missing["missing_on"] == "a"
    assert compare(Records(op(0)), Records(op(0))).first_missing is None


def test_observers_see_each_record_each_pair_and_each_class_with_its_position():
    observer = Observer()
    compare(Records(op(0), op(1), op(0, rank=1)), Records(op(0), op(1, out="X"), op(0, rank=1)), observers=[observer])
    assert observer.events == [
        ("seen", "a", 0, 0), ("seen", "b", 0, 0), ("paired", (0, "0", 0), "identical"),
        ("seen", "a", 0, 1), ("seen", "b", 0, 1), ("paired", (0, "0", 1), "divergent"),
        ("seen", "a", 1, 0), ("seen", "b", 1, 0), ("paired", (1, "0", 0), "identical"),
        ("classified", (0, "0", 1), 1, "backend")]
    missing = Observer()
    compare(Records(op(0)), Records(), observers=[missing])
    assert missing.events == [("seen", "a", 0, 0), ("paired", (0, "0", 0), "missing_in_b")]


def test_a_batch_passes_what_it_sent_to_its_receivers_inputs():
    messages_a = [["send", "0/p2p 0>1", 0], ["recv", "0/p2p 1>0", 0]]
    batch_a = op(0, group="0/batch 0", messages=messages_a)
    batch_b = op(0, group="0/batch 0", messages=messages_a, inp="I", out="O")
    recv_a = op(0, rank=1, group="0/p2p 0>1", t=1.0)
    recv_b = op(0, rank=1, group="0/p2p 0>1", t=1.0, out="X")
    result = compare(Records(batch_a, recv_a), Records(batch_b, recv_b))
    classes = {(d["rank"], d["group"]): d["class"] for d in result.divergences}
    # Rank 0's batch sent a different message: rank 1's recv took it, so its output differs from that.
    assert classes == {(0, "0/batch 0"): "job_nondeterminism", (1, "0/p2p 0>1"): "job_nondeterminism"}
    assert sent_messages(batch_a) == [("0/p2p 0>1", 0)] and received_messages(batch_a) == [("0/p2p 1>0", 0)]
    assert sent_messages(op(0)) == [] and received_messages(op(0)) == []


def test_an_op_within_tolerance_is_not_listed_but_makes_later_inputs_propagated():
    measured = {"max_abs_error": 1e-7, "max_rel_error": 1e-7, "needed": 1e-7}
    a = Records(op(0), op(1, rank=0))
    b = Records(op(0, out="X", measured=measured), op(1, rank=0, inp="Y", out="Z"))
    result = compare(a, b, tolerance=1e-6)
    assert result.counts["within_tolerance"] == 1 and result.classes["propagated"] == 1
    assert [d["seq"] for d in result.divergences] == [1]


def test_errors_between_tensors_of_other_shapes_or_nothing():
    assert errors_between([torch.ones(2)], [torch.ones(3)]) == (float("inf"),) * 3
    assert errors_between([torch.empty(0)], [torch.empty(0)]) == (0.0, 0.0, 0.0)
    assert errors_between([torch.tensor([float("nan")])], [torch.tensor([1.0])])[0] == float("inf")
    # Relative to the first side's value; the tolerance never divides by less than 1.
    abs_err, rel_err, needed = errors_between([torch.tensor([0.5, 4.0])], [torch.tensor([0.25, 4.5])])
    assert (abs_err, rel_err, needed) == (0.5, 0.5, 0.25)
    assert errors_between([torch.tensor([0.0], dtype=torch.float64)], [torch.tensor([1e-300], dtype=torch.float64)])[1] > 1e6
    worst = errors_between([torch.tensor([1.0]), torch.tensor([10.0])], [torch.tensor([2.0]), torch.tensor([10.5])])
    assert worst == (1.0, 1.0, 1.0)
