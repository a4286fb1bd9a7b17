"""`nccl-migrate ab` in this process (command.py), the sides' jobs stood in for: which options are
refused and how, what reaches the runner, the verdict and exit status of each comparison, and
what `ab record` and `ab compare` say and write, on records written here as ranks write them.
The same commands with real jobs are in test_ab_cli.py and test_ab_faults.py."""

import json
import os
from pathlib import Path

import pytest
from nccl_migrate import cli
from nccl_migrate.ab import command
from nccl_migrate.ab.compare import Comparison
from nccl_migrate.ab.runner import SideRun
from nccl_migrate.ab.spec import Side


def _args(*argv):
    return cli.build_parser().parse_args(["ab", *argv])


def _comparison(tolerance=0.0, classes=None, object_collectives=None, **counts) -> Comparison:
    c = Comparison(tolerance)
    c.counts.update(counts)
    c.classes.update(classes or {})
    c.object_collectives.update(object_collectives or {})
    return c


# --- the verdict -------------------------------------------------------------------------------------

def test_nothing_compared_is_a_failure_never_identical():
    assert command.judge(_comparison(), True) == (2, (
        "nothing compared: neither side recorded an op both could be judged by (did the job issue any collective? "
        "with --shadow, see not_shadowed)"))


def test_identical_and_identical_within_tolerance():
    assert command.judge(_comparison(identical=3), False) == (0, "identical")
    assert command.judge(_comparison(0.01, identical=3, within_tolerance=2), False) == \
        (0, "identical within tolerance 0.01")


def test_a_backend_that_computed_differently_is_implicated_first():
    comparison = _comparison(identical=1, divergent=3, missing_in_b=1,
                             classes={"backend": 2, "job_nondeterminism": 1, "not_compared": 1})
    assert command.judge(comparison, True) == (1, ("divergent, backend implicated: 2 op(s) gave different outputs from "
                                                  "identical inputs on every rank"))


def test_values_not_compared_are_a_failure_with_the_fix():
    comparison = _comparison(divergent=2, classes={"not_compared": 2, "job_nondeterminism": 1})
    assert command.judge(comparison, True) == (2, (
        "values not compared: 2 op(s) had their tensors on a CUDA device on one side and in host memory on the other "
        "(the job places them by backend), so their digests cannot match; rerun with --keep-tensors MAX_BYTES to "
        "compare values"))


def test_job_nondeterminism_only_passes_only_when_allowed():
    comparison = _comparison(divergent=3, classes={"job_nondeterminism": 1, "propagated": 2},
                             object_collectives={"gather_object": 1, "all_gather_object": 2})
    verdict = ("job nondeterminism only: 1 op(s) had inputs the job made differ between runs (inside object "
               "collectives: all_gather_object, gather_object), 2 more followed from them; no backend computed "
               "differently from identical inputs")
    assert command.judge(comparison, True) == (0, verdict)
    assert command.judge(comparison, False) == (1, verdict)
    plain = _comparison(divergent=1, classes={"job_nondeterminism": 1})
    assert command.judge(plain, False)[1] == ("job nondeterminism only: 1 op(s) had inputs the job made differ "
                                              "between runs, 0 more followed from them; no backend computed "
                                              "differently from identical inputs")


def test_missing_ops_with_or_without_divergences():
    assert command.judge(_comparison(identical=2, missing_in_a=1), True) == \
        (1, "ops missing on one side: one side ran fewer ops")
    assert command.judge(_comparison(divergent=1, missing_in_b=1, classes={"job_nondeterminism": 1}), True) == \
        (1, "divergent, and ops missing on one side: no backend computed differently from identical inputs")


def test_a_failed_side_is_compared_as_far_as_it_got():
    comparison = _comparison(identical=4, within_tolerance=1, divergent=2, missing_in_b=3, missing_in_a=1,
                             classes={"backend": 1})
    assert command.compared_up_to_failure(["side b: rank 1 died"], comparison, ["b"]) == (
        "side b: rank 1 died; ops compared up to there: 4 identical, 1 within tolerance, 2 divergent (backend "
        "implicated); 3 op(s) side b never reached; 1 op(s) missing on side a")
    assert command.compared_up_to_failure(["a failed", "b failed"], _comparison(identical=2), ["a", "b"]) == \
        "a failed; b failed; ops compared up to there: 2 identical, 0 divergent"


PATH_CALL = {"rank": 1, "group": "3", "seq": 0, "calls": {"a": "all_reduce SUM of float32 [161] (161 elements)",
                                                          "b": "all_reduce SUM of float32 [16, 8] (128 elements)"}}


def test_a_different_path_is_named_with_both_calls_and_never_allowed_as_job_nondeterminism():
    comparison = _comparison(classes={"backend_dependent_path": 2, "propagated": 1, "job_nondeterminism": 1},
                             identical=1, divergent=4, missing_in_a=2)
    comparison.first_different_call = PATH_CALL
    verdict = ("divergent, the job took a different path under each behaviour: at rank 1, group 3, seq 0 side a "
               "issued all_reduce SUM of float32 [161] (161 elements), side b all_reduce SUM of float32 [16, 8] "
               "(128 elements); 2 op(s) diverged at a different call, 1 more followed; no backend computed "
               "differently from identical inputs")
    assert command.judge(comparison, True) == (1, verdict)
    assert command.judge(comparison, False) == (1, verdict)
    without = _comparison(classes={"backend_dependent_path": 1}, divergent=1)  # no call at hand: the counts alone
    assert command.judge(without, True) == (1, ("divergent, the job took a different path under each behaviour; 1 "
                                                "op(s) diverged at a different call, 0 more followed; no backend "
                                                "computed differently from identical inputs"))


def test_a_backend_is_named_before_a_path_and_a_path_before_values_not_compared():
    backend = _comparison(classes={"backend": 1, "backend_dependent_path": 1}, divergent=2)
    backend.first_different_call = PATH_CALL
    assert command.judge(backend, True)[1].startswith("divergent, backend implicated: 1 op(s)")
    not_compared = _comparison(classes={"backend_dependent_path": 1, "not_compared": 1}, divergent=2)
    not_compared.first_different_call = PATH_CALL
    assert command.judge(not_compared, True)[1].startswith("divergent, the job took a different path")


def test_divergences_that_followed_from_ops_within_tolerance_are_named_so_not_missing_ops():
    followed = _comparison(classes={"propagated": 2}, within_tolerance=1, divergent=2)
    assert command.judge(followed, True) == (1, (
        "divergent: 2 op(s) followed from ops that differed within tolerance; no backend computed differently from "
        "identical inputs"))
    for missing in ("missing_in_a", "missing_in_b"):
        assert command.judge(_comparison(classes={"propagated": 2}, divergent=2, **{missing: 1}), True) == (
            1, "divergent, and ops missing on one side: no backend computed differently from identical inputs")


def test_a_failed_sides_verdict_says_the_job_took_a_different_path():
    comparison = _comparison(classes={"backend_dependent_path": 1}, identical=1, divergent=1)
    assert command.compared_up_to_failure(["side b: rank 1 died"], comparison, ["b"]) == (
        "side b: rank 1 died; ops compared up to there: 1 identical, 1 divergent (the job took a different path)")
    backend = _comparison(classes={"backend": 1, "backend_dependent_path": 1}, divergent=2)
    assert command.compared_up_to_failure(["x"], backend, ["b"]) == (
        "x; ops compared up to there: 0 identical, 2 divergent (backend implicated)")


# --- the run directory -----------------------------------------------------------------------------

def test_a_directory_that_cannot_take_records_is_named_before_anything_runs(tmp_path):
    assert command.unwritable(str(tmp_path / "new" / "dir"), "--run-dir") is None
    assert os.path.isdir(tmp_path / "new" / "dir")
    (tmp_path / "file").write_text("")
    assert command.unwritable(str(tmp_path / "file" / "x"), "--dir") == (
        f"--dir {tmp_path}/file/x: cannot be written (Not a directory); give a directory this user can create and "
        "write (for a job on many nodes, on a filesystem they all share)")


# --- `ab -- COMMAND` --------------------------------------------------------------------------------

@pytest.fixture
def sides_run(monkeypatch):
    """The sides' jobs and the comparison stood in for: what each was given."""
    calls = []

    def run_side(side, cmd, nproc, timeout, run_dir, keep):
        calls.append(("run_side", side.label, side.text, cmd, nproc, timeout, run_dir, keep))
        return SideRun(side, os.path.join(run_dir, side.label), None, None, 1.0)

    def run_shadowed(primary, shadow, cmd, nproc, timeout, run_dir, keep):
        calls.append(("run_shadowed", primary.text, shadow.text, cmd, nproc, timeout, run_dir, keep))
        if shadow.text == "X=1":
            from nccl_migrate.ab.spec import SpecError
            raise SpecError("--shadow: --b 'X=1' sets X")
        return SideRun(primary, os.path.join(run_dir, "shadow"), None, None, 1.0)

    def conclude(args, run_dir, runs, shadow=False):
        assert args.handler is command.main  # the command's own options
        calls.append(("conclude", run_dir, [(r.side.label, r.side.text, r.directory) for r in runs], shadow))
        return 7

    monkeypatch.setattr(command, "run_side", run_side)
    monkeypatch.setattr(command, "run_shadowed", run_shadowed)
    monkeypatch.setattr(command, "conclude", conclude)
    monkeypatch.setattr(command, "unrunnable", lambda cmd: None)  # the job stood in for is never there
    return calls


def test_two_sides_run_in_turn_then_are_compared(tmp_path, sides_run, capsys):
    run_dir = str(tmp_path / "run")
    status = command.main(_args("--nproc", "3", "--timeout", "9", "--keep-tensors", "8", "--run-dir", run_dir,
                                "--b", "legacy", "--", "job.py", "x"))
    assert status == 7
    assert sides_run == [("run_side", "a", "legacy", ["job.py", "x"], 3, 9.0, run_dir, 8),
                         ("run_side", "b", "legacy", ["job.py", "x"], 3, 9.0, run_dir, 8),
                         ("conclude", run_dir, [("a", "legacy", f"{run_dir}/a"), ("b", "legacy", f"{run_dir}/b")],
                          False)]
    assert capsys.readouterr().err == ("nccl-migrate ab: side a (legacy): job.py x\n"
                                       "nccl-migrate ab: side b (legacy): job.py x\n")


def test_a_dump_location_the_user_set_is_named_as_replaced(tmp_path, sides_run, capsys, monkeypatch):
    monkeypatch.setenv("TORCH_FR_DUMP_TEMP_FILE", "/shared/dumps/rank_")
    run_dir = str(tmp_path / "run")
    assert command.main(_args("--run-dir", run_dir, "--", "job.py")) == 7
    said = capsys.readouterr().err.splitlines()[0]
    assert said.startswith("nccl-migrate ab: TORCH_FR_DUMP_TEMP_FILE=/shared/dumps/rank_ replaced") and run_dir in said


def test_a_shadow_run_is_one_job_seen_as_two_sides(tmp_path, sides_run, capsys):
    run_dir = str(tmp_path / "run")
    assert command.main(_args("--shadow", "--run-dir", run_dir, "job.py", "--steps", "2")) == 7
    assert sides_run[0] == ("run_shadowed", "legacy", "rewritten", ["job.py", "--steps", "2"], 2, 600.0, run_dir, 0)
    assert sides_run[1] == ("conclude", run_dir, [("a", "legacy", f"{run_dir}/shadow"),
                                                  ("b", "rewritten", f"{run_dir}/shadow")], True)
    assert capsys.readouterr().err == ("nccl-migrate ab: one run, primary a (legacy), shadow b (rewritten): "
                                       "job.py --steps 2\n")
    assert command.main(_args("--shadow", "--b", "X=1", "--run-dir", run_dir, "--", "job.py")) == 2
    assert capsys.readouterr().err.endswith("): job.py\nnccl-migrate ab: --shadow: --b 'X=1' sets X\n")


def test_without_a_run_directory_a_new_temporary_one_is_used(sides_run, monkeypatch, tmp_path):
    made = str(tmp_path / "tmp-run")
    monkeypatch.setattr(command.tempfile, "mkdtemp", lambda prefix: made if prefix == "nccl-migrate-ab-" else None)
    assert command.main(_args("--", "job.py")) == 7
    assert sides_run[-1][1] == made and os.path.isdir(made)


@pytest.mark.parametrize("argv, said", [
    ([], "no command given; usage: nccl-migrate ab [--a SPEC] [--b SPEC] [--shadow] -- job.py [ARGS]"),
    (["--"], "no command given; usage: nccl-migrate ab [--a SPEC] [--b SPEC] [--shadow] -- job.py [ARGS]"),
    (["--nproc", "0", "--", "job.py"], "--nproc 0: give at least 1 rank per node"),
    (["--tolerance", "-1", "--", "job.py"], "--tolerance -1.0: give 0 or more"),
    (["--a", "legasy", "--", "job.py"], "--a: 'legasy' is neither a behaviour"),
    (["--b", "legacy:tourch", "--", "job.py"], "--b: 'legacy:tourch': unknown implementation 'tourch'"),
])
def test_usage_errors_are_one_line_with_exit_2_and_nothing_runs(argv, said, sides_run, capsys):
    assert command.main(_args(*argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"nccl-migrate ab: {said}") and err.count("\n") == 1
    assert sides_run == []


def test_a_run_directory_that_cannot_be_written_is_refused(tmp_path, sides_run, capsys):
    (tmp_path / "file").write_text("")
    assert command.main(_args("--run-dir", str(tmp_path / "file"), "--", "job.py")) == 2
    assert capsys.readouterr().err.startswith(f"nccl-migrate ab: --run-dir {tmp_path}/file: cannot be written (")
    assert sides_run == []


def test_the_words_compare_and_record_are_subcommands_unless_after_the_separator(monkeypatch, sides_run, tmp_path):
    seen = []
    monkeypatch.setattr(command, "compare_recorded", lambda outer, argv: seen.append(("compare", argv)) or 11)
    monkeypatch.setattr(command, "record", lambda argv: seen.append(("record", argv)) or 12)
    assert command.main(_args("compare", "A", "B")) == 11
    assert command.main(_args("record", "--side", "legacy")) == 12
    assert seen == [("compare", ["A", "B"]), ("record", ["--side", "legacy"])]
    assert command.main(_args("--run-dir", str(tmp_path), "--", "compare")) == 7  # a program named compare
    assert sides_run[0][3] == ["compare"]


# --- `ab record` -------------------------------------------------------------------------------------

@pytest.fixture
def recorded(monkeypatch):
    """`ab record`'s job stood in for: what it was given, and the run it returns."""
    from nccl_migrate.ab import runner

    calls = []

    def record_side(side, cmd, nproc, timeout, directory, keep, launcher_args, log):
        calls.append((side.text, cmd, nproc, timeout, directory, keep, launcher_args, log))
        with open(log, "wb") as f:
            f.write("".join(f"line {n}\n" for n in range(19)).encode() + b"line \xff\n")
        return SideRun(side, directory, log, calls.failure, 2.25)

    calls = type("Calls", (list,), {"failure": None})()
    monkeypatch.setattr(runner, "record_side", record_side)
    monkeypatch.setattr(command, "unrunnable", lambda cmd: None)  # the job stood in for is never there
    monkeypatch.delenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", raising=False)
    return calls


def test_ab_record_records_one_side_and_says_where(tmp_path, recorded, capsys):
    directory = tmp_path / "side"
    assert command.record(["--side", "rewritten", "--dir", str(directory), "--timeout", "30", "--keep-tensors", "16",
                           "--nnodes", "2", "--", "job.py", "x"]) == 0
    [(text, cmd, nproc, timeout, where, keep, launcher_args, log)] = recorded
    assert (text, cmd, nproc, timeout, where, keep, launcher_args) == \
        ("rewritten", ["job.py", "x"], 2, 30.0, str(directory), 16, ["--nnodes", "2"])
    from nccl_migrate.ab.runner import job_log
    assert log == job_log(str(directory))
    assert capsys.readouterr().err == (
        f"nccl-migrate ab record: side rewritten into {directory}: job.py x\n"
        f"nccl-migrate ab record: the job's output goes to {log}; it is ended after 30 s\n"
        f"nccl-migrate ab record: recorded in {directory} (2.2 s); compare with nccl-migrate ab compare DIR_A DIR_B\n")
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in os.environ


def test_ab_record_without_a_timeout_runs_without_limit_and_a_relative_dir_is_made_absolute(tmp_path, recorded,
                                                                                            capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert command.record(["--side", "legacy", "--dir", "rel", "--nproc", "4", "job.py"]) == 0
    assert recorded[0][2:6] == (4, None, str(tmp_path / "rel"), 0)  # no tensors kept unless asked
    assert capsys.readouterr().err.splitlines()[1] == f"nccl-migrate ab record: the job's output goes to {recorded[0][7]}"


def test_restarts_get_a_fresh_store_per_attempt(tmp_path, recorded, monkeypatch):
    assert command.record(["--side", "legacy", "--dir", str(tmp_path), "--max-restarts", "1", "--", "job.py"]) == 0
    assert os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    monkeypatch.setenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "0")  # the user's own choice stands
    assert command.record(["--side", "legacy", "--dir", str(tmp_path), "--max-restarts", "1", "--", "job.py"]) == 0
    assert os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "0"


def test_a_failed_recording_names_the_fault_and_the_jobs_last_lines(tmp_path, recorded, capsys):
    recorded.failure = "side side (legacy): rank 0 exited with status 1"
    assert command.record(["--side", "legacy", "--dir", str(tmp_path), "--", "job.py"]) == 2
    err = capsys.readouterr().err.split("\n", 2)[2]
    assert err == ("nccl-migrate ab record: side side (legacy): rank 0 exited with status 1\n--- last lines of the "
                   f"job's output ({recorded[0][7]}):\n" + "".join(f"line {n}\n" for n in range(5, 19)) + "line \ufffd\n\n")


def test_a_recording_whose_ranks_say_more_than_the_launcher_names_them(tmp_path, recorded, capsys):
    recorded.failure = "the launcher failed"
    (tmp_path / "rank0.jsonl").write_text(json.dumps({"rank": 0, "group": "0", "seq": 3, "op": "barrier"}) + "\n")
    assert command.record(["--side", "legacy", "--dir", str(tmp_path), "--", "job.py"]) == 2
    err = capsys.readouterr().err
    assert ("nccl-migrate ab record: the launcher failed\nnccl-migrate ab record: rank 0 ended without writing its "
            "meta (killed by a signal it could not handle, such as SIGKILL, or crashed) after barrier #3 of group 0 "
            f"(its last record)\n--- last lines of the job's output ({recorded[0][7]}):\n") in err


def test_a_recording_whose_records_are_not_whole_fails(tmp_path, recorded, capsys):
    for rank in (0, 1):
        (tmp_path / f"rank{rank}.meta.json").write_text(json.dumps({"rank": rank, "world_size": 2, "peak_rss_kib": 1,
                                                                    "incomplete": {"error": "disk full"}}))
    assert command.record(["--side", "legacy", "--dir", str(tmp_path), "--", "job.py"]) == 2
    assert capsys.readouterr().err.endswith(
        "nccl-migrate ab record: the job succeeded but its records are not whole: rank 0's records are incomplete: "
        f"disk full (? record(s) written, ? dropped); free space or fix {tmp_path}, then rerun the side; rank 1's "
        f"records are incomplete: disk full (? record(s) written, ? dropped); free space or fix {tmp_path}, then "
        "rerun the side\n")
    (tmp_path / "rank1.meta.json").unlink()
    (tmp_path / "rank0.meta.json").write_text("{")  # what else is wrong, the comparison reports
    assert command.record(["--side", "legacy", "--dir", str(tmp_path), "--", "job.py"]) == 0


@pytest.mark.parametrize("argv, said", [
    (["--side", "legacy", "--dir", "d", "--nproc", "2", "--", "torchrun", "job.py"],
     ("ab record: --nproc apply to a .py job only: torchrun is a launch command, run once as given, and starts the "
     "ranks itself; give them to it (torchrun --nproc-per-node ...), or give the .py job itself")),
    (["--side", "legacy", "--dir", "d", "--nnodes", "2", "--rdzv-id", "j", "--", "srun", "python", "job.py"],
     "ab record: --nnodes, --rdzv-id apply to a .py job only: srun is a launch command"),
    (["--side", "legacy", "--dir", "d", "--nproc", "0", "--", "job.py"], "ab record: --nproc 0: give at least 1 rank"),
    (["--side", "legacy", "--dir", "d", "--timeout", "0", "--", "job.py"],
     "ab record: --timeout 0.0: give a positive number of seconds (or leave it out for no limit)"),
    (["--side", "legasy", "--dir", "d", "--", "job.py"], "ab record: --side: 'legasy' is neither a behaviour"),
    (["--side", "legacy", "--dir", "d"], ("ab record: no command given; usage: nccl-migrate ab record --side SPEC --dir "
                                         "DIR -- COMMAND")),
])
def test_ab_record_usage_errors_are_one_line_with_exit_2(argv, said, recorded, capsys):
    assert command.record(argv) == 2
    assert capsys.readouterr().err.startswith(f"nccl-migrate {said}")
    assert recorded == []


def test_ab_record_refuses_a_dir_it_cannot_write_and_parses_like_any_command(tmp_path, recorded, capsys):
    (tmp_path / "file").write_text("")
    assert command.record(["--side", "legacy", "--dir", str(tmp_path / "file"), "--", "job.py"]) == 2
    assert capsys.readouterr().err.startswith(f"nccl-migrate ab record: --dir {tmp_path}/file: cannot be written")
    assert command.record(["--help"]) == 0 and "usage: nccl-migrate ab record" in capsys.readouterr().out
    assert command.record(["--dir", "d"]) == 2  # --side is required
    assert recorded == []


def test_print_env_prints_shell_exports_and_runs_nothing(tmp_path, recorded, capsys):
    assert command.record(["--side", "rewritten:torch", "--dir", str(tmp_path / "d"), "--keep-tensors", "5",
                           "--print-env"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["export NCCL_MIGRATE_AB_KEEP=5", f"export NCCL_MIGRATE_AB_RECORD={tmp_path}/d",
                   "export NCCL_MIGRATE_ACTIVATE=1", "export NCCL_MIGRATE_IMPL=torch",
                   f"export NCCL_MIGRATE_REPORT='{tmp_path}/d/report_{{rank}}.json'", "unset TORCH_DIST_USE_NCCL2",
                   f"export TORCH_FR_DUMP_TEMP_FILE={tmp_path}/d/fr/comm_lib_trace_rank_"]
    assert recorded == []
    # only the dumps' folder, which torch needs to exist and will not make
    assert [p.relative_to(tmp_path) for p in sorted((tmp_path / "d").rglob("*"))] == [Path("d/fr")]


# --- `ab compare` on records written here ---------------------------------------------------------

def _entry(rank, seq, out="o", inp="i", **more):
    return dict({"rank": rank, "group": "0", "seq": seq, "op": "all_reduce", "dtype": "float32", "in_shapes": [[4]],
                 "out_shapes": [[4]], "reduce_op": "SUM", "peer": None, "t": 1.0 + seq, "in": inp + str(seq),
                 "out": out + str(seq), "ms": 1.0}, **more)


def _recorded_side(directory, ops=2, out="o", rank_ids=(0,), meta=True, **facts):
    os.makedirs(directory, exist_ok=True)
    for rank in rank_ids:
        if meta:
            with open(os.path.join(directory, f"rank{rank}.meta.json"), "w") as f:
                json.dump({"rank": rank, "world_size": len(rank_ids), "peak_rss_kib": 1024,
                           "memory": [[0.0, 1000, None], [1.0, 1100, None]]}, f)
        with open(os.path.join(directory, f"rank{rank}.jsonl"), "w") as f:
            f.writelines(json.dumps(_entry(rank, seq, out)) + "\n" for seq in range(ops))
    if facts:
        with open(os.path.join(directory, "side.h.1.json"), "w") as f:
            json.dump(dict({"label": "b", "spec": "rewritten", "env": {}, "log": None, "failure": None,
                            "seconds": 1.0}, **facts), f)
    return str(directory)


def _compare(*argv):
    return command.main(_args("--quiet", "compare", *argv))


def test_two_identical_recorded_sides_exit_0_and_write_the_reports(tmp_path, capsys):
    a, b = _recorded_side(tmp_path / "a"), _recorded_side(tmp_path / "b")
    run_dir = tmp_path / "run"
    assert _compare(a, b, "--run-dir", str(run_dir), "--format", "json") == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["verdict"] == "identical" and report["exit_code"] == 0 and report["ops_compared"] == 2
    assert report["tolerance"] == 0.0 and report["sides"]["a"]["op_counts"] == {"all_reduce": 2}
    assert report["run_dir"] == str(run_dir) and (run_dir / "report.json").read_text() == json.dumps(report, indent=1)
    assert out == json.dumps(report, indent=1) + "\n"
    page = (run_dir / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    for plot in ("op-map", "latency-by-op", "latency-by-issue", "memory"):
        assert f"data-plot='{plot}'" in page, plot
    assert err == f"nccl-migrate ab: records, the job's output and report.html are in {run_dir}\n"


def test_a_comparison_without_a_run_directory_writes_nothing_and_says_how_to_keep_it(tmp_path, capsys):
    a, b = _recorded_side(tmp_path / "a"), _recorded_side(tmp_path / "b", out="x")
    html = tmp_path / "page.html"
    assert _compare(a, b, "--html", str(html)) == 1
    out, err = capsys.readouterr()
    assert out.startswith("nccl-migrate ab: divergent, backend implicated: 2 op(s) gave different outputs")
    assert "report.json" not in os.listdir(tmp_path)
    assert html.read_text().startswith("<!DOCTYPE html>")
    assert err == ("nccl-migrate ab: no report written; give --run-dir DIR to keep report.json and report.html (or "
                   "--html PATH for the page alone)\n")


def test_options_before_the_word_compare_stand_unless_given_again(tmp_path, capsys):
    a, b = _recorded_side(tmp_path / "a"), _recorded_side(tmp_path / "b")
    assert command.main(_args("--format", "json", "--quiet", "compare", a, b)) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "identical"
    assert command.main(_args("--format", "json", "--quiet", "compare", a, b, "--format", "text")) == 0
    assert capsys.readouterr().out.startswith("nccl-migrate ab: identical")


def test_progress_lines_go_to_stderr_unless_quiet(tmp_path, capsys, monkeypatch):
    a, b = _recorded_side(tmp_path / "a"), _recorded_side(tmp_path / "b")
    made = []
    real = command.Progress

    def progress(ranks):
        made.append(ranks)
        return real(ranks)

    monkeypatch.setattr(command, "Progress", progress)
    assert command.main(_args("compare", a, b)) == 0
    assert made == [1]
    assert command.main(_args("compare", a, b, "--quiet")) == 0
    assert made == [1]


@pytest.mark.parametrize("argv, said", [
    (["--tolerance", "-0.5"], "ab compare: --tolerance -0.5: give 0 or more"),
])
def test_ab_compare_usage_errors(tmp_path, capsys, argv, said):
    a, b = _recorded_side(tmp_path / "a"), _recorded_side(tmp_path / "b")
    assert _compare(a, b, *argv) == 2
    assert capsys.readouterr().err == f"nccl-migrate ab: {said}\n"


def test_ab_compare_refuses_what_it_cannot_read_or_write(tmp_path, capsys):
    a, b = _recorded_side(tmp_path / "a"), _recorded_side(tmp_path / "b")
    (tmp_path / "file").write_text("")
    assert _compare(a, b, "--run-dir", str(tmp_path / "file")) == 2
    assert capsys.readouterr().err.startswith(f"nccl-migrate ab: ab compare: --run-dir {tmp_path}/file: cannot be "
                                              "written (")
    (tmp_path / "b" / "side.h.1.json").write_text("{")
    assert _compare(a, b) == 2
    assert capsys.readouterr().err.startswith(f"nccl-migrate ab: {b}/side.h.1.json: not a side description (")
    assert _compare(a) == 2 and "the following arguments are required: DIR_B" in capsys.readouterr().err
    assert _compare("--help") == 0 and "usage: nccl-migrate ab compare" in capsys.readouterr().out


def test_a_damaged_record_or_missing_ranks_cannot_be_compared(tmp_path, capsys):
    a, b = _recorded_side(tmp_path / "a"), _recorded_side(tmp_path / "b")
    with open(os.path.join(b, "rank0.jsonl"), "a") as f:
        f.write("{oops\n")
    assert _compare(a, b, "--format", "json") == 2
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"].startswith(f"could not compare: records that cannot be compared: {b}/rank0.jsonl, line 3: "
                                        "not a JSON record")
    assert report["exit_code"] == 2 and "ops_compared" not in report
    b = _recorded_side(tmp_path / "b2", rank_ids=(0, 1))
    os.unlink(os.path.join(b, "rank1.meta.json"))
    assert _compare(a, b, "--format", "json") == 2
    verdict = json.loads(capsys.readouterr().out)["verdict"]
    assert verdict.startswith("could not compare: side b: rank 1 recorded its ops (rank1.jsonl) but never wrote "
                              "rank1.meta.json at exit")
    (tmp_path / "b3").mkdir()
    (tmp_path / "b3" / "rank0.meta.json").write_text("{")
    assert _compare(a, str(tmp_path / "b3"), "--format", "json") == 2
    assert json.loads(capsys.readouterr().out)["verdict"].startswith(
        f"could not compare: records that cannot be compared: {tmp_path}/b3/rank0.meta.json: not valid JSON")


def test_incomplete_records_cannot_be_compared(tmp_path, capsys):
    a, b = _recorded_side(tmp_path / "a"), _recorded_side(tmp_path / "b")
    with open(os.path.join(b, "rank0.meta.json"), "w") as f:
        json.dump({"rank": 0, "world_size": 1, "peak_rss_kib": 1, "incomplete": {"error": "disk full"}}, f)
    assert _compare(a, b, "--format", "json") == 2
    assert json.loads(capsys.readouterr().out)["verdict"] == (
        f"could not compare: side b: rank 0's records are incomplete: disk full (? record(s) written, ? dropped); free "
        f"space or fix {b}, then rerun the side")


def test_a_side_that_failed_is_compared_up_to_its_failure(tmp_path, capsys):
    a = _recorded_side(tmp_path / "a", ops=4)
    b = _recorded_side(tmp_path / "b", ops=2, failure="side b (rewritten): rank 0 was killed by SIGKILL",
                       ranks=[{"rank": 0, "returncode": -9}], log=str(tmp_path / "b.log"))
    (tmp_path / "b.log").write_text("the job's last words\n")
    with open(os.path.join(b, "rank0.jsonl"), "a") as f:
        f.write(json.dumps(_entry(0, 2, error="peer closed")) + "\n")
    assert _compare(a, b, "--format", "json") == 2
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["verdict"] == ("side b: rank 0 died by SIGKILL after all_reduce #1 of group 0 (its last record); its "
                                 "all_reduce #2 of group 0 failed: peer closed; ops compared up to there: 2 identical, 0 "
                                 "divergent; 2 op(s) side b never reached")
    assert report["sides"]["b"]["fault"]["kind"] == "died" and report["sides"]["b"]["ops_cut_by_failure"] == 1
    assert "fault" not in report["sides"]["a"]
    assert err.startswith(f"--- last lines of side b's output ({tmp_path}/b.log):\nthe job's last words\n")


def test_a_side_that_failed_before_recording_anything_cannot_be_compared(tmp_path, capsys):
    a = _recorded_side(tmp_path / "a")
    b = _recorded_side(tmp_path / "b", ops=0, rank_ids=(), failure="side b (rewritten): torchrun rejected --nnodes")
    assert _compare(a, b, "--format", "json") == 2
    assert json.loads(capsys.readouterr().out)["verdict"] == (
        "could not compare: side b (rewritten): torchrun rejected --nnodes; side b recorded no op")


def test_a_report_that_cannot_be_written_still_prints_the_verdict_and_exits_2(tmp_path, capsys):
    a, b = _recorded_side(tmp_path / "a"), _recorded_side(tmp_path / "b")
    assert _compare(a, b, "--html", str(tmp_path / "no" / "such" / "page.html"), "--format", "json") == 2
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["verdict"] == "identical" and report["exit_code"] == 2
    assert err.startswith(f"nccl-migrate ab: the report could not be written: {tmp_path}/no/such/page.html: No such "
                          "file or directory\n")


def test_a_full_scratch_disk_while_comparing_is_a_failure_named(tmp_path, capsys, monkeypatch):
    from nccl_migrate.ab.divergences import ScratchError

    def compare(*args, **kwargs):
        raise ScratchError("the scratch database is full: free space in TMPDIR")

    monkeypatch.setattr(command, "compare", compare)
    a, b = _recorded_side(tmp_path / "a"), _recorded_side(tmp_path / "b")
    assert _compare(a, b, "--format", "json") == 2
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "could not compare: the scratch database is full: free space in TMPDIR"
    assert "ops_compared" not in report


def test_a_shadow_runs_records_are_compared_as_its_two_sides(tmp_path, capsys):
    directory = tmp_path / "shadow"
    directory.mkdir()
    (directory / "rank0.meta.json").write_text(json.dumps({"rank": 0, "world_size": 1, "peak_rss_kib": 1}))
    entries = [_entry(0, 0, shadow={"out": "o0", "ms": 1.0}), _entry(0, 1, shadow={"skipped": "issued from C++"}),
               _entry(0, 2, shadow={"out": "o2", "ms": 1.0})]
    (directory / "rank0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    run = SideRun(Side("a", "legacy"), str(directory), None, None, 1.0)
    args = _args("--format", "json", "--quiet", "--", "job.py")
    assert command.conclude(args, str(tmp_path), command._shadow_runs(run, Side("b", "rewritten")), shadow=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["mode"] == "shadow" and report["ops_compared"] == 2
    assert report["not_shadowed"] == {"count": 1, "first": {"rank": 0, "group": "0", "seq": 1, "op": "all_reduce",
                                                            "reason": "issued from C++"}}
    assert report["verdict"] == "identical; 1 op(s) not shadowed, so not compared (first: issued from C++)"
    assert report["sides"]["b"]["spec"] == "rewritten"
    assert json.loads((tmp_path / "report.json").read_text()) == report  # written into the run directory


def _shadow_records(directory, entries, meta="ok"):
    directory.mkdir()
    (directory / "rank0.meta.json").write_text(json.dumps({"rank": 0, "world_size": 1, "peak_rss_kib": 1})
                                               if meta == "ok" else meta)
    (directory / "rank0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    return SideRun(Side("a", "legacy"), str(directory), None, None, 1.0)


def test_a_shadow_run_with_every_op_shadowed_is_judged_on_them_all(tmp_path, capsys):
    run = _shadow_records(tmp_path / "shadow", [_entry(0, 0, shadow={"out": "o0", "ms": 1.0})])
    args = _args("--format", "json", "--quiet", "--", "job.py")
    assert command.conclude(args, str(tmp_path), command._shadow_runs(run, Side("b", "rewritten")), shadow=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "identical" and report["not_shadowed"] == {"count": 0, "first": None}


def test_a_shadow_run_that_failed_is_one_fault_cutting_both_sides(tmp_path, capsys):
    entries = [_entry(0, 0, shadow={"out": "o0", "ms": 1.0}), _entry(0, 1, error="peer closed")]
    run = _shadow_records(tmp_path / "shadow", entries)
    run.failure, run.ranks = "side a (legacy): rank 0 was killed by SIGKILL", [{"rank": 0, "returncode": -9}]
    args = _args("--format", "json", "--quiet", "--", "job.py")
    assert command.conclude(args, str(tmp_path), command._shadow_runs(run, Side("b", "rewritten")), shadow=True) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == ("side a: rank 0 died by SIGKILL after all_reduce #0 of group 0 (its last record); its "
                                 "all_reduce #1 of group 0 failed: peer closed; ops compared up to there: 1 identical, "
                                 "0 divergent")
    assert report["sides"]["a"]["ops_cut_by_failure"] == 1 and report["sides"]["b"]["ops_cut_by_failure"] == 1
    assert "fault" in report["sides"]["a"] and "fault" not in report["sides"]["b"]


def test_a_shadow_run_whose_records_cannot_be_read_names_them(tmp_path, capsys):
    run = _shadow_records(tmp_path / "shadow", [_entry(0, 0)], meta="{")
    run.failure, run.ranks = "side a (legacy): rank 0 exited with status 1", [{"rank": 0, "returncode": 1}]
    args = _args("--format", "json", "--quiet", "--", "job.py")
    assert command.conclude(args, str(tmp_path), command._shadow_runs(run, Side("b", "rewritten")), shadow=True) == 2
    verdict = json.loads(capsys.readouterr().out)["verdict"]
    assert verdict.startswith("could not compare: side a: rank 0 exited with status 1 after all_reduce #0 of group 0 "
                              "(its last record); records that cannot be compared: ")


def test_job_nondeterminism_passes_when_allowed_by_the_option(tmp_path, capsys):
    a = _recorded_side(tmp_path / "a")
    b = _recorded_side(tmp_path / "b", out="x")
    with open(os.path.join(b, "rank0.jsonl"), "w") as f:  # the job's own inputs already differed
        f.writelines(json.dumps(_entry(0, seq, "x", inp="j")) + "\n" for seq in range(2))
    assert _compare(a, b, "--format", "json") == 1
    assert json.loads(capsys.readouterr().out)["verdict"].startswith("job nondeterminism only: 1 op(s)")
    assert _compare(a, b, "--format", "json", "--allow-job-nondeterminism") == 0
    assert json.loads(capsys.readouterr().out)["tolerance"] == 0.0
    assert _compare(a, b, "--format", "json", "--tolerance", "0.5") == 1
    assert json.loads(capsys.readouterr().out)["tolerance"] == 0.5


def test_a_failed_side_whose_other_side_is_damaged_names_both(tmp_path, capsys):
    a = _recorded_side(tmp_path / "a", ops=3)
    with open(os.path.join(a, "rank0.jsonl"), "a") as f:
        f.write("{oops\n")
    b = _recorded_side(tmp_path / "b", ops=2, failure="side b (rewritten): rank 0 exited with status 1",
                       ranks=[{"rank": 0, "returncode": 1}])
    assert _compare(a, b, "--format", "json") == 2
    assert json.loads(capsys.readouterr().out)["verdict"].startswith(
        "could not compare: side b: rank 0 exited with status 1 after all_reduce #1 of group 0 (its last record); "
        f"records that cannot be compared: {a}/rank0.jsonl, line 4: not a JSON record")


def test_a_failed_side_whose_records_cannot_be_read_is_not_cut(tmp_path, capsys):
    a = _recorded_side(tmp_path / "a")
    b = _recorded_side(tmp_path / "b", failure="side b (rewritten): rank 0 exited with status 1",
                       ranks=[{"rank": 0, "returncode": 1}])
    (tmp_path / "b" / "rank0.meta.json").write_text("{")
    assert _compare(a, b, "--format", "json") == 2
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"].startswith("could not compare: side b: rank 0 exited with status 1 after all_reduce #1 "
                                        "of group 0 (its last record); records that cannot be compared: ")
    assert "ops_cut_by_failure" not in report["sides"]["b"]


def test_a_full_scratch_disk_with_a_failed_side_names_both(tmp_path, capsys, monkeypatch):
    from nccl_migrate.ab.divergences import ScratchError

    def compare(*args, **kwargs):
        raise ScratchError("the scratch database is full")

    monkeypatch.setattr(command, "compare", compare)
    a = _recorded_side(tmp_path / "a")
    b = _recorded_side(tmp_path / "b", failure="side b (rewritten): rank 0 exited with status 1",
                       ranks=[{"rank": 0, "returncode": 1}])
    assert _compare(a, b, "--format", "json") == 2
    assert json.loads(capsys.readouterr().out)["verdict"] == (
        "could not compare: side b: rank 0 exited with status 1 after all_reduce #1 of group 0 (its last record); the "
        "scratch database is full")
