"""A/B under faults, end to end through the CLI and torch's launcher: a side whose rank dies keeps
every survivor's records, and the report names the rank, its signal and its last op, with the ops
both sides recorded still compared; a side that hangs is ended at its timeout (a stopped rank
too, without waiting out the launcher's 30 s grace) and the report names where each rank was."""

import html
import json
import os
import subprocess
import sys
import time

import pytest
from test_ab_cli import CLI, HERE, ab
from torch_support import requires_torch

FAULT_JOB = os.path.join(HERE, "fault_job.py")  # 10 all_reduces; FAULT_RANK fails before #FAULT_AT
STEPS = 10
KILLED = "rewritten,FAULT_RANK=2,FAULT_AT=7,FAULT=kill"  # rank 2 of 3, SIGKILL before all_reduce #7


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def finished_seqs(path):
    """The sequence numbers of the ops a rank recorded as finished (an op its dead peer made fail
    is recorded with its error: the failure explains it)."""
    return [e["seq"] for e in records(path) if "error" not in e and not e.get("unfinished") and e["out"]]


def meta(directory, rank):
    with open(os.path.join(directory, f"rank{rank}.meta.json")) as f:
        return json.load(f)


def record_side(directory, spec, *args, env=None, timeout=120, command=(FAULT_JOB,)):
    done = subprocess.run([CLI, "ab", "record", "--side", spec, "--dir", str(directory), *args, "--", *command],
                          capture_output=True, text=True, timeout=timeout, env=dict(os.environ, **(env or {})),
                          check=False)
    return done.returncode, done.stderr


def compare(tmp_path, dir_a, dir_b, output_format="json"):
    done = subprocess.run([CLI, "ab", "compare", str(dir_a), str(dir_b), "--format", output_format, "--run-dir",
                           str(tmp_path / "report")], capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, done.stdout, done.stderr


def faults(spec: str) -> dict:
    """A side spec's FAULT_* variables, for `ab record` (whose side gets the environment it runs in)."""
    return dict(item.split("=", 1) for item in spec.split(",") if item.startswith("FAULT"))


@pytest.fixture(scope="module")
def healthy_side(tmp_path_factory):
    """Side a of the `ab record` tests, recorded once: 2 ranks, every op."""
    directory = tmp_path_factory.mktemp("healthy") / "a"
    status, stderr = record_side(directory, "legacy")
    assert status == 0, stderr[-3000:]
    return directory


@requires_torch("backend_plugins")
def test_a_rank_killed_mid_job_is_named_with_its_signal_and_last_op(tmp_path):
    status, report, stderr = ab(tmp_path, "--nproc", "3", "--b", KILLED, "--", FAULT_JOB)
    assert status == 2, stderr[-3000:]
    verdict = report["verdict"]
    assert verdict.startswith("side b: rank 2 died by SIGKILL after all_reduce #6 of group 0 (its last record)"), verdict
    assert "ops compared up to there: 21 identical, 0 divergent; 9 op(s) side b never reached" in verdict, verdict
    fault = report["sides"]["b"]["fault"]
    assert (fault["kind"], fault["rank"], fault["signal"], fault["exit_code"]) == ("died", 2, "SIGKILL", -9)
    assert fault["last_record"] == {"group": "0", "seq": 6, "op": "all_reduce"}
    assert report["sides"]["a"]["failure"] is None and "fault" not in report["sides"]["a"]
    # Up to the death the sides agreed: every op both recorded is compared, and identical.
    assert (report["identical"], report["divergent"], report["missing_in_a"], report["missing_in_b"]) == (21, 0, 0, 9)
    side_b = tmp_path / "run" / "b"
    assert finished_seqs(side_b / "rank2.jsonl") == list(range(7))
    for survivor in (0, 1):  # ended by the launcher, or exited as their all_reduce #7 failed with it
        assert finished_seqs(side_b / f"rank{survivor}.jsonl") == list(range(7))
        assert meta(side_b, survivor)["rank"] == survivor
    assert not (side_b / "rank2.meta.json").exists()  # SIGKILL: no handler ran, the launcher told us
    page = (tmp_path / "run" / "report.html").read_text()
    assert "Side b failed" in page and html.escape(fault["text"], quote=True) in page
    # The text report, from the same records read back by `ab compare`: the side file kept the facts.
    status, text, stderr = compare(tmp_path, tmp_path / "run" / "a", side_b, "text")
    assert status == 2, stderr[-3000:]
    assert text.splitlines()[0] == f"nccl-migrate ab: {verdict}"
    assert "rank 2 died (SIGKILL)" in text  # the side-by-side outcome


@requires_torch("backend_plugins")
def test_a_side_whose_rank_stops_answering_is_ended_at_its_timeout_and_named(tmp_path):
    started = time.monotonic()
    status, report, stderr = ab(tmp_path, "--timeout", "12", "--b", "rewritten,FAULT_RANK=1,FAULT_AT=3,FAULT=stop",
                                "--", FAULT_JOB)
    assert status == 2, stderr[-3000:]
    # SIGTERM alone leaves a stopped process stopped, and torch's agent would wait 30 s to SIGKILL it.
    assert report["sides"]["b"]["wall_seconds"] < 12 + 10 and time.monotonic() - started < 80
    assert report["verdict"].startswith(
        "side b hung: the job ran past its timeout (12 s) and was ended; still running at the deadline: "
        "rank 0 inside all_reduce #3 of group 0 after all_reduce #2 of group 0 (its last record), "
        "rank 1 stopped (by SIGSTOP or a debugger: it could not answer) after all_reduce #2 of group 0 (its last "
        "record); ops compared up to there: 6 identical, 0 divergent; 14 op(s) side b never reached"), report["verdict"]
    running = report["sides"]["b"]["fault"]["running"]
    assert [(r["rank"], r["stopped"], r["inside"], r["last_record"]["seq"]) for r in running] == [
        (0, False, [{"group": "0", "seq": 3, "op": "all_reduce"}], 2), (1, True, [], 2)]
    side_b = tmp_path / "run" / "b"
    for rank in (0, 1):  # each ended by SIGTERM wrote what it had queued, and its meta, first
        assert finished_seqs(side_b / f"rank{rank}.jsonl") == [0, 1, 2]
        assert meta(side_b, rank)["ended_by"]["signal"] == "SIGTERM"
    for process in running:  # nothing left behind, the stopped rank included
        with pytest.raises(ProcessLookupError):
            os.kill(process["pid"], 0)


@requires_torch("backend_plugins")
def test_ab_record_of_a_killed_rank_then_compare_names_it(tmp_path, healthy_side):
    status, stderr = record_side(tmp_path / "b", "rewritten", env=faults("FAULT_RANK=1,FAULT_AT=4,FAULT=kill"))
    assert status == 2
    assert "rank 1 died by SIGKILL after all_reduce #3 of group 0 (its last record)" in stderr, stderr[-3000:]
    status, output, stderr = compare(tmp_path, healthy_side, tmp_path / "b")
    report = json.loads(output)
    assert status == 2, stderr[-3000:]
    assert report["verdict"].startswith("side b: rank 1 died by SIGKILL after all_reduce #3 of group 0 (its last "
                                        "record)"), report["verdict"]
    assert (report["identical"], report["divergent"], report["missing_in_b"]) == (8, 0, 2 * (STEPS - 4))
    assert finished_seqs(tmp_path / "b" / "rank0.jsonl") == [0, 1, 2, 3] and meta(tmp_path / "b", 0)["rank"] == 0


@requires_torch("backend_plugins")
def test_ab_record_of_a_hung_side_ends_it_at_its_timeout_then_compare_names_each_rank(tmp_path, healthy_side):
    status, stderr = record_side(tmp_path / "b", "rewritten", "--timeout", "8",
                                 env=faults("FAULT_RANK=1,FAULT_AT=3,FAULT=sleep"))
    assert status == 2
    where = ("still running at the deadline: rank 0 inside all_reduce #3 of group 0 after all_reduce #2 of group 0 "
             "(its last record), rank 1 after all_reduce #2 of group 0 (its last record)")
    assert f"the side hung: the job ran past its timeout (8 s) and was ended; {where}" in stderr, stderr[-3000:]
    status, output, stderr = compare(tmp_path, healthy_side, tmp_path / "b")
    report = json.loads(output)
    assert status == 2, stderr[-3000:]
    assert report["verdict"].startswith(f"side b hung: the job ran past its timeout (8 s) and was ended; {where}; "
                                        "ops compared up to there: 6 identical, 0 divergent"), report["verdict"]
    assert meta(tmp_path / "b", 1)["ended_by"] == {"signal": "SIGTERM", "inside": [], "records_flushed": True}


@requires_torch("backend_plugins")
def test_a_launch_command_whose_rank_stops_is_ended_at_the_timeout_with_nothing_left_behind(tmp_path):
    """`ab record -- torchrun ...`: torchrun's ranks run in sessions of their own, out of reach of
    the SIGTERM to torchrun's group, and a stopped one would outlast torchrun itself."""
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", FAULT_JOB]
    started = time.monotonic()
    status, stderr = record_side(tmp_path / "b", "rewritten", "--timeout", "8", command=torchrun,
                                 env=faults("FAULT_RANK=1,FAULT_AT=3,FAULT=stop"))
    assert status == 2 and time.monotonic() - started < 8 + 20, stderr[-3000:]
    assert ("the side hung: the job ran past its timeout (8 s) and was ended; still running at the deadline: rank 0 "
            "inside all_reduce #3 of group 0 after all_reduce #2 of group 0 (its last record), rank 1 stopped (by "
            "SIGSTOP or a debugger: it could not answer) after all_reduce #2 of group 0 (its last record)") in stderr, \
        stderr[-3000:]
    (side,) = (tmp_path / "b").glob("side.*.json")
    running = json.loads(side.read_text())["running_at_deadline"]
    assert [(p["rank"], p["stopped"]) for p in running] == [(0, False), (1, True)]
    for process in running:
        with pytest.raises(ProcessLookupError):
            os.kill(process["pid"], 0)


@requires_torch("backend_plugins")
def test_a_rank_ended_by_sigterm_writes_its_queued_records_and_its_meta(tmp_path):
    """SIGTERM at once after its last op, while the recorder's writer still holds it (it writes every
    50 ms): Python runs no exit handler on SIGTERM, so the rank writes them itself, then dies by it."""
    status, stderr = record_side(tmp_path / "a", "legacy", "--nproc", "1",
                                 env=faults("FAULT_RANK=0,FAULT_AT=10,FAULT=term,FAULT_SETTLE=0,FAULT_STEPS=11"))
    assert status == 2
    assert "rank 0 died by SIGTERM after all_reduce #9 of group 0 (its last record)" in stderr, stderr[-3000:]
    assert finished_seqs(tmp_path / "a" / "rank0.jsonl") == list(range(STEPS))
    assert meta(tmp_path / "a", 0)["ended_by"] == {"signal": "SIGTERM", "inside": [], "records_flushed": True}


def test_a_killed_ranks_last_record_cut_short_leaves_the_records_before_it(tmp_path):
    """A rank killed while writing a record leaves its last line cut short: on a side known to have
    failed that ends the file there, and every record before it is compared."""
    from test_record_integrity import _side

    _side(tmp_path / "a"), _side(tmp_path / "b")
    path = tmp_path / "b" / "rank1.jsonl"
    path.write_text(path.read_text()[:-30])
    (tmp_path / "b" / "side.host.1.json").write_text(json.dumps({
        "label": "b", "spec": "rewritten", "env": {}, "log": None, "seconds": 1.0, "timed_out": False,
        "timeout": None, "running_at_deadline": [], "failure": "side b (rewritten): rank 1 was killed by SIGKILL",
        "ranks": [{"rank": 1, "returncode": -9}, {"rank": 0, "returncode": None}]}))
    status, output, stderr = compare(tmp_path, tmp_path / "a", tmp_path / "b")
    report = json.loads(output)
    assert status == 2 and "Traceback" not in stderr, stderr[-3000:]
    assert report["verdict"] == (
        "side b: rank 1 died by SIGKILL after all_reduce #1 of group 0 (its last record; the one after it was cut "
        "short, the process killed while writing it); rank 0 was ended by the launcher; ops compared up to there: "
        "5 identical, 0 divergent; 1 op(s) side b never reached")
    assert report["sides"]["b"]["fault"]["cut_short"] is True
