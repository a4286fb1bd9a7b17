"""Every decision of the comparison held at its edge: each condition of each verdict (identical,
within tolerance, divergent, missing; each class of divergence) at its boundary and one step past
it, and each verdict with every condition but one holding. On records made by hand, in this
process (the mutation check runs these)."""

import math

import pytest
import torch
from nccl_migrate.ab import command, divergences
from nccl_migrate.ab.compare import Comparison, compare, errors_between
from nccl_migrate.ab.divergences import Divergences
from records_in_memory import Records


def op(seq, inp="i", out="o", t=None, rank=0, group="0", **more):
    return dict({"rank": rank, "group": group, "seq": seq, "op": "all_reduce", "dtype": "float32",
                 "in_shapes": [[1]], "out_shapes": [[1]], "reduce_op": "SUM", "peer": None,
                 "t": float(seq) if t is None else t, "in": inp, "out": out}, **more)


def _status(result):
    """The one status of a one-op comparison."""
    (status,) = [s for s, n in result.counts.items() if n]
    return status


def _comparison(classes=(), **counts):
    c = Comparison(0.0)
    c.counts.update(counts)
    c.classes.update(classes)
    return c


# --- the tolerance: |a - b| <= T * max(1, |a|), at T exactly and one ulp short ------------------------

def _kept(a_out, b_out, a_in=None, b_in=None):
    """One op whose output digests differ, both sides' tensors kept (inputs equal unless given)."""
    same_in = torch.tensor([0.0], dtype=torch.float64)
    kept_a = {(0, 0): {"in": [same_in if a_in is None else a_in], "out": [a_out]}}
    kept_b = {(0, 0): {"in": [same_in if b_in is None else b_in], "out": [b_out]}}
    return Records(op(0), kept=kept_a), Records(op(0, out="X"), kept=kept_b)


@pytest.mark.parametrize("a, b, needed", [
    (2.0, 2.5, 0.25),    # |a| > 1: relative to |a|
    (-4.0, -3.0, 0.25),  # its magnitude
    (0.5, 0.75, 0.25),   # |a| < 1: absolute (never divided by less than 1)
    (1.0, 1.25, 0.25),   # |a| = 1: both readings agree
    (0.0, 0.25, 0.25),
])
def test_an_error_exactly_at_the_tolerance_is_within_it_and_one_ulp_less_tolerance_is_not(a, b, needed):
    x, y = torch.tensor([a], dtype=torch.float64), torch.tensor([b], dtype=torch.float64)
    side_a, side_b = _kept(x, y)
    assert _status(compare(side_a, side_b, tolerance=needed)) == "within_tolerance"
    assert _status(compare(side_a, side_b, tolerance=math.nextafter(needed, 0.0))) == "divergent"
    assert _status(compare(side_a, side_b, tolerance=math.nextafter(needed, 1.0))) == "within_tolerance"


def test_the_tolerance_is_relative_to_side_as_value_not_side_bs():
    # |4 - 5| / max(1, 4) = 0.25; relative to side b it would be 0.2.
    side_a, side_b = _kept(torch.tensor([4.0], dtype=torch.float64), torch.tensor([5.0], dtype=torch.float64))
    assert _status(compare(side_a, side_b, tolerance=0.25)) == "within_tolerance"
    assert _status(compare(side_a, side_b, tolerance=0.24)) == "divergent"


def test_a_zero_tolerance_accepts_nothing_even_values_that_are_equal():
    """Digests differ although the values are equal (0.0 and -0.0: other bytes): needed is 0, and a
    tolerance of 0 means bitwise, so it diverges; the least positive tolerance accepts it."""
    side_a, side_b = _kept(torch.tensor([0.0]), torch.tensor([-0.0]))
    result = compare(side_a, side_b, tolerance=0.0)
    assert _status(result) == "divergent" and result.first_divergence["max_abs_error"] == 0.0
    assert _status(compare(side_a, side_b, tolerance=5e-324)) == "within_tolerance"


@pytest.mark.parametrize("tolerance, needed, status", [
    (0.25, 0.25, "within_tolerance"),
    (math.nextafter(0.25, 0.0), 0.25, "divergent"),
    (0.25, math.nextafter(0.25, 1.0), "divergent"),
    (0.0, 0.0, "divergent"),
    (5e-324, 0.0, "within_tolerance"),
])
def test_errors_a_shadow_measured_meet_the_same_edges(tolerance, needed, status):
    measured = {"max_abs_error": 1.0, "max_rel_error": 2.0, "needed": needed}
    result = compare(Records(op(0)), Records(op(0, out="X", measured=measured)), tolerance=tolerance)
    assert _status(result) == status


def test_only_side_bs_measurement_counts():
    """A shadow run measures on side b; a measurement on side a alone is no measurement."""
    measured = {"max_abs_error": 0.0, "max_rel_error": 0.0, "needed": 0.0}
    result = compare(Records(op(0, measured=measured)), Records(op(0, out="X")), tolerance=1.0)
    assert _status(result) == "divergent" and result.first_divergence["max_abs_error"] is None


def test_a_within_tolerance_verdict_needs_kept_tensors_on_both_sides():
    x = torch.tensor([1.0])
    both = _kept(x, x)
    assert _status(compare(*both, tolerance=1.0)) == "within_tolerance"
    for kept_a, kept_b in ((both[0].kept, None), (None, both[1].kept)):
        result = compare(Records(op(0), kept=kept_a), Records(op(0, out="X"), kept=kept_b), tolerance=1.0)
        assert _status(result) == "divergent" and result.first_divergence["max_abs_error"] is None


# --- errors_between ----------------------------------------------------------------------------------

def test_errors_are_the_worst_over_every_tensor_whichever_comes_first():
    small, large = torch.tensor([1.0]), torch.tensor([3.0])
    one = torch.tensor([0.0])
    tiny = torch.finfo(torch.float64).tiny
    assert errors_between([one, one], [small, large]) == (3.0, 3.0 / tiny, 3.0)  # relative to 0: divided by tiny
    assert errors_between([torch.tensor([4.0]), torch.tensor([2.0])], [torch.tensor([5.0]), torch.tensor([2.5])]) == (
        1.0, 0.25, 0.25)
    assert errors_between([torch.tensor([2.0]), torch.tensor([4.0])], [torch.tensor([2.5]), torch.tensor([5.0])]) == (
        1.0, 0.25, 0.25)


def test_an_empty_tensor_is_skipped_and_the_ones_after_it_still_count():
    assert errors_between([torch.empty(0), torch.tensor([1.0])], [torch.empty(0), torch.tensor([3.0])]) == (2.0, 2.0, 2.0)


def test_a_shape_that_differs_anywhere_is_an_unbounded_error():
    same = torch.tensor([1.0])
    assert errors_between([same, torch.ones(2)], [same, torch.ones(1, 2)]) == (float("inf"),) * 3
    assert errors_between([torch.ones(2, 1)], [torch.ones(1, 2)]) == (float("inf"),) * 3


def test_errors_are_measured_in_double_precision_whatever_the_dtype():
    # int8: 100 - (-100) overflows to -56 in int8; in double it is 200.
    worst = errors_between([torch.tensor([100], dtype=torch.int8)], [torch.tensor([-100], dtype=torch.int8)])
    assert worst == (200.0, 2.0, 2.0)
    # float32 cannot hold 1 + 2**-30: its difference from 1 exists only in double.
    a, b = torch.tensor([1.0 + 2 ** -30], dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64)
    assert errors_between([a], [b])[0] == 2 ** -30


def test_a_relative_error_next_to_zero_divides_by_the_least_normal_double():
    tiny = torch.finfo(torch.float64).tiny
    a = torch.tensor([tiny / 2], dtype=torch.float64)  # subnormal: still divided by tiny
    b = torch.tensor([tiny / 2 + tiny], dtype=torch.float64)
    assert errors_between([a], [b])[1] == 1.0


def test_nan_on_either_side_is_an_unbounded_error_and_nan_on_both_too():
    nan, one = torch.tensor([float("nan")]), torch.tensor([1.0])
    assert errors_between([one], [nan]) == (math.inf,) * 3
    assert errors_between([nan], [one]) == (math.inf,) * 3
    assert errors_between([nan], [nan]) == (math.inf,) * 3  # NaN never equals NaN: not a match


@pytest.mark.parametrize("a, b", [(math.inf, 1.0), (1.0, math.inf), (-math.inf, math.inf), (math.inf, -math.inf),
                                  (1e308, -1e308)])
def test_an_infinity_against_anything_but_itself_is_an_unbounded_error(a, b):
    """Side a's infinity once divided its infinite difference into NaN (and torch's nan_to_num had
    made that difference the largest double): the error came out 0, within any tolerance."""
    assert errors_between([torch.tensor([a], dtype=torch.float64)], [torch.tensor([b], dtype=torch.float64)]) == (
        math.inf,) * 3


def test_an_infinity_on_side_a_against_a_value_is_never_within_tolerance():
    side_a, side_b = _kept(torch.tensor([math.inf]), torch.tensor([1.0]))
    assert _status(compare(side_a, side_b, tolerance=1e-6)) == "divergent"
    assert compare(side_a, side_b).first_divergence["max_abs_error"] == math.inf


def test_equal_values_agree_infinities_included():
    a = torch.tensor([math.inf, -math.inf, 2.0], dtype=torch.float64)
    b = torch.tensor([math.inf, -math.inf, 2.5], dtype=torch.float64)
    assert errors_between([a], [b]) == (0.5, 0.25, 0.25)
    assert errors_between([torch.tensor([math.inf])], [torch.tensor([math.inf])]) == (0.0, 0.0, 0.0)


# --- identical, divergent: each digest, each side ----------------------------------------------------

@pytest.mark.parametrize("a, b, status", [
    (op(0), op(0), "identical"),
    (op(0), op(0, inp="X"), "divergent"),
    (op(0), op(0, out="X"), "divergent"),
    (op(0, inp=None, out=None), op(0, inp=None, out=None), "identical"),  # a barrier: nothing to hash
    (op(0, inp=None), op(0, inp="i"), "divergent"),
])
def test_identical_needs_both_digests_equal(a, b, status):
    assert _status(compare(Records(a), Records(b))) == status


@pytest.mark.parametrize("where", ["a", "b"])
@pytest.mark.parametrize("fact, value", [("error", "boom"), ("error", ""), ("unfinished", True),
                                         ("digests_unfinished", ["out"])])
def test_a_failed_unfinished_or_undigested_op_is_never_identical_on_either_side(where, fact, value):
    a, b = op(0), op(0)
    (a if where == "a" else b)[fact] = value
    assert _status(compare(Records(a), Records(b))) == "divergent"


@pytest.mark.parametrize("fact, value", [("unfinished", False), ("digests_unfinished", []), ("unfinished", None)])
def test_a_false_unfinished_flag_is_no_failure(fact, value):
    assert _status(compare(Records(op(0, **{fact: value})), Records(op(0, **{fact: value})))) == "identical"


def test_a_failed_ops_reason_names_each_sides_error_and_an_undigested_ops_what_it_lacks():
    both = compare(Records(op(0, error="x")), Records(op(0, error="y")))
    assert both.first_divergence["reason"] == "side a: x; side b: y"
    unfinished = compare(Records(op(0, unfinished=True)), Records(op(0)))
    assert unfinished.first_divergence["reason"] == "side a: ok; side b: ok"
    lacking = compare(Records(op(0)), Records(op(0, digests_unfinished=["in", "out"])))
    assert lacking.first_divergence["reason"] == (
        "a GPU digest was never computed (its stream did not get there before the rank exited): side a lacks [], "
        "side b lacks ['in', 'out']")


def test_a_call_that_differs_is_judged_before_a_failure_on_either_side():
    result = compare(Records(op(0, error="boom")), Records(op(0, op="broadcast")))
    assert result.first_divergence["reason"].startswith("a different call")
    assert result.first_divergence["class"] == "backend_dependent_path"


# --- a device's digests against the host's -------------------------------------------------------------

@pytest.mark.parametrize("a, b, reason_starts", [
    (op(0, inp="gpu:1", out="gpu:2"), op(0, inp="1", out="3"), "the op's tensors were on a CUDA device"),
    (op(0, inp=None, out="gpu:2"), op(0, inp=None, out="3"), "the op's tensors were on a CUDA device"),
    (op(0, inp="gpu:1", out=None), op(0, inp="1", out="X"), "the op's tensors were on a CUDA device"),
    (op(0, inp="gpu:1", out="gpu:2"), op(0, inp="gpu:1", out="gpu:3"), "digests differ"),
    (op(0, inp="gpu1", out="gpu2"), op(0, inp="1", out="3"), "digests differ"),  # no prefix: host digests
])
def test_digests_from_a_device_on_one_side_only_are_not_compared(a, b, reason_starts):
    result = compare(Records(a), Records(b))
    assert result.first_divergence["reason"].startswith(reason_starts)
    not_compared = reason_starts.startswith("the op's")
    assert result.classes["not_compared"] == int(not_compared)
    assert result.classes["job_nondeterminism" if a["in"] != b["in"] and not not_compared else "backend"] == int(
        not not_compared)


def test_the_reason_for_digests_from_two_places_says_why_and_what_to_do():
    result = compare(Records(op(0, inp="gpu:1", out="gpu:2")), Records(op(0, inp="1", out="2")))
    assert result.first_divergence["reason"] == (
        "the op's tensors were on a CUDA device on one side and in host memory on the other (the job places them by "
        "backend), so their digests cannot match; rerun with --keep-tensors to compare values")


def test_kept_tensors_tell_apart_inputs_that_digests_from_two_places_cannot():
    x, y = torch.tensor([1.0]), torch.tensor([2.0])
    a = op(0, inp="gpu:1", out="gpu:2")
    same = compare(Records(a, kept={(0, 0): {"in": [x], "out": [x]}}),
                   Records(op(0, inp="1", out="2"), kept={(0, 0): {"in": [x], "out": [y]}}))
    assert same.classes["backend"] == 1 and same.classes["not_compared"] == 0
    other = compare(Records(a, kept={(0, 0): {"in": [x], "out": [x]}}),
                    Records(op(0, inp="1", out="2"), kept={(0, 0): {"in": [y], "out": [y]}}))
    assert other.classes["job_nondeterminism"] == 1
    assert "inputs_differed" not in other.first_divergence and "inputs_differed" not in same.first_divergence


# --- missing ------------------------------------------------------------------------------------------

def test_an_op_on_one_side_only_is_missing_on_the_other():
    assert _status(compare(Records(op(0)), Records())) == "missing_in_b"
    assert _status(compare(Records(), Records(op(0)))) == "missing_in_a"
    assert compare(Records(op(0)), Records(op(0, group="1"))).counts == {
        "identical": 0, "within_tolerance": 0, "divergent": 0, "missing_in_a": 1, "missing_in_b": 1}


def test_the_first_missing_op_on_a_tie_of_op_order_is_the_lower_ranks_and_the_clock_decides_nothing():
    result = compare(Records(op(3, t=1.0, rank=0), op(3, t=1.0, rank=1)), Records())
    assert result.first_missing["rank"] == 0
    later = compare(Records(op(3, t=1.0, rank=0), op(3, t=math.nextafter(1.0, 0.0), rank=1)), Records())
    assert later.first_missing["rank"] == 0
    # one op further in rank 0's order than in rank 1's: rank 1's is first
    by_order = compare(Records(op(2, rank=0), op(3, rank=0), op(3, rank=1)), Records(op(2, rank=0)))
    assert (by_order.first_missing["rank"], by_order.first_missing["seq"]) == (1, 3)


# --- the comparison's verdict properties, each condition toggled -------------------------------------

def test_identical_holds_only_with_no_divergent_and_no_missing_op():
    assert _comparison(identical=1, within_tolerance=1).identical
    for count in ("divergent", "missing_in_a", "missing_in_b"):
        assert not _comparison(identical=1, **{count: 1}).identical, count


def test_backend_implicated_and_path_differs_from_one_op_of_their_class():
    assert not _comparison().backend_implicated and _comparison({"backend": 1}).backend_implicated
    assert not _comparison().path_differs and _comparison({"backend_dependent_path": 1}).path_differs
    assert not _comparison({c: 1 for c in ("propagated", "job_nondeterminism", "not_compared")}).backend_implicated


JOB_ONLY = {"classes": {"job_nondeterminism": 1, "propagated": 3}, "divergent": 4}


@pytest.mark.parametrize("broken", [
    {"divergent": 0}, {"classes": {"job_nondeterminism": 1, "backend": 1}}, {"classes": {"job_nondeterminism": 0}},
    {"classes": {"job_nondeterminism": 1, "backend_dependent_path": 1}},
    {"classes": {"job_nondeterminism": 1, "not_compared": 1}}, {"missing_in_a": 1}, {"missing_in_b": 1},
])
def test_job_nondeterminism_only_fails_when_any_one_of_its_conditions_does(broken):
    assert _comparison(JOB_ONLY["classes"], divergent=JOB_ONLY["divergent"]).job_nondeterminism_only
    classes = dict(JOB_ONLY["classes"], **broken.get("classes", {}))
    counts = {"divergent": JOB_ONLY["divergent"], **{k: v for k, v in broken.items() if k != "classes"}}
    assert not _comparison(classes, **counts).job_nondeterminism_only


def test_a_comparison_counts_every_status_and_has_no_first_divergence_without_one():
    c = _comparison(identical=1, within_tolerance=2, divergent=3, missing_in_a=4, missing_in_b=5)
    assert c.compared == 15 and c.first_divergence is None
    c.divergences = [{"seq": 1}, {"seq": 2}]
    assert c.first_divergence == {"seq": 1}


def test_divergences_after_an_op_within_tolerance_are_said_to_follow_from_it_not_called_missing_ops():
    measured = {"max_abs_error": 1e-9, "max_rel_error": 1e-9, "needed": 1e-9}
    result = compare(Records(op(0), op(1)), Records(op(0, out="X", measured=measured), op(1, inp="Y", out="Z")),
                     tolerance=1e-6)
    assert result.counts["within_tolerance"] == 1 and result.classes["propagated"] == 1
    assert command.judge(result, True)[1].startswith("divergent: 1 op(s) followed from ops that differed within")


# --- the classes, at the edge of each condition ---------------------------------------------------------

def _classes(build):
    d = Divergences()
    try:
        build(d)
        result = d.conclude()
        return {(e["rank"], e["group"], e["seq"]): e["class"] for e in result.earliest()}
    finally:
        d.close()


def _desc(key):
    return {"rank": key[0], "group": key[1], "seq": key[2], "op": "all_reduce"}


@pytest.mark.parametrize("first, cls", [
    (math.nextafter(2.0, 0.0), "propagated"),   # one step before the input differed
    (2.0, "job_nondeterminism"),                # at the same time: its own first difference
    (math.nextafter(2.0, 3.0), "job_nondeterminism"),  # one step after: nothing before
])
def test_propagated_needs_an_earlier_difference_on_the_rank_whose_input_differed(first, cls):
    def build(d):
        d.differed_before(1, first)
        d.input_differed((1, "0", 5), 2.0)
        d.add((0, "0", 5), 2.0, 5, _desc((0, "0", 5)), False)  # rank 0's own input was the same
    assert _classes(build) == {(0, "0", 5): cls}


def test_an_earlier_difference_on_another_rank_than_the_one_whose_input_differed_is_not_a_cause():
    def build(d):
        d.differed_before(0, 0.5)  # rank 0 differed before, but its input to seq 5 did not
        d.input_differed((1, "0", 5), 2.0)
        d.add((0, "0", 5), 2.0, 5, _desc((0, "0", 5)), False)
    assert _classes(build) == {(0, "0", 5): "job_nondeterminism"}


def test_one_rank_whose_input_followed_from_an_earlier_difference_makes_the_op_propagated():
    def build(d):
        d.differed_before(2, 0.5)
        for rank in (1, 2, 3):
            d.input_differed((rank, "0", 5), 2.0)
        d.add((0, "0", 5), 2.0, 5, _desc((0, "0", 5)), False)
    assert _classes(build) == {(0, "0", 5): "propagated"}


def test_only_the_ops_own_group_and_seq_count_as_its_inputs():
    def build(d):
        d.input_differed((0, "0", 4), 1.0)  # the op before it
        d.input_differed((0, "1", 5), 1.0)  # another group's seq 5
        d.add((0, "0", 5), 2.0, 5, _desc((0, "0", 5)), False)
    assert _classes(build) == {(0, "0", 5): "backend"}


@pytest.mark.parametrize("path, earlier, cls", [
    (True, False, "backend_dependent_path"),
    (False, False, "job_nondeterminism"),
    (True, True, "propagated"),
    (False, True, "propagated"),
])
def test_a_different_call_is_a_path_unless_an_earlier_difference_explains_it(path, earlier, cls):
    def build(d):
        if earlier:
            d.differed_before(1, 1.0)
        d.input_differed((1, "0", 5), 2.0, path)
        d.input_differed((2, "0", 5), 2.0)  # another rank's data differed too: the path still names it
        d.add((0, "0", 5), 2.0, 5, _desc((0, "0", 5)), False)
    assert _classes(build) == {(0, "0", 5): cls}


@pytest.mark.parametrize("path", [False, True])
def test_values_not_compared_stay_not_compared_whatever_differed_going_in(path):
    def build(d):
        d.differed_before(0, 0.5)
        d.input_differed((0, "0", 5), 2.0, path)
        d.add((0, "0", 5), 2.0, 5, _desc((0, "0", 5)), True)
    assert _classes(build) == {(0, "0", 5): "not_compared"}


def test_a_batch_is_judged_by_each_message_it_received_and_by_its_own_inputs():
    def build(d):
        d.input_differed((2, "0/p2p 2>0", 1), 1.0, True)  # the second message's sender took another path
        d.add((0, "0/batch 0", 0), 2.0, 0, _desc((0, "0/batch 0", 0)), False,
              received=[("0/p2p 1>0", 0), ("0/p2p 2>0", 1)])
        d.input_differed((0, "0/batch 0", 1), 3.0)  # the batch's own sends differed
        d.add((0, "0/batch 0", 1), 3.0, 1, _desc((0, "0/batch 0", 1)), False, received=[("0/p2p 1>0", 1)])
        d.add((0, "0/batch 0", 2), 4.0, 2, _desc((0, "0/batch 0", 2)), False, received=[("0/p2p 2>0", 2)])
    assert _classes(build) == {(0, "0/batch 0", 0): "backend_dependent_path", (0, "0/batch 0", 1): "propagated",
                               (0, "0/batch 0", 2): "backend"}


def test_the_ranks_whose_input_differed_are_named_once_each_in_order_senders_included():
    d = Divergences()
    d.input_differed((3, "0", 5), 1.0)
    d.input_differed((1, "0", 5), 1.0)
    d.input_differed((1, "0", 5), 1.5)  # named twice, listed once
    d.input_differed((2, "0/p2p 2>0", 0), 1.0)
    d.input_differed((4, "0", 6), 1.0)  # another op's
    d.add((0, "0", 5), 2.0, 5, _desc((0, "0", 5)), False, received=[("0/p2p 2>0", 0)])
    assert d.conclude().earliest()[0]["inputs_differed_on_ranks"] == [1, 2, 3]
    d.close()


# --- the order and the limits ----------------------------------------------------------------------------

@pytest.mark.parametrize("count, listed", [(3, 3), (4, 3)])
def test_exactly_as_many_as_listed_are_listed_and_one_more_is_counted_only(monkeypatch, count, listed):
    monkeypatch.setattr(divergences, "LISTED", 3)
    monkeypatch.setattr(divergences, "SAMPLED", 3)
    d = Divergences()
    for position in range(count):
        d.add((0, "0", position), float(position), position, _desc((0, "0", position)), False)
    result = d.conclude()
    assert len(result.earliest()) == listed == len(result.samples()["backend"])
    assert result.counts()["backend"] == count
    d.close()


def test_the_order_is_by_position_then_rank_within_a_class_too():
    d = Divergences()
    for rank, position, t in ((2, 1, 0.1), (1, 1, 0.2), (0, 2, 0.0), (3, 0, 5.0)):
        d.add((rank, "0", position), t, position, _desc((rank, "0", position)), False)
    result = d.conclude()
    order = [(3, 0), (1, 1), (2, 1), (0, 2)]
    assert [(e["rank"], e["seq"]) for e in result.earliest()] == order
    assert [(e["rank"], e["seq"]) for e in result.samples()["backend"]] == order
    d.close()


def test_rows_held_below_the_batch_size_reach_disk_at_the_end(monkeypatch):
    monkeypatch.setattr(divergences, "BUFFERED", 3)
    d = Divergences()
    d.input_differed((0, "0", 0), 1.0)
    d.input_differed((0, "0", 1), 1.0)
    assert d.db.execute("SELECT COUNT(*) FROM differed").fetchone()[0] == 0  # one short of the batch
    d.input_differed((0, "0", 2), 1.0)
    assert d.db.execute("SELECT COUNT(*) FROM differed").fetchone()[0] == 3  # exactly the batch
    d.close()


# --- pairing, and what the comparison hands back ----------------------------------------------------------

def test_each_pair_holds_side_as_entry_first_whichever_side_reached_the_op_first():
    from nccl_migrate.ab.compare import pairs

    a = [op(0, inp="a0"), op(1, inp="a1"), op(2, inp="a2")]
    b = [op(1, inp="b1"), op(0, inp="b0"), op(2, inp="b2")]  # side b reaches seq 1 first
    assert [(key[2], ea["in"], eb["in"]) for key, ea, eb in pairs(a, b)] == [
        (1, "a1", "b1"), (0, "a0", "b0"), (2, "a2", "b2")]
    assert [(key[2], ea["in"], eb["in"]) for key, ea, eb in pairs(b, a)] == [
        (0, "b0", "a0"), (1, "b1", "a1"), (2, "b2", "a2")]


def test_the_comparison_keeps_its_tolerance_and_the_object_collectives_that_diverged():
    result = compare(Records(op(0, object_collective="gather_object")), Records(op(0, out="X")), tolerance=0.5)
    assert result.tolerance == 0.5 and result.object_collectives == {"gather_object": 1}
    assert compare(Records(op(0)), Records(op(0))).object_collectives == {}


def test_a_divergence_names_its_peer():
    result = compare(Records(op(0, op="broadcast", peer=2)), Records(op(0, op="broadcast", peer=2, out="X")))
    assert result.first_divergence["peer"] == 2 and result.first_divergence["op"] == "broadcast"


def _batch(inp, rank=0, t=2.0, seq=0, out="o", messages=(("send", "0/p2p 0>1", 0),)):
    return op(seq, inp=inp, out=out, t=t, rank=rank, group=f"0/batch {rank}", op="batch_isend_irecv",
              messages=[list(m) for m in messages])


def test_what_a_batch_sent_after_its_rank_diverged_is_propagated_to_its_receiver():
    # Rank 0 diverged at seq 0 of group 0; its batch then sent different data to rank 1's recv.
    a = Records(op(0, t=1.0), _batch("s"), op(0, rank=1, group="0/p2p 0>1", op="recv", t=3.0))
    b = Records(op(0, t=1.0, out="X"), _batch("S", out="O"),
                op(0, rank=1, group="0/p2p 0>1", op="recv", t=3.0, out="R"))
    result = compare(a, b)
    by_key = {(d["rank"], d["group"]): d for d in result.divergences}
    assert by_key[(1, "0/p2p 0>1")]["class"] == "propagated"
    assert by_key[(1, "0/p2p 0>1")]["inputs_differed_on_ranks"] == [0]


def test_what_a_batch_received_from_a_sender_whose_input_differed_is_not_the_backends():
    recv = (("recv", "0/p2p 1>0", 0),)
    a = Records(_batch("s", messages=recv), op(0, rank=1, group="0/p2p 1>0", op="send", inp="x", t=1.0))
    b = Records(_batch("s", messages=recv, out="O"), op(0, rank=1, group="0/p2p 1>0", op="send", inp="X", t=1.0))
    result = compare(a, b)
    batch = next(d for d in result.divergences if d["rank"] == 0)
    assert batch["class"] == "job_nondeterminism" and batch["inputs_differed_on_ranks"] == [1]
