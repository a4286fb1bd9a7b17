"""The A/B report as a dict (what --format json prints) and as text: every line a reader sees, for
a run that shows them all, and each side's outcome in a few words."""

import types

import pytest

from nccl_migrate.ab.compare import Comparison
from nccl_migrate.ab.report import build, outcome, render_text, side_summary
from nccl_migrate.ab.runner import SideRun
from nccl_migrate.ab.side_stats import SideStats
from nccl_migrate.ab.spec import Side

FIRST = {"rank": 1, "group": "0", "seq": 7, "op": "all_reduce", "dtype": "torch.float32", "shape": [4],
         "reduce_op": "SUM", "class": "job_nondeterminism", "cause": "inputs differed", "inputs_differed_on_ranks": [0, 1],
         "max_abs_error": 0.5, "max_rel_error": 0.25, "reason": "the job's own seed differs",
         "object_collective": "all_gather_object"}
BACKEND = {"rank": 0, "group": "2", "seq": 9, "op": "broadcast", "dtype": "torch.int64", "shape": [2, 3]}
FULL = {
    "verdict": "divergent: the backend is implicated", "mode": "shadow",
    "ops_compared": 20, "identical": 15, "within_tolerance": 1, "divergent": 3, "missing_in_a": 0, "missing_in_b": 1,
    "not_shadowed": {"count": 2, "first": {"rank": 0, "group": "1", "seq": 3, "op": "gather", "reason": "issued from C++"}},
    "first_divergence": FIRST,
    "divergence_classes": {"backend": 1, "propagated": 0, "job_nondeterminism": 2},
    "object_collectives": {"all_gather_object": 2, "broadcast_object_list": 1},
    "divergence_samples": {"job_nondeterminism": [FIRST], "backend": [BACKEND, FIRST], "propagated": []},
    "first_missing": {"missing_on": "b", "rank": 1, "group": "0", "seq": 19, "op": "barrier", "dtype": "-", "shape": []},
    "sides": {
        "a": {"spec": "legacy", "failure": None, "backend": ["nccl: ProcessGroupNCCL"], "wall_seconds": 12.5,
              "init_seconds": 1.23456, "peak_rss_mib": {0: 100.0}, "communicators": {0: ["x", "y"], 1: ["z"]},
              "op_counts": {"all_reduce": 4, "send": 1},
              "latency_ms": {"all_reduce": {"p50": 1.0, "p90": 2.0, "p99": 3.0}}},
        "b": {"spec": "rewritten", "failure": "side b (rewritten): rank 1 was killed by SIGKILL",
              "fault": {"kind": "died", "rank": 1, "signal": "SIGKILL", "exit_code": None},
              "backend": [], "wall_seconds": 3.0, "init_seconds": None, "peak_rss_mib": {},
              "communicators": {0: ["x"]}, "op_counts": {"all_reduce": 2, "recv": 1}, "latency_ms": {}},
    },
}


def test_every_line_of_the_text_report():
    assert render_text(FULL).splitlines() == [
        "nccl-migrate ab: divergent: the backend is implicated",
        "  shadow run: side a is what the job saw; side b ran each op again on shadow groups",
        "  ops compared 20: identical 15, within tolerance 1, divergent 3, missing on a 0, missing on b 1",
        "  not shadowed 2 (first: rank 0, group 1, seq 3: gather, issued from C++)",
        "  divergent ops by class: backend 1, propagated 0, job nondeterminism 2",
        "  divergent ops inside object collectives (pickled objects): all_gather_object 2, broadcast_object_list 1",
        "  first divergence: rank 1, group 0, seq 7: all_reduce torch.float32 [4] SUM (inside all_gather_object)",
        "    class: job nondeterminism; cause: inputs differed (ranks [0, 1])",
        "    max abs error 0.5, max rel error 0.25",
        "    the job's own seed differs",
        "  first backend divergence: rank 0, group 2, seq 9: broadcast torch.int64 [2, 3]",
        "  first op missing on side b: rank 1, group 0, seq 19: barrier - []",
        "",
        "                           a: legacy                                      b: rewritten",
        "  outcome                  ok                                             rank 1 died (SIGKILL)",
        "  backend                  ['nccl: ProcessGroupNCCL']                     []",
        "  wall time (s)            12.5                                           3.0",
        "  init time (s)            1.235                                          None",
        "  peak RSS per rank (MiB)  {0: 100.0}                                     {}",
        "  communicators rank 0     2                                              1",
        "  communicators rank 1     1                                              -",
        "  all_reduce               4 ops, p50/p90/p99 1.0/2.0/3.0 ms              2 ops",
        "  recv                     0 ops                                          1 ops",
        "  send                     1 ops                                          0 ops",
        "  side b (rewritten): rank 1 was killed by SIGKILL",
    ]


def test_a_run_with_nothing_to_say_but_its_sides():
    bare = {"verdict": "v", "sides": {"a": {"spec": "x", "failure": "side a failed"}, "b": {"spec": "y", "failure": None}}}
    assert render_text(bare).splitlines() == [
        "nccl-migrate ab: v", "",
        "                           a: x                                           b: y",
        "  outcome                  failed                                         ok",
        "  backend                  None                                           None",
        "  wall time (s)            None                                           None",
        "  init time (s)            None                                           None",
        "  peak RSS per rank (MiB)  None                                           None",
        "  side a failed",
    ]
    quiet = dict(bare, not_shadowed={"count": 0, "first": None}, first_divergence=None, first_missing=None)
    assert render_text(quiet) == render_text(bare)
    first = dict(FIRST, inputs_differed_on_ranks=[], reason=None, reduce_op=None, object_collective=None)
    del first["max_abs_error"]
    text = render_text(dict(bare, first_divergence=first, divergence_classes={"job_nondeterminism": 1}))
    assert "  first divergence: rank 1, group 0, seq 7: all_reduce torch.float32 [4]\n" in text
    assert "    class: job nondeterminism; cause: inputs differed\n" in text
    assert "max abs error" not in text and "object collectives" not in text and "first job" not in text


@pytest.mark.parametrize("side, said", [
    ({}, "ok"),
    ({"failure": "x"}, "failed"),
    ({"fault": {"kind": "died", "rank": 2, "signal": "SIGTERM"}}, "rank 2 died (SIGTERM)"),
    ({"fault": {"kind": "exited", "rank": 0, "signal": None, "exit_code": 3}}, "rank 0 exited (status 3)"),
    ({"fault": {"kind": "died", "rank": None, "signal": "SIGKILL"}, "failure": "x"}, "failed"),
    ({"fault": {"kind": "hung", "timeout": 30.0}}, "hung (timeout 30 s)"),
    ({"fault": {"kind": "hung", "timeout": None}}, "hung"),
    ({"fault": {"kind": "ended"}}, "ended by a signal"),
    ({"fault": {"kind": "vanished"}}, "failed"),
])
def test_a_sides_outcome_in_a_few_words(side, said):
    assert outcome(side) == said


def _run(label, text, failure=None):
    return SideRun(Side(label, text, {"K": "v"}), f"/runs/{label}", f"/runs/{label}/job.log", failure, 2.34567)


def test_a_sides_summary_from_its_run_records_and_stats():
    data = types.SimpleNamespace(
        metas={1: {"rank": 1, "backend": "nccl", "backend_class": "PGNCCL", "init_seconds": 2.5, "peak_rss_kib": 2048},
               0: {"rank": 0, "backend": "nccl", "backend_class": "PGNCCL", "init_seconds": None, "peak_rss_kib": 1536},
               2: {"rank": 2, "backend": None, "peak_rss_kib": 1000}},
        reports={1: {"communicators_created": [{"key": "k1", "purpose": "p2p"}]},
                 0: {"communicators_created": [{"key": "k0", "purpose": "collective"}]}},
        attempt=2)
    stats = SideStats()
    stats.seen("b", {"rank": 0, "op": "send", "ms": 1.0})
    assert side_summary(_run("b", "rewritten"), data, stats) == {
        "spec": "rewritten", "env": {"K": "v"}, "directory": "/runs/b", "log": "/runs/b/job.log", "failure": None,
        "wall_seconds": 2.346, "backend": ["nccl: PGNCCL"], "init_seconds": 2.5,
        "peak_rss_mib": {0: 1.5, 1: 2.0, 2: 1.0}, "communicators": {0: ["k0 (collective)"], 1: ["k1 (p2p)"]},
        "restarts": 2, "op_counts": {"send": 1}, "latency_ms": {"send": {"p50": 1.0, "p90": 1.0, "p99": 1.0}}}
    assert list(side_summary(_run("b", "rewritten"), data, None)["communicators"]) == [0, 1]
    no_reports = types.SimpleNamespace(metas={0: {"rank": 0, "peak_rss_kib": 1024}}, reports={})
    summary = side_summary(_run("a", "legacy", "it failed"), no_reports, None)
    assert summary["communicators"] is None and summary["init_seconds"] is None and summary["restarts"] == 0
    assert summary["backend"] == [] and "op_counts" not in summary and summary["failure"] == "it failed"
    assert side_summary(_run("a", "legacy"), None, stats) == {
        "spec": "legacy", "env": {"K": "v"}, "directory": "/runs/a", "log": "/runs/a/job.log", "failure": None,
        "wall_seconds": 2.346}


def test_the_report_dict_holds_the_verdict_the_sides_and_the_comparison():
    comparison = Comparison(tolerance=0.1)
    comparison.counts.update(identical=3, divergent=1)
    comparison.classes["backend"] = 1
    comparison.divergences.append({"rank": 0})
    comparison.samples["backend"] = [{"rank": 0}]
    comparison.object_collectives["gather_object"] = 1
    comparison.first_missing = {"rank": 1}
    report = build([_run("a", "legacy"), _run("b", "rewritten")], [None, None], comparison, 1, "divergent")
    assert report["verdict"] == "divergent" and report["exit_code"] == 1
    assert list(report["sides"]) == ["a", "b"] and report["sides"]["b"]["spec"] == "rewritten"
    assert {k: report[k] for k in ("tolerance", "ops_compared", "identical", "divergent", "backend_implicated",
                                   "first_divergence", "divergences", "divergence_samples", "first_missing",
                                   "object_collectives")} == {
        "tolerance": 0.1, "ops_compared": 4, "identical": 3, "divergent": 1, "backend_implicated": True,
        "first_divergence": {"rank": 0}, "divergences": [{"rank": 0}], "divergence_samples": {"backend": [{"rank": 0}]},
        "first_missing": {"rank": 1}, "object_collectives": {"gather_object": 1}}
    assert report["divergence_classes"]["backend"] == 1
    assert set(build([_run("a", "x")], [None], None, 2, "failed")) == {"verdict", "exit_code", "sides"}


def test_rows_hold_what_either_side_alone_has():
    NOT_COMPARED = dict(BACKEND, seq=11)
    report = {"verdict": "v", "first_divergence": dict(FIRST, **{"class": "backend"}),
              "divergence_classes": {"backend": 1, "not_compared": 1},
              "divergence_samples": {"not_compared": [NOT_COMPARED]},
              "sides": {"a": {"spec": "x", "failure": None, "op_counts": {"send": 2}, "latency_ms": {}},
                        "b": {"spec": "y", "failure": None, "communicators": {2: ["c"]}}}}
    lines = render_text(report).splitlines()
    assert "  first not compared divergence: rank 0, group 2, seq 11: broadcast torch.int64 [2, 3]" in lines
    assert "  communicators rank 2     -                                              1" in lines
    assert "  send                     2 ops                                          0 ops" in lines
    report["sides"]["a"], report["sides"]["b"] = report["sides"]["b"], report["sides"]["a"]
    lines = render_text(report).splitlines()
    assert "  communicators rank 2     1                                              -" in lines
    assert "  send                     0 ops                                          2 ops" in lines


def test_the_report_dict_summarises_each_side_from_its_records_and_stats():
    data = types.SimpleNamespace(metas={0: {"rank": 0, "peak_rss_kib": 102400}}, reports={})
    stats = SideStats()
    stats.seen("a", {"rank": 0, "op": "send", "ms": 1.0})
    report = build([_run("a", "legacy")], [data], None, 0, "identical", stats)
    assert report["sides"]["a"]["peak_rss_mib"] == {0: 100.0}
    assert report["sides"]["a"]["op_counts"] == {"send": 1}


CALLS = {"a": "all_reduce SUM of float32 [161] (161 elements)", "b": "all_reduce SUM of float32 [16, 8] (128 elements)"}
PATH = {"rank": 0, "group": "3", "seq": 1, "op": "all_reduce", "dtype": "float32", "shape": [161], "reduce_op": "SUM",
        "calls": CALLS, "reason": "a different call: all_reduce [[161]] on side a, all_reduce [[16, 8]] on side b",
        "class": "backend_dependent_path", "cause": "a different call on each side", "inputs_differed_on_ranks": [0]}
SIDES = {label: {"spec": label, "failure": None} for label in "ab"}


def test_a_first_divergence_whose_call_differs_shows_both_calls_before_its_class():
    report = {"verdict": "v", "first_different_call": {k: PATH[k] for k in ("rank", "group", "seq", "calls")},
              "first_divergence": PATH, "divergence_classes": {"backend_dependent_path": 1, "backend": 0},
              "sides": SIDES}
    assert render_text(report).splitlines()[:6] == [
        "nccl-migrate ab: v",
        "  divergent ops by class: backend dependent path 1, backend 0",
        "  first divergence: rank 0, group 3, seq 1: a different call on each side",
        "    side a issued all_reduce SUM of float32 [161] (161 elements)",
        "    side b issued all_reduce SUM of float32 [16, 8] (128 elements)",
        "    class: backend dependent path; cause: a different call on each side (ranks [0])",
    ]
    assert "a different call: all_reduce" not in render_text(report)  # the reason would repeat the calls


def test_the_first_different_call_leads_when_another_divergence_comes_first():
    report = {"verdict": "v", "ops_compared": 3, "identical": 1, "within_tolerance": 0, "divergent": 2,
              "missing_in_a": 0, "missing_in_b": 0, "first_different_call": PATH,
              "first_divergence": dict(FIRST, reason=None), "divergence_classes": {"job_nondeterminism": 1},
              "sides": SIDES}
    assert render_text(report).splitlines()[:9] == [
        "nccl-migrate ab: v",
        "  ops compared 3: identical 1, within tolerance 0, divergent 2, missing on a 0, missing on b 0",
        "  first different call: rank 0, group 3, seq 1: a different call on each side",
        "    side a issued all_reduce SUM of float32 [161] (161 elements)",
        "    side b issued all_reduce SUM of float32 [16, 8] (128 elements)",
        "  divergent ops by class: job nondeterminism 1",
        "  first divergence: rank 1, group 0, seq 7: all_reduce torch.float32 [4] SUM (inside all_gather_object)",
        "    class: job nondeterminism; cause: inputs differed (ranks [0, 1])",
        "    max abs error 0.5, max rel error 0.25",
    ]
    alone = {"verdict": "v", "first_different_call": PATH, "sides": SIDES}  # a call, no first divergence handed
    assert render_text(alone).splitlines()[1] == "  first different call: rank 0, group 3, seq 1: a different call on each side"


def test_the_report_dict_says_whether_the_job_took_a_different_path_and_where_first():
    comparison = Comparison(tolerance=0.0)
    comparison.counts.update(divergent=1)
    comparison.classes["backend_dependent_path"] = 1
    comparison.first_different_call = PATH
    report = build([_run("a", "legacy"), _run("b", "rewritten")], [None, None], comparison, 1, "divergent")
    assert report["path_differs"] is True and report["backend_implicated"] is False
    assert report["first_different_call"] == PATH
    keys = list(report)
    assert keys.index("path_differs") == keys.index("backend_implicated") + 1
    assert keys.index("first_different_call") < keys.index("first_divergence")
    assert build([_run("a", "x"), _run("b", "y")], [None, None], Comparison(0.0), 2, "v")["path_differs"] is False
