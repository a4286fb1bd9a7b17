"""A job that takes another path under the other behaviour (it branches on the backend's type or
name) issues a different call at the same place on each side: the verdict names that path and
both calls first, never "job nondeterminism", and the first divergence is the same on every run
(earliest by op order, then the lowest rank, never by time). On records made by hand."""

import json

import pytest
from nccl_migrate.ab import command, report
from nccl_migrate.ab import compare as comparison
from nccl_migrate.ab.compare import compare
from nccl_migrate.ab.divergences import CAUSES, CLASSES
from nccl_migrate.ab.html import render_html
from nccl_migrate.ab.runner import SideRun
from nccl_migrate.ab.spec import Side
from records_in_memory import Records


def op(seq, rank=0, shape=(161,), inp=None, out=None, t=None, group="0", **more):
    """An all_reduce of ``shape``; its digests name its shape unless given (a digest covers it)."""
    digest = f"{list(shape)}@{rank}"
    return dict({"rank": rank, "group": group, "seq": seq, "op": "all_reduce", "dtype": "float32",
                 "in_shapes": [list(shape)], "out_shapes": [list(shape)], "reduce_op": "SUM", "peer": None,
                 "t": float(seq) if t is None else t, "in": inp or "in" + digest, "out": out or "out" + digest}, **more)


def _branch(ranks=(0, 1), t_b=None):
    """The issue's job: on each rank seq 0 the same, seq 1 a flat bucket of 161 elements on side a
    and a [16, 8] tensor on side b, which then issues one more all_reduce ([33])."""
    a, b = [], []
    for rank in ranks:
        t = 1.0 + 0.01 * (len(ranks) - rank)  # the higher rank issued first: time must not decide
        a += [op(0, rank, (4,)), op(1, rank, (161,), t=t)]
        b += [op(0, rank, (4,)), op(1, rank, (16, 8), t=t if t_b is None else t_b), op(2, rank, (33,), t=2.0)]
    return Records(*a), Records(*b)


# --- the class ---------------------------------------------------------------------------------------

def test_the_issues_job_is_a_backend_dependent_path_never_job_nondeterminism():
    result = compare(*_branch())
    assert result.counts == {"identical": 2, "within_tolerance": 0, "divergent": 2, "missing_in_a": 2,
                             "missing_in_b": 0}
    assert result.classes == {"backend_dependent_path": 2, "backend": 0, "propagated": 0, "job_nondeterminism": 0,
                              "not_compared": 0}
    assert result.path_differs and not result.backend_implicated and not result.job_nondeterminism_only
    first = result.first_divergence
    assert (first["rank"], first["group"], first["seq"], first["class"]) == (0, "0", 1, "backend_dependent_path")
    assert first["calls"] == {"a": "all_reduce SUM of float32 [161] (161 elements)",
                              "b": "all_reduce SUM of float32 [16, 8] (128 elements)"}
    assert first["cause"] == CAUSES["backend_dependent_path"] and first["inputs_differed_on_ranks"] == [0, 1]
    assert result.first_different_call == {k: v for k, v in first.items()
                                           if k not in ("cause", "inputs_differed_on_ranks", "class")}


@pytest.mark.parametrize("field, value", [("op", "broadcast"), ("dtype", "bfloat16"), ("in_shapes", [[160]]),
                                          ("out_shapes", [[16, 10]]), ("reduce_op", "MAX"), ("peer", 1)])
def test_each_part_of_a_call_that_differs_makes_it_a_path_whatever_the_digests(field, value):
    """Even with digests equal on both sides (a reduce op differs, nothing it read did), the op is
    the job's other path, never the backend's: the backend was given another call."""
    same = op(0)
    other = dict(op(0), **{field: value})
    result = compare(Records(same), Records(other))
    assert result.classes["backend_dependent_path"] == 1 and result.classes["backend"] == 0, result.classes
    assert result.first_divergence["calls"]["a"] != result.first_divergence["calls"]["b"]


def test_a_different_call_on_one_rank_makes_the_ranks_that_called_alike_its_path_too():
    """Rank 1 took the other path, rank 0 issued the same call on both sides: rank 0's output
    differs because rank 1's call did, not because the job's inputs differ between runs."""
    a = Records(op(0, 0, (8,)), op(0, 1, (8,)))
    b = Records(op(0, 0, (8,), out="X"), op(0, 1, (2, 4), out="X"))
    result = compare(a, b)
    assert [(d["rank"], d["class"], d["inputs_differed_on_ranks"]) for d in result.divergences] == [
        (0, "backend_dependent_path", [1]), (1, "backend_dependent_path", [1])]
    assert "calls" not in result.divergences[0] and result.first_different_call["rank"] == 1


def test_a_different_call_after_an_earlier_divergence_on_its_rank_follows_from_it():
    """A job that branches on a value the backend computed differently: the path is propagated."""
    a = Records(op(0, shape=(4,)), op(1, shape=(161,)))
    b = Records(op(0, shape=(4,), out="X"), op(1, shape=(16, 8)))
    result = compare(a, b)
    assert [(d["seq"], d["class"]) for d in result.divergences] == [(0, "backend"), (1, "propagated")]
    assert not result.path_differs and result.first_different_call["seq"] == 1


def test_the_same_call_with_inputs_the_job_made_differ_stays_job_nondeterminism():
    result = compare(Records(op(0, inp="i", out="o")), Records(op(0, inp="I", out="O")))
    assert result.classes["job_nondeterminism"] == 1 and result.classes["backend_dependent_path"] == 0
    assert result.first_different_call is None and "calls" not in result.first_divergence


def test_a_different_call_is_a_path_even_where_digests_came_from_a_gpu_on_one_side_only():
    a = Records(op(0, inp="gpu:1", out="gpu:2"))
    b = Records(op(0, shape=(16, 8), inp="1", out="2"))
    result = compare(a, b)
    assert result.classes["backend_dependent_path"] == 1 and result.classes["not_compared"] == 0


def test_a_batch_that_sent_by_another_path_makes_its_receivers_divergence_the_path():
    sent = [["send", "0/p2p 0>1", 0]]
    a = Records(op(0, 0, (4,), group="0/batch 0", op="batch_isend_irecv", messages=sent),
                op(0, 1, (4,), group="0/p2p 0>1", op="recv", peer=0))
    b = Records(op(0, 0, (2, 2), group="0/batch 0", op="batch_isend_irecv", messages=sent),
                op(0, 1, (4,), group="0/p2p 0>1", op="recv", peer=0, out="X"))
    result = compare(a, b)
    assert {d["rank"]: d["class"] for d in result.divergences} == {0: "backend_dependent_path",
                                                                   1: "backend_dependent_path"}


# --- calls in plain words ----------------------------------------------------------------------------

@pytest.mark.parametrize("entry, words", [
    (op(0, shape=(16, 8)), "all_reduce SUM of float32 [16, 8] (128 elements)"),
    (dict(op(0), op="all_gather_into_tensor", reduce_op=None, in_shapes=[[4]], out_shapes=[[8]]),
     "all_gather_into_tensor of float32 [4] (4 elements) into [8] (8 elements)"),
    (dict(op(0), op="all_gather", reduce_op=None, in_shapes=[[2]], out_shapes=[[2], [2], [2]]),
     "all_gather of float32 [2] (2 elements) into [[2], [2], [2]] (6 elements)"),
    (dict(op(0), op="send", reduce_op=None, dtype="int64", out_shapes=[], peer=3), "send of int64 [161] (161 elements) to rank 3"),
    (dict(op(0), op="isend", reduce_op=None, out_shapes=[], peer=0), "isend of float32 [161] (161 elements) to rank 0"),
    (dict(op(0), op="reduce", peer=1), "reduce SUM of float32 [161] (161 elements) to rank 1"),
    (dict(op(0), op="gather", reduce_op=None, peer=2, out_shapes=[]), "gather of float32 [161] (161 elements) to rank 2"),
    (dict(op(0), op="recv", reduce_op=None, in_shapes=[], peer=1), "recv of float32 [161] (161 elements) from rank 1"),
    (dict(op(0), op="broadcast", reduce_op=None, peer=0), "broadcast of float32 [161] (161 elements) from rank 0"),
    (dict(op(0), op="barrier", reduce_op=None, dtype=None, in_shapes=[], out_shapes=[]), "barrier"),
    (dict(op(0), in_shapes=[[]], out_shapes=[[]]), "all_reduce SUM of float32 [] (1 elements)"),
])
def test_a_call_in_plain_words(entry, words):
    assert comparison.call_words(entry) == words


# --- the order: by op, then rank ----------------------------------------------------------------------

def test_the_first_divergence_is_the_lowest_rank_at_the_earliest_op_however_the_clocks_fell():
    for t_b in (0.5, 1.5, None):
        result = compare(*_branch(ranks=(0, 1, 2), t_b=t_b))
        assert (result.first_divergence["rank"], result.first_divergence["seq"]) == (0, 1)
        assert [d["rank"] for d in result.divergences] == [0, 1, 2]
        assert result.first_different_call["rank"] == 0


def test_an_earlier_op_comes_first_whatever_its_rank_and_time():
    """Rank 2 diverged at its second op, rank 0 at its third: rank 2's is first although rank 0's
    was issued earlier by the clock and rank 0 is lower."""
    a = Records(op(0, 0), op(1, 0), op(2, 0, t=0.1), op(0, 2), op(1, 2, t=9.0), op(2, 2))
    b = Records(op(0, 0), op(1, 0), op(2, 0, shape=(16, 8), t=0.1), op(0, 2), op(1, 2, shape=(2,), t=9.0), op(2, 2))
    result = compare(a, b)
    assert [(d["rank"], d["seq"]) for d in result.divergences] == [(2, 1), (0, 2)]
    assert (result.first_different_call["rank"], result.first_different_call["seq"]) == (2, 1)


def test_the_first_different_call_is_the_earliest_one_not_the_first_divergence():
    """An earlier divergence of another class leads the list; the first different call is still
    named, the earliest of its kind by op order and then rank."""
    a = Records(op(0, 0, (4,)), op(1, 0, (161,)), op(0, 1, (4,)), op(1, 1, (161,)), op(2, 1, (161,)))
    b = Records(op(0, 0, (4,), out="X"), op(1, 0, (161,)), op(0, 1, (4,), out="X"), op(1, 1, (161,)),
                op(2, 1, (16, 8)))
    result = compare(a, b)
    assert result.first_divergence["class"] == "backend" and "calls" not in result.first_divergence
    assert (result.first_different_call["rank"], result.first_different_call["seq"]) == (1, 2)


# --- the reports ---------------------------------------------------------------------------------------

def _report(result):
    runs = [SideRun(Side(label, label, {}), f"/runs/{label}", None, None, 1.0) for label in ("a", "b")]
    exit_code, verdict = command.judge(result, False)
    return report.build(runs, [None, None], result, exit_code, verdict)


def test_the_json_report_leads_with_the_path_class_and_both_calls():
    built = json.loads(json.dumps(_report(compare(*_branch()))))
    assert built["verdict"].startswith("divergent, the job took a different path under each behaviour: at rank 0, "
                                       "group 0, seq 1 side a issued all_reduce SUM of float32 [161] (161 elements), "
                                       "side b all_reduce SUM of float32 [16, 8] (128 elements);")
    assert built["path_differs"] is True and built["backend_implicated"] is False
    assert next(iter(built["divergence_classes"])) == CLASSES[0] == "backend_dependent_path"
    assert next(iter(built["divergence_samples"])) == "backend_dependent_path"
    first = built["first_divergence"]
    assert first["class"] == "backend_dependent_path" and first["calls"]["b"].startswith("all_reduce SUM of float32 [16, 8]")
    assert built["first_different_call"]["calls"] == first["calls"]


def test_the_text_report_shows_both_calls_before_the_class_and_no_repeated_reason():
    lines = report.render_text(_report(compare(*_branch()))).splitlines()
    start = lines.index("  first divergence: rank 0, group 0, seq 1: a different call on each side")
    assert lines[start + 1:start + 4] == [
        "    side a issued all_reduce SUM of float32 [161] (161 elements)",
        "    side b issued all_reduce SUM of float32 [16, 8] (128 elements)",
        f"    class: backend dependent path; cause: {CAUSES['backend_dependent_path']} (on ranks 0, 1)"]
    assert lines[start - 1].startswith("  divergent ops by class: backend dependent path 2, backend 0, ")
    assert not any("a different call: all_reduce" in line for line in lines)  # the reason repeats the calls
    assert not any("first different call" in line for line in lines)  # it is the first divergence


def test_the_text_report_names_the_first_different_call_first_when_another_divergence_leads():
    a = Records(op(0, 0, (4,)), op(1, 0, (161,)))
    b = Records(op(0, 0, (4,), out="X"), op(1, 0, (161,)), op(2, 0, (2,)))
    a.entries += (op(0, 1, (4,)), op(1, 1, (161,)))
    b.entries += (op(0, 1, (4,)), op(1, 1, (16, 8)))
    built = _report(compare(a, b))
    lines = report.render_text(built).splitlines()
    assert lines[2:5] == ["  first different call: rank 1, group 0, seq 1: a different call on each side",
                          "    side a issued all_reduce SUM of float32 [161] (161 elements)",
                          "    side b issued all_reduce SUM of float32 [16, 8] (128 elements)"]
    assert "  first divergence: rank 0, group 0, seq 0: all_reduce float32 [4] SUM" in lines
    assert "    only outputs differ" not in lines


def test_the_html_report_shows_both_calls_first_in_its_tables():
    built = _report(compare(*_branch()))
    page = render_html(built, {"a": None, "b": None})
    assert ("<h2>First divergence</h2><table><tr><td>side a issued</td><td>all_reduce SUM of float32 [161] "
            "(161 elements)</td></tr><tr><td>side b issued</td><td>all_reduce SUM of float32 [16, 8] (128 elements)"
            "</td></tr><tr><td>rank</td><td>0</td></tr>") in page
    assert "<tr><td>the job took a different path</td><td>yes</td></tr>" in page
    assert "<tr><td>divergent: backend dependent path</td><td>2</td></tr>" in page
    assert "First different call" not in page and "a different call: all_reduce" not in page
    led = dict(built, first_divergence={"rank": 0, "group": "0", "seq": 0, "op": "all_reduce", "class": "backend"})
    page = render_html(led, {"a": None, "b": None})
    assert page.index("<h2>First different call</h2><table><tr><td>side a issued</td>") < page.index(
        "<h2>First divergence</h2><table><tr><td>rank</td>")
    assert "<tr><td>the job took a different path</td><td>no</td></tr>" in render_html(
        dict(built, path_differs=False), {"a": None, "b": None})
