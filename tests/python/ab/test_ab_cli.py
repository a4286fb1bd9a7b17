"""`nccl-migrate ab` end to end on CPU: real jobs, two sides, real collectives, through the CLI."""

import json
import os
import subprocess
import time

import pytest

from torch_support import requires_torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CLI = os.environ.get("NCCL_MIGRATE_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))
DDP_JOB = os.path.join(ROOT, "examples", "ddp_job.py")
TINY_JOB = os.path.join(HERE, "tiny_job.py")


def ab(tmp_path, *args, env=None, timeout=240):
    """Runs `nccl-migrate ab --format json ARGS` and returns (exit status, report, stderr)."""
    full_env = dict(os.environ, **(env or {}))
    done = subprocess.run([CLI, "ab", "--format", "json", "--run-dir", str(tmp_path / "run"), *args],
                          capture_output=True, text=True, timeout=timeout, env=full_env, check=False)
    report = json.loads(done.stdout) if done.stdout.strip() else None
    return done.returncode, report, done.stderr


@requires_torch("backend_plugins")
def test_example_job_is_identical_under_legacy_and_rewritten(tmp_path):
    status, report, stderr = ab(tmp_path, "--", DDP_JOB, env={"JOB_STEPS": "2"})
    assert status == 0, stderr
    assert report["verdict"] == "identical"
    assert report["ops_compared"] > 0 and report["ops_compared"] == report["identical"]
    for side in ("a", "b"):
        counts = report["sides"][side]["op_counts"]
        for op in ("broadcast", "all_reduce", "all_gather", "send", "recv"):
            assert counts.get(op, 0) > 0, (side, counts)
    # Each side really ran its behaviour: legacy adds a p2p communicator per peer pair.
    legacy, rewritten = report["sides"]["a"]["communicators"], report["sides"]["b"]["communicators"]
    assert any("p2p" in c for c in legacy["0"]) and not any("p2p" in c for c in rewritten["0"])


@requires_torch("backend_plugins")
def test_planted_divergence_is_named_exactly(tmp_path):
    perturb = '"NCCL_MIGRATE_AB_PERTURB=rank=1,group=0,seq=5"'
    status, report, stderr = ab(tmp_path, "--keep-tensors", "65536", "--b", f"rewritten,{perturb}", "--", DDP_JOB,
                                env={"JOB_STEPS": "2"})
    assert status == 1, stderr
    first = report["first_divergence"]
    assert (first["rank"], first["group"], first["seq"], first["op"]) == (1, "0", 5, "all_reduce")
    assert first["cause"].startswith("only outputs differ") and first["class"] == "backend"
    assert report["backend_implicated"] and report["verdict"].startswith("divergent, backend implicated")
    assert 0 < first["max_abs_error"] < 1e-3  # one flipped low bit: measured, not guessed
    assert report["divergent"] >= 1 and report["missing_in_a"] == report["missing_in_b"] == 0


@requires_torch("backend_plugins")
def test_inputs_that_already_differ_are_told_apart(tmp_path):
    status, report, stderr = ab(tmp_path, "--b", "rewritten,TINY_RANDOM_SEED=1", "--", TINY_JOB)
    assert status == 1, stderr
    first = report["first_divergence"]
    assert (first["group"], first["seq"]) == ("0", 0)
    assert first["cause"].startswith("inputs already differed") and first["inputs_differed_on_ranks"] == [1]
    assert first["class"] == "job_nondeterminism" and not report["backend_implicated"]
    assert report["divergence_classes"]["job_nondeterminism"] == 2  # seq 0, on both ranks; the rest followed it
    assert first["max_abs_error"] is None  # no kept tensors: divergent, error unknown


@requires_torch("backend_plugins")
def test_a_side_that_runs_fewer_steps_has_missing_ops(tmp_path):
    status, report, stderr = ab(tmp_path, "--b", "rewritten,TINY_STEPS=2", "--", TINY_JOB)
    assert status == 1, stderr
    assert report["missing_in_b"] == 2 and report["missing_in_a"] == 0  # one all_reduce per rank
    assert report["first_missing"]["seq"] == 2 and report["first_missing"]["missing_on"] == "b"


@requires_torch("backend_plugins")
def test_a_crashing_side_is_named_and_exits_2(tmp_path):
    status, report, _ = ab(tmp_path, "--b", "rewritten,TINY_CRASH=1", "--", TINY_JOB)
    assert status == 2
    assert "side b" in report["verdict"] and "rank 1 exited with status 3" in report["verdict"]
    assert report["sides"]["a"]["failure"] is None
    assert os.path.exists(report["sides"]["b"]["log"]), "the job's own output must be kept"


@requires_torch("backend_plugins")
def test_a_hanging_side_is_ended_by_the_timeout(tmp_path):
    started = time.monotonic()
    status, report, _ = ab(tmp_path, "--timeout", "20", "--b", "rewritten,TINY_HANG=0", "--", TINY_JOB)
    assert status == 2
    assert "side b" in report["verdict"] and "timeout" in report["verdict"]
    assert time.monotonic() - started < 90
    # The hung rank was killed without running exit handlers: its record of the op before the
    # hang is on disk all the same.
    with open(tmp_path / "run" / "b" / "rank0.jsonl") as records:
        first = json.loads(records.readline())
    assert (first["op"], first["seq"], first["rank"]) == ("all_reduce", 0, 0) and first["out"]


@pytest.mark.parametrize("args,message", [
    (["--a", "legasy", "--", "job.py"], "'legasy' is neither a behaviour"),
    (["--b", "legacy:tourch", "--", "job.py"], "unknown implementation 'tourch'"),
    ([], "no command given"),
])
def test_usage_errors_say_what_to_fix(tmp_path, args, message):
    status, report, stderr = ab(tmp_path, *args)
    assert status == 2 and message in stderr and report is None


def _cli(*args, timeout=120):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.parametrize("args,message", [
    (["run", "--nnodes", "abc", "--", TINY_JOB], "torchrun rejected"),
    (["run", "--max-restarts", "-1", "--", TINY_JOB], "--max-restarts"),
    (["ab", "record", "--side", "legacy", "--dir", "unused", "--nproc", "0", "--", TINY_JOB], "--nproc"),
    (["ab", "record", "--side", "legacy", "--dir", "unused", "--timeout", "0", "--", TINY_JOB], "--timeout"),
    (["ab", "record", "--side", "legacy", "--dir", "unused", "--keep-tensors", "-1", "--", TINY_JOB], "--keep-tensors"),
])
def test_launch_option_errors_are_messages_with_exit_2(args, message):
    done = _cli(*args)
    assert done.returncode == 2 and message in done.stderr, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr


def test_ab_compare_is_a_subcommand_with_its_own_help_and_options_anywhere(tmp_path):
    done = _cli("ab", "compare", "--help")
    assert done.returncode == 0 and "DIR_A" in done.stdout and "--allow-job-nondeterminism" in done.stdout
    missing = str(tmp_path / "nowhere")
    done = _cli("ab", "compare", missing, missing, "--format", "json")
    assert done.returncode == 2 and json.loads(done.stdout)["verdict"].startswith("could not compare")
    assert "no such directory" in json.loads(done.stdout)["verdict"]
    assert "--run-dir" in done.stderr  # where a report would be kept


def test_ab_record_has_no_timeout_unless_given_and_says_where_the_output_goes(tmp_path):
    done = _cli("ab", "record", "--help")
    assert "no limit" in done.stdout
    job = tmp_path / "quick.py"
    job.write_text("print('the job ran')\n")
    done = _cli("ab", "record", "--side", "legacy", "--dir", str(tmp_path / "a"), "--nproc", "1", "--", str(job))
    assert done.returncode == 0, done.stderr
    logs = list((tmp_path / "a").glob("job.*.log"))
    assert len(logs) == 1 and str(logs[0]) in done.stderr.splitlines()[0] + done.stderr.splitlines()[1]


def test_a_directory_that_cannot_be_written_is_refused_before_the_job_starts(tmp_path):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    for args, option in ((["ab", "record", "--side", "legacy", "--dir", str(not_a_directory / "a"), "--", TINY_JOB],
                          "--dir"),
                         (["ab", "--run-dir", str(not_a_directory / "run"), "--", TINY_JOB], "--run-dir"),
                         (["ab", "compare", str(tmp_path), str(tmp_path), "--run-dir", str(not_a_directory / "r")],
                          "--run-dir")):
        done = _cli(*args)
        assert done.returncode == 2 and f"{option} {not_a_directory}/" in done.stderr, done.stderr[-2000:]
        assert "cannot be written (Not a directory)" in done.stderr and "Traceback" not in done.stderr
    html = _cli("ab", "compare", str(tmp_path), str(tmp_path), "--html", str(not_a_directory / "r.html"))
    assert html.returncode == 2 and "the report could not be written" in html.stderr and "Traceback" not in html.stderr
