"""The default GPU check against its deadline, on the estimates it plans with: gpu_plan.simulate
runs the driver's own schedule and start checks with every probe taking its estimate. On one
H100 with NCCL 2.28 (torch 2.11's wheel, the GPU image: one rank, four backends) and with NCCL
2.30 (torch 2.15's: two ranks share the GPU, six backends), the build and every probe that runs
end 2 minutes before the 8-minute deadline; ours run first, the probes that need a GPU most
first; whatever does not fit is reported not run, saying why. The fit holds by the plan's own
estimates (gpu_plan.py says where each comes from; none is measured on a GPU yet), so what these
tests prove is the schedule's order and its start checks at those costs, not the costs."""

import os
import sys
from collections import Counter

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))

import gpu_plan as plan
import gpu_probe_table as table
from gpu_probes import OUR_BACKENDS

OURS = list(OUR_BACKENDS)
H100 = {  # one GPU; the NCCL the torch of each image loads, and torch's NCCL backends there
    "NCCL 2.28.9, torch 2.11": {"nccl": "2.28.9", "theirs": ["nccl"]},
    "NCCL 2.30.7, torch 2.15": {"nccl": "2.30.7", "theirs": ["nccl-legacy", "nccl2", "nccl-lazy"]},
}
MOST_WANTED = ["futures", "ddp_hooks", "coalescing", "list_forms", "values", "timeout"]


def _run(case: str):
    world, shares_gpu, _ = plan.ranks_decision(H100[case]["nccl"], gpus=1, switch_in_library=True)
    runs = plan.simulate(list(table.PROBES.values()), OURS, H100[case]["theirs"], world, shares_gpu,
                         start_s=plan.BUILD_S + plan.DRIVER_START_S)
    return world, shares_gpu, runs


def _ran(runs):
    return [r for r in runs if r["verdict"] == plan.PASS]


def test_the_deadline_and_margin_are_eight_minutes_and_two():
    assert (plan.CHECK_DEADLINE_S, plan.MARGIN_S) == (480, 120)


@pytest.mark.parametrize("case", H100)
def test_the_build_and_every_probe_that_runs_end_two_minutes_before_the_deadline(case):
    _, _, runs = _run(case)
    end = max(r["end_s"] for r in _ran(runs))
    assert end <= plan.CHECK_DEADLINE_S - plan.MARGIN_S, f"the plan ends at {end:.0f} s"


@pytest.mark.parametrize("case", H100)
def test_ours_run_first_and_the_probes_that_need_a_gpu_most_before_the_rest(case):
    _, _, runs = _run(case)
    ran = _ran(runs)
    ours = [r for r in ran if r["backend"] in OURS]
    for probe in MOST_WANTED:
        assert {r["backend"] for r in ours if r["probe"] == probe} == set(OURS), f"{probe} did not run for all of ours"
    first_start = {}
    for r in ours:
        first_start.setdefault(r["probe"], r["start_s"])
    order = [first_start[p] for p in MOST_WANTED]
    assert order == sorted(order) and len(set(order)) == len(order), f"most wanted started at {order}"
    later = {p: s for p, s in first_start.items() if p not in MOST_WANTED and p != "two_ranks"}
    assert later and min(later.values()) > first_start["timeout"], later
    # torch's backends are the reference, run in the time ours leave (the probe that decides two
    # ranks on one GPU aside, which runs under torch's backend before everything).
    reference = [r for r in ran if r["backend"] not in OURS and r["backend"] is not None and r["probe"] != "two_ranks"]
    assert all(r["start_s"] >= max(o["end_s"] for o in ours) for r in reference)


@pytest.mark.parametrize("case", H100)
def test_every_probe_and_backend_is_run_or_reported_not_run_with_the_reason(case):
    world, _, runs = _run(case)
    backends = OURS + H100[case]["theirs"]
    expected = {(p.name, b) for p in table.PROBES.values() for b in (backends if p.group else [None])}
    assert Counter((r["probe"], r["backend"]) for r in runs) == Counter(expected)  # each once
    for r in (r for r in runs if r["verdict"] == plan.NOT_RUN):
        if r["probe"] == "two_ranks" and world == 1:
            assert r["detail"] == "needs two ranks"
        else:
            assert r["detail"].startswith("deadline: needs about "), r
            assert r["detail"].endswith(" s were left before the margin"), r


def test_with_nccl_2_28_one_rank_runs_every_probe_of_ours():
    world, shares_gpu, runs = _run("NCCL 2.28.9, torch 2.11")
    assert (world, shares_gpu) == (1, False)
    missing = [(r["probe"], r["backend"]) for r in runs
               if r["verdict"] != plan.PASS and (r["backend"] in OURS or r["backend"] is None)
               and r["probe"] != "two_ranks"]
    assert missing == []


def test_with_nccl_2_30_two_ranks_share_the_gpu_once_torchs_backend_has_shown_they_can():
    world, shares_gpu, runs = _run("NCCL 2.30.7, torch 2.15")
    assert (world, shares_gpu) == (2, True)
    decided = runs[0]
    assert (decided["probe"], decided["backend"], decided["verdict"]) == ("two_ranks", "nccl-legacy", plan.PASS)


@pytest.mark.parametrize(("nccl", "gpus", "switch", "choice", "decided", "words"), [
    ("2.28.9", 1, True, "auto", (1, False), "NCCL 2.28.9 is older than 2.30"),
    ("2.28.9", 1, True, "2", (1, False), "refuses two ranks on one GPU"),
    ("2.30.7", 1, False, "auto", (2, True), "NCCL_MULTI_RANK_GPU_ENABLE=1"),
    ("2.28.9", 2, False, "auto", (2, False), "one on each of 2 of the 2 GPUs"),
    ("2.30.7", 1, True, "1", (1, False), "--world 1"),
    (None, 1, False, "auto", (1, False), "version is unknown"),
])
def test_two_ranks_share_one_gpu_only_with_nccl_2_30_checked_at_run_time(nccl, gpus, switch, choice, decided, words):
    world, shares_gpu, why = plan.ranks_decision(nccl, gpus, switch, choice)
    assert (world, shares_gpu) == decided and words in why


@pytest.mark.parametrize(("world", "shared", "words"), [
    (1, False, ["Ranks per world: 1 (no device shared)", "a stalled peer cannot be made", "device binding"]),
    (2, True, ["Ranks per world: 2 (both on one GPU)", "device binding (both ranks are bound to cuda:0"]),
    (2, False, ["Ranks per world: 2 (one GPU each)", "more than two ranks"]),
])
def test_the_ranks_line_says_how_many_ran_whether_they_shared_a_gpu_and_what_that_cannot_show(world, shared, words):
    line = plan.ranks_line(world, shared, "why")
    assert all(w in line for w in words), line
