"""The A/B report as a dict (what --format json prints) and as text: every line a reader sees, for
a run that shows them all, and each side's outcome in a few words."""

import types

import pytest
from nccl_migrate.ab.compare import Comparison
from nccl_migrate.ab.report import (
    build,
    cost_rows,
    milliseconds_text,
    ops_text,
    outcome,
    peak_rss_text,
    render_text,
    seconds_text,
    side_summary,
)
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
              "op_counts": {"all_reduce": 400, "send": 1}, "ranks_recorded": 2,
              "latency_ms": {"all_reduce": {"count": 400, "p50": 1.0, "p90": 2.5, "p99": 1234.5},
                             "send": {"count": 1}}},
        "b": {"spec": "rewritten", "failure": "side b (rewritten): rank 1 was killed by SIGKILL",
              "fault": {"kind": "died", "rank": 1, "signal": "SIGKILL", "exit_code": None,
                        "own_output": {"rank": 1, "shows": "last lines", "lines": ["step 3", "out of memory?"],
                                       "logs": ["/r/b/job.log"]}},
              "backend": [], "wall_seconds": 0.25, "init_seconds": None, "peak_rss_mib": {1: 2048.25},
              "communicators": {0: ["x"]}, "op_counts": {"all_reduce": 12, "recv": 1}, "ranks_recorded": 2,
              "latency_ms": {"all_reduce": {"count": 12, "p50": 0.0123, "p90": 0.5}, "recv": {"count": 1}}},
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
        "    class: job nondeterminism; cause: inputs differed (on ranks 0, 1)",
        "    max abs error 0.5, max rel error 0.25",
        "    the job's own seed differs",
        "  first backend divergence: rank 0, group 2, seq 9: broadcast torch.int64 [2, 3]",
        "  first op missing on side b: rank 1, group 0, seq 19: barrier - []",
        "",
        "                        a: legacy                                    b: rewritten",
        "  outcome               ok                                           rank 1 died (SIGKILL)",
        "  backend               nccl: ProcessGroupNCCL                       -",
        "  wall time             12.5 s                                       250 ms",
        "  init time             1.2 s                                        -",
        "  peak RSS              rank 0 100.0 MiB                             rank 1 2,048.2 MiB",
        "  communicators rank 0  2                                            1",
        "  communicators rank 1  1                                            -",
        "  all_reduce            400 ops: p50 1 ms, p90 2.5 ms, p99 1,234 ms  12 ops: p50 0.0123 ms, p90 0.5 ms",
        "  recv                  0 ops                                        1 op",
        "  send                  1 op                                         0 ops",
        "  side b (rewritten): rank 1 was killed by SIGKILL",
        "  rank 1 of side b, its own output (last lines, from /r/b/job.log):",
        "    step 3",
        "    out of memory?",
    ]


def test_a_run_with_nothing_to_say_but_its_sides():
    bare = {"verdict": "v", "sides": {"a": {"spec": "x", "failure": "side a failed", "ranks_recorded": 1},
                                      "b": {"spec": "y", "failure": None, "ranks_recorded": 1}}}
    assert render_text(bare).splitlines() == [
        "nccl-migrate ab: v", "",
        "             a: x    b: y",
        "  outcome    failed  ok",
        "  backend    -       -",
        "  wall time  -       -",
        "  init time  -       -",
        "  peak RSS   -       -",
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
        attempt=2, ranks=lambda: [0, 1, 3])
    stats = SideStats()
    stats.seen("b", {"rank": 0, "op": "send", "ms": 1.0})
    assert side_summary(_run("b", "rewritten"), data, stats) == {
        "spec": "rewritten", "env": {"K": "v"}, "directory": "/runs/b", "log": "/runs/b/job.log", "failure": None,
        "wall_seconds": 2.346, "backend": ["nccl: PGNCCL"], "init_seconds": 2.5,
        "peak_rss_mib": {0: 1.5, 1: 2.0, 2: 1.0}, "communicators": {0: ["k0 (collective)"], 1: ["k1 (p2p)"]},
        "restarts": 2, "ranks_recorded": 4, "op_counts": {"send": 1}, "latency_ms": {"send": {"count": 1}}}
    assert list(side_summary(_run("b", "rewritten"), data, None)["communicators"]) == [0, 1]
    no_reports = types.SimpleNamespace(metas={0: {"rank": 0, "peak_rss_kib": 1024}}, reports={}, ranks=list)
    summary = side_summary(_run("a", "legacy", "it failed"), no_reports, None)
    assert summary["communicators"] is None and summary["init_seconds"] is None and summary["restarts"] == 0
    assert summary["backend"] == [] and "op_counts" not in summary and summary["failure"] == "it failed"
    assert summary["ranks_recorded"] == 1  # a meta alone: the rank joined a group and recorded no op
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
              "sides": {"a": {"spec": "x", "failure": None, "op_counts": {"send": 2}, "latency_ms": {}, "ranks_recorded": 1},
                        "b": {"spec": "y", "failure": None, "communicators": {2: ["c"]}, "ranks_recorded": 1}}}
    lines = render_text(report).splitlines()
    assert "  first not compared divergence: rank 0, group 2, seq 11: broadcast torch.int64 [2, 3]" in lines
    assert "  communicators rank 2  -      1" in lines
    assert "  send                  2 ops  0 ops" in lines
    report["sides"]["a"], report["sides"]["b"] = report["sides"]["b"], report["sides"]["a"]
    lines = render_text(report).splitlines()
    assert "  communicators rank 2  1      -" in lines
    assert "  send                  0 ops  2 ops" in lines


def test_the_report_dict_summarises_each_side_from_its_records_and_stats():
    data = types.SimpleNamespace(metas={0: {"rank": 0, "peak_rss_kib": 102400}}, reports={}, ranks=lambda: [0])
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
        "    class: backend dependent path; cause: a different call on each side (on rank 0)",
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
        "    class: job nondeterminism; cause: inputs differed (on ranks 0, 1)",
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


# --- the side-by-side table, in plain units ----------------------------------------------------------

def test_the_side_by_side_rows_compare_outcome_cost_communicators_and_ops():
    a = {"backend": ["nccl: MigrateBackend (nccl)", "gloo: ProcessGroupGloo"], "wall_seconds": 3.5,
         "init_seconds": 0.123456, "peak_rss_mib": {0: 698.1, 1: 698.25},
         "communicators": {0: ["c1", "c2"], 1: ["c1"]}, "op_counts": {"all_reduce": 4, "send": 1},
         "latency_ms": {"all_reduce": {"count": 4, "p50": 1.0}, "send": {"count": 1}}}
    b = {"backend": [], "wall_seconds": 3.0, "init_seconds": None, "failure": "boom",
         "communicators": {0: ["c"], 2: ["c"]}, "op_counts": {"all_reduce": 4, "barrier": 2}}
    assert cost_rows({"sides": {"a": a, "b": b}}) == [
        ["outcome", "ok", "failed"],
        ["backend", "nccl: MigrateBackend (nccl); gloo: ProcessGroupGloo", "-"],
        ["wall time", "3.5 s", "3.0 s"],
        ["init time", "123 ms", "-"],
        ["peak RSS", "rank 0 698.1 MiB, rank 1 698.2 MiB", "-"],
        ["communicators rank 0", "2", "1"],
        ["communicators rank 1", "1", "-"],
        ["communicators rank 2", "-", "1"],
        ["all_reduce", "4 ops: p50 1 ms", "4 ops"],
        ["barrier", "0 ops", "2 ops"],
        ["send", "1 op", "0 ops"],
    ]
    rows = cost_rows({"sides": {"a": {"communicators": None, "op_counts": None}, "b": {}}})
    assert [r[0] for r in rows] == ["outcome", "backend", "wall time", "init time", "peak RSS"]


@pytest.mark.parametrize("seconds, said", [(None, "-"), (0.0004, "0.4 ms"), (0.0123, "12.3 ms"), (0.85, "850 ms"),
                                           (1.0, "1.0 s"), (754.26, "754.3 s")])
def test_durations_read_as_a_person_writes_them(seconds, said):
    assert seconds_text(seconds) == said


@pytest.mark.parametrize("ms, said", [(0.0, "0.000"), (0.0004, "0.000"), (0.00123, "0.00123"), (0.952, "0.952"),
                                      (7.3161, "7.32"), (19.06, "19.1"), (195.638, "196"), (12345.6, "12,346")])
def test_milliseconds_keep_three_significant_digits_and_no_exponent(ms, said):
    assert milliseconds_text(ms) == said


def test_an_op_types_cell_gives_only_the_percentiles_its_count_gives():
    assert ops_text(1, {"count": 1}) == "1 op"
    assert ops_text(6, {"count": 6, "p50": 0.952}) == "6 ops: p50 0.952 ms"
    assert ops_text(1500, {"count": 1500, "p50": 0.5, "p90": 1.25, "p99": 7.316}) == \
        "1,500 ops: p50 0.5 ms, p90 1.25 ms, p99 7.32 ms"
    assert ops_text(3, None) == "3 ops"


def test_peak_rss_names_each_of_a_few_ranks_and_the_extremes_of_many():
    assert peak_rss_text({}) == peak_rss_text(None) == "-"
    assert peak_rss_text({1: 2.0, 0: 1536.04}) == "rank 0 1,536.0 MiB, rank 1 2.0 MiB"
    many = {rank: 700.0 + rank % 3 for rank in range(8)}
    assert peak_rss_text(many) == "max 702.0 MiB (rank 2), min 700.0 MiB (rank 0), 8 ranks"


def test_a_side_that_recorded_nothing_gets_no_table_but_why():
    sides = {"a": {"spec": "legacy", "failure": None, "ranks_recorded": 2, "backend": ["nccl: X"]},
             "b": {"spec": "rewritten", "failure": "side b (rewritten): rank 0 exited with status 1",
                   "fault": {"kind": "exited", "rank": 0, "signal": None, "exit_code": 1,
                             "own_output": {"rank": 0, "shows": "nothing", "lines": [], "logs": ["/r/b/job.log"]}},
                   "ranks_recorded": 0, "backend": [], "peak_rss_mib": {}}}
    assert render_text({"verdict": "v", "sides": sides}).splitlines() == [
        "nccl-migrate ab: v", "",
        "  side b (rewritten) recorded nothing: its job failed before any rank recorded (see its failure)",
        "  side b (rewritten): rank 0 exited with status 1",
        "  rank 0 of side b printed nothing (/r/b/job.log)",
    ]
    unread = {"a": dict(sides["a"]), "b": {"spec": "y", "failure": None}}  # records that could not be read
    quiet = {"a": dict(sides["a"]), "b": {"spec": "y", "failure": None, "ranks_recorded": 0}}
    assert render_text({"verdict": "v", "sides": unread}).splitlines()[2] == \
        "  side b (y) recorded nothing: its records could not be read (see the verdict)"
    assert render_text({"verdict": "v", "sides": quiet}).splitlines()[2] == \
        ("  side b (y) recorded nothing: no rank joined a process group (does COMMAND run the job's Python, and "
         "does the job call init_process_group?)")
