"""The GPU check's decisions that need no GPU (tests/gpu/gpu_plan.py), on made-up rank reports:
which probes share a world, when a probe may still start, what each cell says (a probe whose
checks could not fail at its rank count says so instead of passing, a probe the deadline stopped
or never reached is never a pass), the exit status, and the table."""

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))

import gpu_plan as plan

OURS = {"migrate-legacy", "migrate-nccl2"}


def _spec(name, **kw):
    return plan.ProbeSpec(name, kw.pop("limit_s", 30), kw.pop("expected_s", 2), **kw)


def _rank(*lines):
    """A rank's report from its lines, each a dict as rank_main writes it."""
    return plan.read_rank("\n".join(json.dumps(line) for line in lines))


def _check(probe, name, ok=True, weak=""):
    return {"k": "check", "probe": probe, "name": name, "ok": ok, "detail": "" if ok else "[0] = nan, expected 3.0",
            "sig": "ok" if ok else "wrong", "weak": weak}


def _ran(probe, *checks, ended=True):
    return [{"k": "begin", "probe": probe}, *checks] + ([{"k": "end", "probe": probe}] if ended else [])


# -- which worlds run


def test_probes_that_can_share_a_world_share_one_per_backend_and_the_rest_get_their_own():
    specs = [_spec("a"), _spec("b"), _spec("timeout", stage=2, alone=True, env=(("X", "1"),)),
             _spec("teardown", stage=2, children=True), _spec("digest", stage=3, group=False), _spec("c")]
    sessions = plan.plan_sessions(specs, ["nccl", "migrate-legacy"])
    assert [(s.backend, s.probes, s.env) for s in sessions] == [
        ("nccl", ["a", "b", "c"], {}), ("migrate-legacy", ["a", "b", "c"], {}),
        ("nccl", ["timeout"], {"X": "1"}), ("migrate-legacy", ["timeout"], {"X": "1"}),
        (None, ["digest"], {})]


def test_probes_of_different_settings_never_share_a_world():
    specs = [_spec("a"), _spec("b", env=(("TORCH_NCCL_BLOCKING_WAIT", "1"),)), _spec("c", group_timeout_s=5.0)]
    assert [s.probes for s in plan.plan_sessions(specs, ["nccl"])] == [["a"], ["b"], ["c"]]


def test_concurrent_worlds_of_a_stage_run_side_by_side_and_the_others_one_at_a_time():
    specs = {s.name: s for s in [_spec("a", concurrent=True), _spec("b", concurrent=True),
                                 _spec("t", stage=2, alone=True, concurrent=True),
                                 _spec("timed", stage=3), _spec("x", stage=3, alone=True, concurrent=True)]}
    sessions = plan.plan_sessions(list(specs.values()), ["x1", "x2"])
    assert [[(s.backend, s.probes) for s in batch] for batch in plan.batches(sessions, specs)] == [
        [("x1", ["a", "b"]), ("x2", ["a", "b"])], [("x1", ["t"]), ("x2", ["t"])],
        [("x1", ["timed"])], [("x2", ["timed"])], [("x1", ["x"]), ("x2", ["x"])]]


def test_ours_run_every_stage_before_torchs_reference_and_teardowns_come_before_a_later_stage():
    specs = [_spec("a", concurrent=True), _spec("exit", stage=2, children=True),
             _spec("late", stage=3), _spec("digest", stage=3, group=False)]
    steps = plan.schedule(specs, ["ours1", "ours2"], ["torch"])
    shown = [("children", tuple(s.backends)) if s.children else tuple((x.backend, x.probes[0]) for x in s.sessions)
             for s in steps]
    assert shown == [(("ours1", "a"), ("ours2", "a")), ("children", ("ours1", "ours2")), (("ours1", "late"),),
                     (("ours2", "late"),), ((None, "digest"),),
                     (("torch", "a"),), ("children", ("torch",)), (("torch", "late"),)]
    done = plan.schedule(specs, ["ours1"], [], frozenset({("a", "ours1")}))
    assert all(s.children or s.sessions[0].probes != ["a"] for s in done)


def test_probes_a_world_never_reached_get_one_fresh_world_and_no_more():
    first = plan.Session("nccl", ["a", "b", "c"], {"X": "1"}, 5.0)
    retry = plan.retry_session(first, ["b", "c"])
    assert (retry.probes, retry.env, retry.group_timeout_s, retry.attempt) == (["b", "c"], {"X": "1"}, 5.0, 1)
    assert plan.retry_session(retry, ["c"]) is None
    assert plan.retry_session(first, []) is None


# -- the deadline


def test_a_probe_starts_only_if_its_estimate_ends_before_the_margin_and_a_new_world_costs_its_start():
    spec = _spec("a", expected_s=10)
    assert plan.fits(10.0, spec) and not plan.fits(9.9, spec)
    assert not plan.fits(10.0, spec, in_new_world=True)
    assert plan.fits(10.0 + plan.SETUP_S, spec, in_new_world=True)
    assert plan.fits(10.0 + plan.SETUP_TWO_RANKS_S, spec, in_new_world=True, world=2)
    assert not plan.fits(10.0 + plan.SETUP_S, spec, in_new_world=True, world=2)
    assert plan.why_not_start(4.0, spec) == "deadline: needs about 10 s, 4 s were left before the margin"


def test_processes_sharing_the_gpu_take_turns_on_its_part_of_a_probe():
    spec = _spec("a", expected_s=10, gpu_s=4)
    assert plan.probe_cost(spec) == 10
    assert plan.probe_cost(spec, sharing=3) == 6 + 3 * 4
    assert not plan.fits(17.9, spec, sharing=3) and plan.fits(18.0, spec, sharing=3)


def test_a_probe_runs_for_its_limit_or_what_is_left_of_the_check_whichever_is_less():
    spec = _spec("a", limit_s=30)
    assert plan.probe_limit(spec, 100.0) == 30
    assert plan.probe_limit(spec, 12.5) == 12.5
    assert plan.probe_limit(spec, -3.0) == 0.0


# -- verdicts


def test_a_probe_whose_every_check_cannot_fail_at_one_rank_says_so_instead_of_passing():
    why = "NCCL leaves one rank's data as it is"
    ranks = [_rank(*_ran("subgroups", _check("subgroups", "values", weak=why),
                         _check("subgroups", "more values", weak=why)))]
    verdict, detail = plan.judge_probe("subgroups", ranks, world=1)
    assert verdict == plan.WEAK and verdict != plan.PASS
    cell = plan.cell({"probe": "subgroups", "backend": "nccl", "world": 1, "verdict": verdict, "detail": detail})
    assert cell == f"cannot fail at 1 rank: {why}"


def test_a_probe_with_some_checks_that_cannot_fail_passes_and_counts_them():
    ranks = [_rank(*_ran("values", _check("values", "PREMUL_SUM"), _check("values", "SUM", weak="identity"),
                         {"k": "note", "probe": "values", "name": "headline", "value": "9 dtypes"}))]
    assert plan.judge_probe("values", ranks, world=1) == (
        plan.PASS, "9 dtypes (1 of 2 checks cannot fail at 1 rank)")


def test_a_failed_check_fails_the_probe_even_beside_checks_that_cannot_fail():
    ranks = [_rank(*_ran("coalescing", _check("coalescing", "first op", weak="identity"),
                         _check("coalescing", "input written mid-batch", ok=False)))]
    verdict, detail = plan.judge_probe("coalescing", ranks, world=1)
    assert verdict == plan.FAIL and "input written mid-batch: [0] = nan" in detail


def test_a_probe_that_made_no_check_fails():
    assert plan.judge_probe("futures", [_rank(*_ran("futures"))], world=1)[0] == plan.FAIL


def test_the_probe_running_when_its_limit_passed_timed_out_and_names_where_each_rank_was():
    ranks = [_rank(*_ran("a", _check("a", "x")), *_ran("b", _check("b", "first"), ended=False)),
             _rank(*_ran("a", _check("a", "x")), *_ran("b", ended=False))]
    assert plan.current_probe(ranks) == "b"
    assert plan.judge_probe("a", ranks, 2, "timeout")[0] == plan.PASS
    assert plan.judge_probe("b", ranks, 2, "timeout", [-9, -9], 30) == (
        plan.TIMEOUT, "30 s: rank 0 after first; rank 1 after its start")


def test_a_probe_the_deadline_stopped_is_cut_and_one_never_begun_is_not_run_neither_passes():
    ranks = [_rank(*_ran("a", _check("a", "x"), ended=False))]
    assert plan.judge_probe("a", ranks, 1, "deadline", [-9])[0] == plan.CUT
    assert plan.judge_probe("b", ranks, 1, "deadline", [-9]) == (plan.NOT_RUN, "deadline")
    skipped = [_rank({"k": "skip", "probe": "c", "why": "deadline"})]
    assert plan.judge_probe("c", skipped, 1) == (plan.NOT_RUN, "deadline")


def test_a_rank_that_raised_fails_the_probe_and_one_killed_by_a_signal_crashed_it():
    raised = [_rank(*_ran("a", _check("a", "x"), ended=False),
                    {"k": "error", "probe": "a", "detail": "RuntimeError: NCCL error"})]
    assert plan.judge_probe("a", raised, 1, "", [3]) == (plan.FAIL, "rank 0: RuntimeError: NCCL error")
    killed = [_rank(*_ran("a", _check("a", "x"), ended=False))]
    assert plan.judge_probe("a", killed, 1, "", [-11]) == (plan.CRASH, "rank 0 killed by SIGSEGV after x")


def test_a_world_whose_group_never_formed_fails_its_probes_and_does_not_retry_them():
    ranks = [_rank({"k": "error", "detail": "DistBackendError: NCCL error: invalid usage"})]
    assert plan.judge_probe("a", ranks, 1, "", [3]) == (
        plan.FAIL, "group set-up: DistBackendError: NCCL error: invalid usage")
    stuck = [_rank()]  # no line at all: init_process_group never returned
    assert plan.judge_probe("a", stuck, 1, "set-up", [-9]) == (
        plan.TIMEOUT, f"the group was not set up within {plan.SETUP_LIMIT_S:.0f} s")


# -- exit status


def _result(backend, verdict, detail=""):
    return {"probe": "p", "backend": backend, "verdict": verdict, "detail": detail}


@pytest.mark.parametrize(("results", "status"), [
    ([_result("migrate-legacy", plan.PASS), _result("nccl", plan.FAIL)], 0),  # torch's results never fail it
    ([_result("migrate-legacy", plan.WEAK), _result(None, plan.PASS)], 0),
    ([_result("migrate-legacy", plan.NOT_RUN, "needs two ranks; one rank")], 0),
    ([_result("migrate-nccl2", plan.TIMEOUT), _result("migrate-legacy", plan.CUT)], 1),
    ([_result(None, plan.CRASH)], 1),
    ([_result("migrate-legacy", plan.PASS), _result("migrate-nccl2", plan.NOT_RUN, "deadline")], 3),
    ([_result("migrate-nccl2", plan.NOT_RUN, "deadline: needs about 9 s, 4 s were left before the margin")], 3),
    ([_result("nccl", plan.NOT_RUN, "deadline: needs about 9 s, 4 s were left before the margin")], 0),
    ([_result("migrate-legacy", plan.CUT, "deadline, rank 0 after x")], 3),
])
def test_the_exit_status_is_ours_alone_and_the_deadline_is_never_success(results, status):
    assert plan.exit_status(results, OURS) == status


# -- teardown children


@pytest.mark.parametrize(("codes", "logs", "verdict", "words"), [
    ([0], [plan.CHILD_OPS_DONE + "\n[teardown] main returns"], plan.PASS, "exit 0 after 4.0 s"),
    ([None], [plan.CHILD_OPS_DONE], plan.TIMEOUT, "still running 60 s after start"),
    ([0], ["[teardown] values wrong: 1.0, expected 3.0"], plan.FAIL, "before its ops were right"),
    ([-6], [plan.CHILD_OPS_DONE], plan.CRASH, "killed by SIGABRT at exit"),
    ([0], [plan.CHILD_OPS_DONE + "\nterminate called after throwing an instance of 'c10::Error'"], plan.FAIL,
     "exited 0 but printed: terminate called"),
])
def test_a_teardown_passes_only_on_a_clean_exit_0_after_right_values(codes, logs, verdict, words):
    got, detail = plan.judge_children(codes, [4.0], logs, 60)
    assert got == verdict and words in detail


# -- the table


def test_the_table_has_a_row_per_probe_a_column_per_backend_and_says_how_many_ranks_ran():
    specs = [_spec("coalescing"), _spec("subgroups"), _spec("digest", group=False)]
    results = [{"probe": "coalescing", "backend": "nccl", "world": 1, "verdict": plan.PASS, "detail": "4 checks"},
               {"probe": "coalescing", "backend": "migrate-legacy", "world": 1, "verdict": plan.FAIL,
                "detail": "1/4: a|b"},
               {"probe": "subgroups", "backend": "nccl", "world": 1, "verdict": plan.WEAK, "detail": "identity"},
               {"probe": "digest", "backend": None, "world": 1, "verdict": plan.NOT_RUN, "detail": "deadline"}]
    text = plan.markdown("GPU check, H200", "Ranks per world: 1, one rank: one GPU.", specs, ["nccl", "migrate-legacy"],
                         OURS, results, {("coalescing", "migrate-legacy"): "differs"}, {"migrate-legacy": "nccl"})
    lines = text.splitlines()
    assert "Ranks per world: 1, one rank: one GPU." in lines
    assert "| probe | nccl (torch) | migrate-legacy |" in lines
    assert "| coalescing | pass: 4 checks | fail: 1/4: a/b |" in lines  # a '|' in a detail cannot split the row
    assert "| subgroups | cannot fail at 1 rank: identity | – |" in lines
    assert "- digest (no group): not run: deadline" in lines
    assert "| coalescing | differs |" in lines
    assert lines[-1] == plan.LEGEND
