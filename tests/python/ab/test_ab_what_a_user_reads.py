"""What a user reads of `nccl-migrate ab`, end to end with real jobs through torch's launcher: a
failed rank quoted in its own words (not its peers' follow-on errors), a job that is not there
refused before any side runs, a side that recorded nothing given no table, and the side-by-side
table in plain units, with only the percentiles its op counts give."""

import json
import os
import re
import subprocess

from test_ab_cli import CLI, HERE
from torch_support import requires_torch

JOB = os.path.join(HERE, "own_words_job.py")  # OWN_RANK=R fails after its all_reduce #0 as OWN_FAULT says
TORCH_LOG_LINE = re.compile(r"\[[IWEF]\d{4} \d{2}:\d{2}:\d{2}")  # glog's prefix, as torch's C++ logs a line


def ab_text(tmp_path, *args, timeout=240):
    done = subprocess.run([CLI, "ab", "--run-dir", str(tmp_path / "run"), *args], capture_output=True, text=True,
                          timeout=timeout, check=False)
    return done.returncode, done.stdout, done.stderr


def saved_report(tmp_path):
    with open(tmp_path / "run" / "report.json") as f:
        return json.load(f)


@requires_torch("backend_plugins")
def test_a_rank_that_raised_is_quoted_by_its_own_traceback_and_the_table_is_in_plain_units(tmp_path):
    status, out, err = ab_text(tmp_path, "--b", "rewritten,OWN_RANK=1,OWN_FAULT=raise", "--", JOB)
    assert status == 2, err[-3000:]
    lines = out.splitlines()
    assert lines[0].startswith("nccl-migrate ab: side b: rank 1 exited with status 1 after all_reduce #0"), out
    head = lines.index(f"  rank 1 of side b, its own output (traceback, from {tmp_path}/run/b/job.log):")
    quoted = lines[head + 1:]
    assert quoted[0] == "    Traceback (most recent call last):" and quoted[-1] == \
        "    RuntimeError: the job's own failure on rank 1", out
    assert not any("DistBackendError" in line or "Connection closed" in line for line in quoted), out
    # stderr no longer shows the log's last lines (rank 0's follow-on error) for that side.
    assert "last lines of side b" not in err and "DistBackendError" not in err, err[-3000:]
    own = saved_report(tmp_path)["sides"]["b"]["fault"]["own_output"]
    assert (own["rank"], own["shows"], own["lines"][-1]) == (1, "traceback", "RuntimeError: the job's own failure on rank 1")

    # The table: backend names, durations, MiB per rank, no Python reprs; side a ran 3 all_reduces on
    # each of 2 ranks: 6 ops give a p50, never a p90 or p99.
    table = lines[lines.index("") + 1:head]
    assert not any(mark in line for line in table for mark in ("[", "{", "None")), table
    rows = {line[2:].split("  ")[0]: line for line in table}
    assert "nccl: MigrateBackend (nccl)" in rows["backend"] and "nccl: MigrateBackend (nccl2)" in rows["backend"]
    assert re.search(r"wall time +\d+\.\d s +\d+\.\d s$", rows["wall time"]), rows["wall time"]
    assert re.search(r"rank 0 [\d,]+\.\d MiB, rank 1 [\d,]+\.\d MiB", rows["peak RSS"]), rows["peak RSS"]
    assert re.search(r"all_reduce +6 ops: p50 [\d.]+ ms +\d ops", rows["all_reduce"]), rows["all_reduce"]
    assert "p90" not in rows["all_reduce"] and "p99" not in rows["all_reduce"]
    latency = saved_report(tmp_path)["sides"]["a"]["latency_ms"]["all_reduce"]
    assert set(latency) == {"count", "p50"} and latency["count"] == 6 and isinstance(latency["p50"], float)


@requires_torch("backend_plugins")
def test_a_rank_killed_by_a_signal_is_quoted_by_its_last_lines(tmp_path):
    done = subprocess.run([CLI, "ab", "record", "--side", "rewritten", "--dir", str(tmp_path / "b"), "--", JOB],
                          capture_output=True, text=True, timeout=240, check=False,
                          env=dict(os.environ, OWN_RANK="1", OWN_FAULT="kill"))
    assert done.returncode == 2, done.stderr[-3000:]
    err = done.stderr
    assert "rank 1 died by SIGKILL after all_reduce #0 of group 0" in err, err[-3000:]
    quoted = err[err.index("--- rank 1 of the job, its own output (last lines, from "):].splitlines()[1:]
    # torch's own log lines of that rank are its output too (c10d warns when the store answers
    # slowly, as on a loaded machine); the job's lines are the ones this test wrote.
    job_lines = [line for line in quoted if not TORCH_LOG_LINE.match(line)]
    assert job_lines == ["rank 1 step 0", "rank 1 is about to be killed"], err[-3000:]


@requires_torch("backend_plugins")
def test_a_side_that_recorded_nothing_prints_no_table_but_why(tmp_path):
    status, out, err = ab_text(tmp_path, "--b", "rewritten,OWN_FAULT=early", "--", JOB)
    assert status == 2, err[-3000:]
    assert "  side b (rewritten,OWN_FAULT=early) recorded nothing: its job failed before any rank recorded (see its " \
           "failure)" in out.splitlines(), out
    assert "outcome" not in out and "peak RSS" not in out and "None" not in out, out
    assert "RuntimeError: the job's own failure before init_process_group on rank" in out, out
    report = saved_report(tmp_path)
    assert report["sides"]["b"]["ranks_recorded"] == 0 and report["sides"]["a"]["ranks_recorded"] == 2


def test_a_job_that_is_not_there_fails_before_any_side_starts(tmp_path):
    missing = tmp_path / "nowhere" / "job.py"
    status, out, err = ab_text(tmp_path, "--", str(missing), "--steps", "2", timeout=60)
    assert status == 2 and out == "", (out, err)
    assert err.splitlines() == [(f"nccl-migrate ab: the job's script {missing} does not exist; give its path, "
                                 "absolute or from the current directory; no side was run")]
    assert not (tmp_path / "run").exists()  # not even the run directory: nothing started
    done = subprocess.run([CLI, "ab", "record", "--side", "legacy", "--dir", str(tmp_path / "a"), "--",
                           "no-such-launcher-here", "job.py"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "no-such-launcher-here: no such program on PATH" in done.stderr, done.stderr
    assert not (tmp_path / "a").exists()
