"""The torch-side CLI's options and its `run` and `doctor` commands in this process, torch's
launcher and the environment's examination stood in for: which options are refused and how, what
reaches the launcher, and the exit status of each outcome."""

import argparse
import os

import pytest
from nccl_migrate import cli, job_command, launch, launch_options
from nccl_migrate.launch import JobResult, RankResult


def _options(**given):
    args = cli.build_parser().parse_args(["run", "--", "job.py"])
    for key, value in given.items():
        setattr(args, key, value)
    return args


def test_launcher_options_are_passed_on_as_given_and_only_when_given():
    args = cli.build_parser().parse_args(["run", "--nnodes", "1:2", "--node-rank", "1", "--rdzv-backend", "etcd",
                                          "--rdzv-endpoint", "h:1", "--rdzv-id", "j", "--max-restarts", "3", "--", "x"])
    assert launch_options.launcher_arguments(args) == ["--nnodes", "1:2", "--node-rank", "1", "--rdzv-backend", "etcd",
                                            "--rdzv-endpoint", "h:1", "--rdzv-id", "j", "--max-restarts", "3"]
    assert launch_options.launcher_arguments(_options()) == []
    assert launch_options.launcher_arguments(_options(max_restarts=0)) == ["--max-restarts", "0"]


@pytest.mark.parametrize("given, said", [
    ({"nproc": 0}, "--nproc 0: give at least 1 rank per node"),
    ({"timeout": 0.0}, "--timeout 0.0: give a positive number of seconds"),
    ({"timeout": -1.0, "timeout_optional": True}, "--timeout -1.0: give a positive number of seconds (or leave it out "
                                                  "for no limit)"),
    ({"timeout": float("nan")}, "--timeout nan: give a positive number of seconds"),
    ({"max_restarts": -1}, "--max-restarts -1: give 0 or more"),
    ({"keep_tensors": -1}, "--keep-tensors -1: give a number of bytes, 0 or more"),
    ({"tolerance": -0.5}, "--tolerance -0.5: give 0 or more"),
])
def test_each_bad_launch_option_is_named_with_what_to_give(given, said):
    assert launch_options.launch_option_error(_options(**given)) == said


def test_good_launch_options_pass():
    assert launch_options.launch_option_error(_options()) is None
    assert launch_options.launch_option_error(_options(nproc=1, timeout=None, max_restarts=0, keep_tensors=0, tolerance=0.0)) is None
    bare = argparse.Namespace(nproc=1, timeout=1.0)  # `run` has no --keep-tensors nor --tolerance
    assert launch_options.launch_option_error(bare) is None


def test_a_launcher_command_is_recognised():
    assert job_command.starts_own_ranks(["torchrun", "job.py"]) and job_command.starts_own_ranks(["/usr/bin/torchrun"])
    assert job_command.starts_own_ranks(["python", "-m", "torch.distributed.run", "job.py"])
    assert not job_command.starts_own_ranks(["python", "job.py"]) and not job_command.starts_own_ranks(["python", "-m", "x"])
    assert not job_command.starts_own_ranks(["job.py"]) and not job_command.starts_own_ranks(["./rank_binary"])


@pytest.mark.parametrize("command", [["bash", "launch.sh"], ["./launch.sh"], ["sh", "-e", "launch"],
                                     ["srun", "python", "job.py"], ["mpirun", "-n", "2", "job"]])
def test_a_shell_script_or_a_schedulers_launcher_starts_its_own_ranks(command):
    # Started once per rank instead, `bash launch.sh` (torchrun inside) would start each rank twice.
    assert job_command.starts_own_ranks(command)


@pytest.fixture
def launched(monkeypatch):
    calls = []

    def run_job(command, nproc, env=None, timeout=None, launcher_args=None, run_dir=None):
        calls.append(("job", command, nproc, env, timeout, launcher_args))
        calls.run_dirs.append(run_dir)
        return calls.result

    def run_launcher(command, env=None, timeout=None, run_dir=None):
        calls.append(("launcher", command, env, timeout))
        calls.run_dirs.append(run_dir)
        return calls.result

    calls = type("Calls", (list,), {})()
    calls.run_dirs = []
    calls.result = JobResult(ranks=[RankResult(0, 0), RankResult(1, 0)], seconds=1.5)
    monkeypatch.setattr(launch, "run_job", run_job)
    monkeypatch.setattr(launch, "run_launcher", run_launcher)
    monkeypatch.setattr(cli, "unrunnable", lambda command: None)  # the job stood in for is never there
    monkeypatch.delenv("NCCL_MIGRATE_ACTIVATE", raising=False)
    return calls


def test_run_refuses_a_job_that_is_not_there_before_anything_starts(tmp_path, monkeypatch, capsys):
    started = []
    monkeypatch.setattr(launch, "run_job", lambda *a, **k: started.append(a))
    monkeypatch.setattr(launch, "run_launcher", lambda *a, **k: started.append(a))
    missing = str(tmp_path / "trian.py")
    assert cli.main(["run", "--run-dir", str(tmp_path / "run"), "--", missing]) == cli.EXIT_ERROR
    assert capsys.readouterr().err == (f"nccl-migrate run: the job's script {missing} does not exist; give its path, "
                                       "absolute or from the current directory\n")
    assert started == [] and not (tmp_path / "run").exists()


def test_run_starts_the_ranks_with_the_shim_and_the_package_on_their_path(launched, capsys, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    assert cli.main(["run", "--nproc", "3", "--timeout", "9", "--nnodes", "2", "--", "job.py", "-x"]) == cli.EXIT_OK
    kind, command, nproc, env, timeout, launcher_args = launched[0]
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(cli.__file__)))
    assert (kind, command, nproc, timeout, launcher_args) == ("job", ["job.py", "-x"], 3, 9.0, ["--nnodes", "2"])
    assert env["PYTHONPATH"] == package_root + os.pathsep + "/elsewhere" and env["NCCL_MIGRATE_ACTIVATE"] == "1"
    err = capsys.readouterr().err
    assert "nccl-migrate run: 3 ranks per node, by torch's launcher: job.py -x" in err
    assert "nccl-migrate run: all 2 ranks finished in 1.5 s" in err
    # The job's own files go to a new run directory, named at the end.
    [run_dir] = launched.run_dirs
    assert os.path.basename(run_dir).startswith("nccl-migrate-run-") and os.path.isdir(run_dir)
    assert env["NCCL_MIGRATE_REPORT"] == os.path.join(run_dir, "report_{rank}.json")
    assert f"nccl-migrate run: the job's files are in {run_dir}" in err


def test_run_without_the_shim_and_without_a_pythonpath(launched, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert cli.main(["run", "--no-activate", "job.py"]) == cli.EXIT_OK
    env = launched[0][3]
    assert "NCCL_MIGRATE_ACTIVATE" not in env
    assert env["PYTHONPATH"] == os.path.dirname(os.path.dirname(os.path.abspath(cli.__file__)))


def test_a_launcher_command_runs_as_it_is(launched, capsys):
    assert cli.main(["run", "--timeout", "5", "--", "torchrun", "--nproc-per-node", "2", "job.py"]) == cli.EXIT_OK
    assert launched[0][:2] == ("launcher", ["torchrun", "--nproc-per-node", "2", "job.py"]) and launched[0][3] == 5.0
    assert "nccl-migrate run: torchrun --nproc-per-node 2 job.py (it starts its own ranks)" in capsys.readouterr().err


def test_a_failed_job_says_why_and_exits_2(launched, capsys):
    launched.result = JobResult(ranks=[RankResult(1, 3)])
    assert cli.main(["run", "--", "job.py"]) == cli.EXIT_ERROR
    assert "nccl-migrate run: job failed: rank 1 exited with status 3" in capsys.readouterr().err


@pytest.mark.parametrize("argv, said", [
    (["run"], "nccl-migrate run: no command given; usage: nccl-migrate run [--nproc N] -- python job.py"),
    (["run", "--"], "no command given"),
    (["run", "--timeout", "-1", "--", "job.py"], "nccl-migrate run: --timeout -1.0: give a positive number of seconds"),
    (["run", "--max-restarts", "-2", "--", "job.py"], "nccl-migrate run: --max-restarts -2: give 0 or more"),
    (["run", "--nproc", "0", "--", "job.py"], "nccl-migrate run: --nproc 0: give at least 1 rank per node"),
])
def test_a_bad_run_is_refused_before_anything_starts(launched, capsys, argv, said):
    assert cli.main(argv) == cli.EXIT_ERROR
    assert said in capsys.readouterr().err and launched == []


def test_parse_errors_exit_2_and_help_exits_0(capsys):
    assert cli.main(["nonsense"]) == cli.EXIT_ERROR
    assert cli.main(["run", "--nproc", "many"]) == cli.EXIT_ERROR
    assert cli.main(["--help"]) == cli.EXIT_OK
    assert "torch-side commands of nccl-migrate" in capsys.readouterr().out


def test_run_defaults():
    args = cli.build_parser().parse_args(["run", "job.py"])
    assert launch_options.settle_launch_options(args) == []  # --nproc's default is not a given option
    assert (args.nproc, args.timeout, args.activate, args.command) == (2, 600.0, True, ["job.py"])


def test_doctor_exits_1_on_a_conflict_0_without_and_2_when_it_cannot_look(monkeypatch, capsys):
    from nccl_migrate import doctor

    report = {"conflicts": ["nccl2: no GPU"]}
    monkeypatch.setattr(doctor, "examine", lambda: report)
    monkeypatch.setattr(doctor, "render_text", lambda r: "TEXT")
    assert cli.main(["doctor"]) == cli.EXIT_FOUND and capsys.readouterr().out == "TEXT\n"
    report["conflicts"] = []
    assert cli.main(["doctor", "--format", "json"]) == cli.EXIT_OK
    assert capsys.readouterr().out == '{\n  "conflicts": []\n}\n'

    def broken():
        raise RuntimeError("no driver")

    monkeypatch.setattr(doctor, "examine", broken)
    assert cli.main(["doctor"]) == cli.EXIT_ERROR
    assert capsys.readouterr().err == "nccl-migrate doctor: could not examine this environment: no driver\n"


def test_fr_exits_1_when_an_op_was_not_completed_0_when_all_were_and_2_on_a_bad_dump(monkeypatch, capsys):
    from nccl_migrate import fr

    summaries = {"a": {"rank": 0, "not_completed": []}, "b": {"rank": 1, "not_completed": [{"seq": 3}]}}
    monkeypatch.setattr(fr, "summarize", lambda path: summaries[path])
    monkeypatch.setattr(fr, "render_text", lambda found: "TEXT " + ",".join(str(s["rank"]) for s in found))
    assert cli.main(["fr", "a"]) == cli.EXIT_OK and capsys.readouterr().out == "TEXT 0\n"
    assert cli.main(["fr", "a", "b"]) == cli.EXIT_FOUND and capsys.readouterr().out == "TEXT 0,1\n"
    assert cli.main(["fr", "b", "--format", "json"]) == cli.EXIT_FOUND
    assert capsys.readouterr().out == '[\n  {\n    "rank": 1,\n    "not_completed": [\n      {\n        "seq": 3\n      }\n    ]\n  }\n]\n'

    def not_a_dump(path):
        raise ValueError(f"{path}: not a flight-recorder dump")

    monkeypatch.setattr(fr, "summarize", not_a_dump)
    assert cli.main(["fr", "x"]) == cli.EXIT_ERROR
    assert capsys.readouterr().err == "nccl-migrate fr: x: not a flight-recorder dump\n"
    assert cli.main(["fr"]) == cli.EXIT_ERROR  # at least one dump


def test_a_command_is_required_and_the_run_without_a_subcommand_is_refused(capsys):
    assert cli.main([]) == cli.EXIT_ERROR
    assert cli.build_parser().parse_args(["doctor"]).subcommand == "doctor"
    assert cli.build_parser().parse_args(["run", "--node-rank", "2", "x"]).node_rank == 2


@pytest.mark.parametrize("command", [["env", "NCCL_DEBUG=INFO", "torchrun", "j.py"], ["OMP_NUM_THREADS=1", "srun", "j"],
                                     ["python", "-u", "-m", "torch.distributed.run", "j.py"],
                                     ["python3", "-m", "torch.distributed.launch", "j.py"], ["deepspeed", "j.py"],
                                     ["accelerate", "launch", "j.py"]])
def test_launchers_behind_an_environment_or_interpreter_options_start_their_own_ranks(command):
    assert job_command.starts_own_ranks(command)


def test_a_program_or_a_python_script_is_one_rank():
    assert not job_command.starts_own_ranks(["accelerate", "config"])
    assert not job_command.starts_own_ranks(["env", "X=1", "python", "job.py"])
    assert not job_command.starts_own_ranks(["python", "-u", "job.py"])


def test_a_missing_shell_script_is_refused_before_anything_starts(tmp_path):
    missing = str(tmp_path / "nolaunch.sh")
    assert job_command.unrunnable(["bash", missing]) == (f"the job's script {missing} does not exist; give its path, "
                                                         "absolute or from the current directory")
    assert job_command.unrunnable(["bash", "-c", "torchrun j.py"]) is None  # a program text, not a script


def test_run_refuses_launch_options_for_a_command_that_starts_its_own_ranks(tmp_path, launched, capsys):
    assert cli.main(["run", "--nproc", "4", "--run-dir", str(tmp_path / "r"), "--", "torchrun", "j.py"]) == cli.EXIT_ERROR
    assert capsys.readouterr().err.startswith("nccl-migrate run: --nproc apply to a .py job only: torchrun is a launch "
                                              "command, run once as given")
    assert launched == []


def test_run_refuses_a_run_directory_an_earlier_run_left_files_in(tmp_path, launched, capsys):
    run_dir = tmp_path / "run"
    (run_dir / "fr").mkdir(parents=True)
    (run_dir / "report_0.json").write_text("{}")
    assert cli.main(["run", "--run-dir", str(run_dir), "--", "job.py"]) == cli.EXIT_ERROR
    said = capsys.readouterr().err
    assert f"--run-dir {run_dir} holds an earlier run's files (report_0.json, fr)" in said and "give a new folder" in said
    assert launched == [] and (run_dir / "report_0.json").exists()  # nothing of the user's removed


def test_the_environment_a_command_is_started_with_is_read_past():
    assert job_command.starts_own_ranks(["env", "-i", "A=1", "B=2", "torchrun", "j.py"])
    assert job_command.starts_own_ranks(["A=1", "B=2", "srun", "j"])
    assert not job_command.starts_own_ranks(["env", "A=1", "B=2", "python", "j.py"])
    assert not job_command.starts_own_ranks(["/opt/a=b/train"])  # a path with '=' is a program
    assert not job_command.starts_own_ranks(["./a=b"]) and not job_command.starts_own_ranks(["-x=1"])
    assert not job_command.starts_own_ranks(["env"]) and not job_command.starts_own_ranks(["env", "A=1"])
    assert not job_command.starts_own_ranks(["python", "-m"])  # no module named


def test_the_launch_options_a_launch_command_refuses_are_named_whole():
    assert job_command.launcher_options_problem(["srun", "j"], ["--nnodes", "--rdzv-id"]) == (
        "--nnodes, --rdzv-id apply to a .py job only: srun is a launch command, run once as given, and starts the "
        "ranks itself; give them to it (torchrun --nproc-per-node ...), or give the .py job itself")
    assert job_command.launcher_options_problem(["j.py"], ["--nnodes"]) is None
    assert job_command.launcher_options_problem(["srun", "j"], []) is None


def test_what_an_interpreter_is_given_is_checked_past_the_environment(tmp_path):
    missing = str(tmp_path / "gone.py")
    assert job_command.unrunnable(["env", "A=1", missing]).startswith(f"the job's script {missing} does not exist")
    assert job_command.unrunnable(["python", "-m", "gone"]) is None  # a module: found when it runs
    assert job_command.unrunnable(["python", str(tmp_path / "data.txt")]) is None  # not a script of ours to check
    assert job_command.unrunnable([str(tmp_path / "tool")]) == (
        f"{tmp_path}/tool does not exist or is not a file; give the path of the job's program or launch command, "
        "absolute or from the current directory")
