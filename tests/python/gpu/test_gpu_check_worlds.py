"""The GPU check's worlds without a GPU: the real rank entry point (tests/gpu/gpu_probe_table.py's
rank_main) and supervisor (tests/gpu/gpu_sessions.py) run made-up probes that need no device or
group, so what is tested is the protocol between them: a result as soon as each probe ends, a
hung probe ended at its own limit, the deadline cutting the probe it catches and leaving the
rest not run, a probe that no longer fits skipped by the ranks, and fresh interpreters killed
at their limit."""

import multiprocessing as mp
import os
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))

import gpu_plan as plan
import gpu_probe_table as table
import gpu_sessions as sessions


def _quick(r):
    r.check("ok", True)


def _weak(r):
    r.check("unchanged", True, weak="an identity at one rank")


def _sleeps(r):
    r.check("started", True)
    time.sleep(30)


def _raises(r):
    r.check("started", True)
    raise RuntimeError("NCCL error: unhandled cuda error")


FAKES = {"quick": (_quick, 0.1), "weak": (_weak, 0.1), "hang": (_sleeps, 0.1), "boom": (_raises, 0.1),
         "after": (_quick, 0.1), "long": (_quick, 20.0)}


@pytest.fixture
def fake_probes(monkeypatch):
    """Probes of no group (so no device) in the table rank_main reads; forked ranks inherit them."""
    for name, (fn, expected) in FAKES.items():
        monkeypatch.setitem(table.FUNCTIONS, name, fn)
        monkeypatch.setitem(table.PROBES, name, plan.ProbeSpec(name, 1.5 if name == "hang" else 20, expected,
                                                               group=False))


def _run(tmp_path, probes, deadline_in_s=60.0):
    results, arrived = [], []

    def on_result(result):
        results.append(result)
        arrived.append(time.monotonic())

    run = sessions.SessionRun(mp.get_context("fork"), table.rank_main, table.PROBES, plan.Session(None, probes), 1,
                              time.monotonic() + deadline_in_s, str(tmp_path),
                              lambda rank: {"settings": {}, "env": {}}, on_result)
    unreached = run.run()
    return {r["probe"]: (r["verdict"], r["detail"]) for r in results}, arrived, unreached, time.monotonic()


def test_each_probe_is_reported_when_it_ends_and_a_hung_one_is_ended_at_its_own_limit(tmp_path, fake_probes):
    verdicts, arrived, unreached, ended = _run(tmp_path, ["quick", "weak", "hang", "after"])
    assert verdicts["quick"] == (plan.PASS, "1 check")
    assert verdicts["weak"] == (plan.WEAK, "an identity at one rank")
    assert verdicts["hang"][0] == plan.TIMEOUT and "rank 0 after started" in verdicts["hang"][1]
    assert verdicts["after"] == (plan.NOT_RUN, "world ended before it (timeout)")
    assert unreached == ["after"]  # the driver gives it a fresh world
    # The first two were reported while the hung probe still ran, not when the world ended.
    assert ended - arrived[1] >= 1.0


def test_the_deadline_cuts_the_running_probe_and_leaves_the_rest_not_run(tmp_path, fake_probes, monkeypatch):
    monkeypatch.setitem(table.PROBES, "hang", plan.ProbeSpec("hang", 60, 0.1, group=False))
    verdicts, _, unreached, _ = _run(tmp_path, ["quick", "hang", "after"], deadline_in_s=2.0)
    assert verdicts["quick"][0] == plan.PASS
    assert verdicts["hang"][0] == plan.CUT
    assert verdicts["after"] == (plan.NOT_RUN, "deadline")
    assert unreached == []  # no fresh world after the deadline


def test_a_probe_that_no_longer_fits_is_skipped_and_a_shorter_one_after_it_still_runs(tmp_path, fake_probes):
    verdicts, _, unreached, _ = _run(tmp_path, ["long", "quick"], deadline_in_s=15.0)
    assert verdicts["quick"] == (plan.PASS, "1 check") and verdicts["long"][0] == plan.NOT_RUN
    assert verdicts["long"][1].startswith("deadline: needs about 20 s, 1")  # about 15 s were left
    assert unreached == []


def test_a_probe_that_raises_fails_and_ends_its_world(tmp_path, fake_probes):
    verdicts, _, unreached, _ = _run(tmp_path, ["boom", "after"])
    assert verdicts["boom"] == (plan.FAIL, "rank 0: RuntimeError: NCCL error: unhandled cuda error")
    assert verdicts["after"][0] == plan.NOT_RUN and unreached == ["after"]


def test_fresh_interpreters_that_outlive_their_limit_are_killed_and_reported_as_running(tmp_path):
    logs = [str(tmp_path / "a.log"), str(tmp_path / "b.log")]
    jobs = [{"argv": [[sys.executable, "-c", "print('bye')"]], "env": [dict(os.environ)], "log": [logs[0]]},
            {"argv": [[sys.executable, "-c", "import time; time.sleep(30)"]], "env": [dict(os.environ)],
             "log": [logs[1]]}]
    started = time.monotonic()
    outcomes = sessions.run_children(jobs, limit_s=2.0)
    assert time.monotonic() - started < 10
    assert outcomes[0]["exit_codes"] == [0] and outcomes[1]["exit_codes"] == [None]
    assert sessions.text_of(logs[0]).strip() == "bye"
