"""Running and recording one side (runner.py) in this process, torch's launcher stood in for: the
environment a side's job gets, which launcher a command goes through, where its output and
records go, and the side file an offline compare reads back (one per launching process). Jobs
really launched are in test_ab_cli.py and test_ab_faults.py."""

import json
import os
import socket
import sys

import pytest
from nccl_migrate import job_command
from nccl_migrate.ab import runner
from nccl_migrate.ab.sides import RecordError
from nccl_migrate.ab.spec import Side, SpecError
from nccl_migrate.launch import JobResult, RankResult, RunningProcess

SIDE = Side("b", "rewritten", {"NCCL_MIGRATE_IMPL": "toolkit", "TORCH_DIST_USE_NCCL2": None})


# --- the job's environment --------------------------------------------------------------------------

def test_a_sides_job_inherits_this_environment_with_the_recorder_on_and_the_sides_variables(monkeypatch):
    monkeypatch.setenv("NCCL_MIGRATE_AB_SHADOW", "outer")
    monkeypatch.setenv("TORCH_DIST_USE_NCCL2", "1")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setenv("KEPT_AS_IS", "yes")
    env = runner.job_environment(SIDE, "/rec", 4096)
    assert "NCCL_MIGRATE_AB_SHADOW" not in env and "TORCH_DIST_USE_NCCL2" not in env
    assert env["KEPT_AS_IS"] == "yes" and env["NCCL_MIGRATE_IMPL"] == "toolkit"
    assert env["PYTHONPATH"] == os.pathsep.join([runner.PACKAGE_ROOT, "/elsewhere"])
    assert env["NCCL_MIGRATE_AB_RECORD"] == "/rec" and env["NCCL_MIGRATE_AB_KEEP"] == "4096"
    assert env["NCCL_MIGRATE_REPORT"] == "/rec/report_{rank}.json"
    assert os.path.isdir(os.path.join(runner.PACKAGE_ROOT, "nccl_migrate"))
    monkeypatch.delenv("PYTHONPATH")
    assert runner.job_environment(SIDE, "/rec", 0)["PYTHONPATH"] == runner.PACKAGE_ROOT
    assert "NCCL_MIGRATE_AB_KEEP" not in runner.job_environment(SIDE, "/rec", 0)


def test_a_job_started_elsewhere_gets_only_what_the_side_sets(monkeypatch):
    monkeypatch.setenv("KEPT_AS_IS", "yes")
    assert runner.job_environment(SIDE, "/rec", 0, inherit=False) == {
        "NCCL_MIGRATE_AB_RECORD": "/rec", "NCCL_MIGRATE_REPORT": "/rec/report_{rank}.json",
        "TORCH_FR_DUMP_TEMP_FILE": "/rec/fr/comm_lib_trace_rank_", "NCCL_MIGRATE_IMPL": "toolkit",
        "TORCH_DIST_USE_NCCL2": None}


def test_a_side_keeps_its_own_report_whatever_report_the_user_named(monkeypatch):
    monkeypatch.setenv("NCCL_MIGRATE_REPORT", "/home/me/report.json")
    assert runner.job_environment(SIDE, "/rec", 0)["NCCL_MIGRATE_REPORT"] == "/rec/report_{rank}.json"


def test_each_launching_process_has_its_own_log():
    assert runner.job_log("/d") == f"/d/job.{socket.gethostname()}.{os.getpid()}.log"


# --- launching ----------------------------------------------------------------------------------------

@pytest.fixture
def launcher(monkeypatch):
    """torch's launcher and a launch command's run, stood in for: what each was given."""
    calls = []

    def run_job(command, nproc, env=None, timeout=None, launcher_args=None):
        print("rank output")  # torch's launcher tees the ranks' output to sys.stdout and sys.stderr
        sys.stderr.write("rank errors\n")
        calls.append({"via": "run_job", "command": command, "nproc": nproc, "env": env, "timeout": timeout,
                      "launcher_args": launcher_args, "stdout": sys.stdout})
        return calls.result

    def run_launcher(command, env=None, timeout=None):
        print("launcher says")
        sys.stderr.write("launcher output\n")
        calls.append({"via": "run_launcher", "command": command, "env": env, "timeout": timeout})
        return calls.result

    calls = type("Calls", (list,), {})()
    calls.result = JobResult(seconds=2.5, timeout=9.0)
    monkeypatch.setattr(runner, "run_job", run_job)
    monkeypatch.setattr(runner, "run_launcher", run_launcher)
    return calls


def _side_file(directory) -> dict:
    [name] = [n for n in os.listdir(directory) if n.startswith("side.")]
    assert name == f"side.{socket.gethostname()}.{os.getpid()}.json"
    with open(os.path.join(directory, name)) as f:
        return json.load(f)


def test_a_side_runs_its_script_through_torchs_launcher_into_its_own_folder(tmp_path, launcher):
    side_dir = tmp_path / "b"
    side_dir.mkdir()
    (side_dir / "rank0.jsonl").write_text("{}\n")  # an earlier run's records
    run = runner.run_side(SIDE, ["job.py"], 3, 60.0, str(tmp_path), 8)
    [call] = launcher
    assert call["env"]["NCCL_MIGRATE_AB_KEEP"] == "8"
    assert (call["via"], call["command"], call["nproc"], call["timeout"], call["launcher_args"]) == \
        ("run_job", ["job.py"], 3, 60.0, None)
    assert call["env"]["NCCL_MIGRATE_AB_RECORD"] == str(side_dir)
    assert not (side_dir / "rank0.jsonl").exists()
    assert run.directory == str(side_dir) and run.log == str(side_dir / "job.log") and run.failure is None
    assert (side_dir / "job.log").read_text() == "rank output\nrank errors\n" and call["stdout"] is not sys.stdout
    assert (run.seconds, run.ranks, run.timed_out, run.timeout, run.running_at_deadline) == (2.5, [], False, 9.0, [])
    with open(os.path.join(side_dir, f"side.{socket.gethostname()}.{os.getpid()}.json")) as f:
        assert f.read().splitlines()[:2] == ["{", ' "label": "b",']  # readable as written
    assert _side_file(side_dir) == {"label": "b", "spec": "rewritten", "env": SIDE.env, "log": run.log,
                                    "failure": None, "seconds": 2.5, "ranks": [], "timed_out": False,
                                    "timeout": 9.0, "running_at_deadline": []}


def test_a_launch_command_runs_once_as_given(tmp_path, launcher):
    run = runner.run_side(SIDE, ["torchrun", "--nproc-per-node", "2", "job.py"], 3, 60.0, str(tmp_path), 0)
    [call] = launcher
    assert (call["via"], call["command"], call["timeout"]) == \
        ("run_launcher", ["torchrun", "--nproc-per-node", "2", "job.py"], 60.0)
    assert call["env"]["NCCL_MIGRATE_AB_RECORD"] == str(tmp_path / "b")
    assert (tmp_path / "b" / "job.log").read_text() == "launcher says\nlauncher output\n" and run.failure is None


def test_a_failed_sides_ranks_are_kept_only_where_the_launcher_saw_them(tmp_path, launcher):
    launcher.result = JobResult(ranks=[RankResult(1, -9), RankResult(0, 0), RankResult(2, None)], seconds=1.0,
                                timeout=5.0, running_at_deadline=[RunningProcess(pid=7, rank=2, stopped=True)])
    run = runner.run_side(SIDE, ["job.py"], 3, 5.0, str(tmp_path), 0)
    assert run.failure == (f"side b (rewritten): rank 1 was killed by SIGKILL; its output: {tmp_path}/b/job.log")
    assert run.ranks == [{"rank": 1, "returncode": -9}, {"rank": 2, "returncode": None}]
    assert run.running_at_deadline == [{"pid": 7, "rank": 2, "stopped": True, "start_ticks": None}]
    run = runner.run_side(SIDE, ["torchrun", "job.py"], 3, 5.0, str(tmp_path), 0)
    assert run.ranks == [] and run.failure.startswith("side b (rewritten): rank 1 was killed by SIGKILL")
    launcher.result = JobResult(timed_out=True, seconds=5.2, timeout=5.0)
    run = runner.run_side(SIDE, ["job.py"], 3, 5.0, str(tmp_path), 0)
    assert run.timed_out and run.timeout == 5.0
    assert _side_file(tmp_path / "b")["timed_out"] is True


def test_ab_record_leaves_earlier_records_and_passes_the_launchers_options(tmp_path, launcher):
    directory = tmp_path / "side"
    directory.mkdir()
    (directory / "rank0.jsonl").write_text("{}\n")  # another node's
    run = runner.record_side(SIDE, ["job.py"], 2, 45.0, str(directory), 64, ["--nnodes", "2"])
    [call] = launcher
    assert (call["via"], call["command"], call["nproc"], call["timeout"], call["launcher_args"]) == \
        ("run_job", ["job.py"], 2, 45.0, ["--nnodes", "2"])
    assert call["env"]["NCCL_MIGRATE_AB_KEEP"] == "64" and (directory / "rank0.jsonl").exists()
    assert run.log == runner.job_log(str(directory))
    run = runner.record_side(SIDE, ["srun", "python", "job.py"], 2, 30.0, str(tmp_path / "new"), 0, None,
                             str(tmp_path / "my.log"))
    assert (launcher[1]["via"], launcher[1]["command"], launcher[1]["timeout"]) == \
        ("run_launcher", ["srun", "python", "job.py"], 30.0)
    assert launcher[1]["env"]["NCCL_MIGRATE_AB_RECORD"] == str(tmp_path / "new")
    assert run.log == str(tmp_path / "my.log") and (tmp_path / "my.log").read_text() == "launcher says\nlauncher output\n"


def test_a_shadow_run_records_the_primary_with_the_shadows_backend_passed_in(tmp_path, launcher):
    primary = Side("a", "legacy", {"NCCL_MIGRATE_IMPL": "toolkit"})
    shadow = Side("b", "backend=migrate-nccl2", {"NCCL_MIGRATE_AB_BACKEND": "migrate-nccl2",
                                                  "NCCL_MIGRATE_AB_PERTURB": "rank=0,group=0,seq=1"})
    run = runner.run_shadowed(primary, shadow, ["job.py"], 2, 60.0, str(tmp_path), 16)
    [call] = launcher
    env = call["env"]
    assert (call["nproc"], call["timeout"], env["NCCL_MIGRATE_AB_KEEP"]) == (2, 60.0, "16")
    assert env["NCCL_MIGRATE_ACTIVATE"] == "1" and env["NCCL_MIGRATE_AB_RECORD"] == str(tmp_path / "shadow")
    assert json.loads(env["NCCL_MIGRATE_AB_SHADOW"]) == {"NCCL_MIGRATE_AB_BACKEND": "migrate-nccl2"}
    assert env["NCCL_MIGRATE_AB_SHADOW_PERTURB"] == "rank=0,group=0,seq=1"
    assert run.side is primary and run.directory == str(tmp_path / "shadow")
    runner.run_shadowed(primary, Side("b", "backend=x", {"NCCL_MIGRATE_AB_BACKEND": "x"}), ["job.py"], 2, 60.0,
                        str(tmp_path), 0)
    assert "NCCL_MIGRATE_AB_SHADOW_PERTURB" not in launcher[1]["env"]
    with pytest.raises(SpecError):
        runner.run_shadowed(primary, Side("b", "X=1", {"X": "1"}), ["job.py"], 2, 60.0, str(tmp_path), 0)
    assert len(launcher) == 2


# --- a side recorded before --------------------------------------------------------------------------

def _save(directory, name, **facts):
    document = {"label": "b", "spec": "rewritten", "env": {"K": "1"}, "log": "/l", "failure": None, "seconds": 1.0}
    document.update(facts)
    with open(os.path.join(directory, name), "w") as f:
        json.dump(document, f)


def test_a_side_recorded_on_many_nodes_is_read_as_one(tmp_path):
    _save(tmp_path, "side.n1.1.json", seconds=3.0, failure="node 1 failed", ranks=[{"rank": 0, "returncode": 1}],
          timeout=30.0, running_at_deadline=[{"pid": 5}])
    _save(tmp_path, "side.n2.2.json", seconds=4.5, failure="node 2 failed", ranks=[{"rank": 3, "returncode": None}],
          timed_out=True, timeout=None, running_at_deadline=[{"pid": 6}])
    _save(tmp_path, "side.n3.3.json", failure=None)  # written before these facts: lacks them
    run = runner.SideRun.recorded(str(tmp_path), "a")
    assert (run.side.label, run.side.text, run.side.env, run.log) == ("a", "rewritten", {"K": "1"}, "/l")
    assert run.directory == str(tmp_path)
    assert run.failure == "node 1 failed; node 2 failed" and run.seconds == 4.5
    assert run.ranks == [{"rank": 0, "returncode": 1}, {"rank": 3, "returncode": None}]
    assert run.timed_out is True and run.timeout == 30.0 and run.running_at_deadline == [{"pid": 5}, {"pid": 6}]


def test_records_alone_make_a_side_whose_outcome_is_unknown(tmp_path):
    run = runner.SideRun.recorded(str(tmp_path), "b")
    assert (run.side.label, run.side.text, run.side.env) == ("b", f"records in {tmp_path}", {})
    assert run.directory == str(tmp_path)
    assert (run.log, run.failure, run.seconds, run.ranks, run.timed_out, run.timeout) == \
        (None, None, 0.0, [], False, None)
    _save(tmp_path, "side.n1.1.json")
    run = runner.SideRun.recorded(str(tmp_path), "b")
    assert run.failure is None and run.timed_out is False and run.timeout is None


@pytest.mark.parametrize("content", ["{", "[]", '{"spec": "x", "env": {}, "failure": null}'])
def test_a_damaged_side_file_is_named_with_how_to_go_on(tmp_path, content):
    (tmp_path / "side.n1.1.json").write_text(content)
    with pytest.raises(RecordError, match=rf"^{tmp_path}/side.n1.1.json: not a side description \(.+\); remove it "
                                          r"to compare the records alone$"):
        runner.SideRun.recorded(str(tmp_path), "b")


# --- a job that cannot run ------------------------------------------------------------------------------

def test_a_job_that_is_there_and_runnable_passes(tmp_path, monkeypatch):
    job = tmp_path / "job.py"
    job.write_text("")
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    for command in (["job.py", "--steps", "2"], [str(job)], [str(script)], ["sh", "-c", "true"],
                    [sys.executable, "-u", "job.py"], [sys.executable, "-m", "torch.distributed.run", "missing.py"],
                    ["true", "/only/where/it/runs.py"]):  # a launch command's own arguments are its business
        assert job_command.unrunnable(command) is None, command


def test_a_job_that_is_not_there_or_not_runnable_is_named_with_how_to_fix_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder.py").mkdir()
    unreadable = tmp_path / "secret.py"
    unreadable.write_text("")
    unreadable.chmod(0)
    plain = tmp_path / "run.sh"
    plain.write_text("#!/bin/sh\n")
    plain.chmod(0o644)
    cases = [
        (["missing.py"], (f"the job's script missing.py does not exist (looked for {tmp_path}/missing.py); give "
                          "its path, absolute or from the current directory")),
        ([str(tmp_path / "gone.py")], f"the job's script {tmp_path}/gone.py does not exist; give its path"),
        (["folder.py"], "the job's script folder.py is not a file; give the script the job runs"),
        (["no-such-program-here", "x"], ("no-such-program-here: no such program on PATH; give the job's .py script, "
                                         "or the path of a program or launch command")),
        (["./run.sh"], ("./run.sh is not executable; make it so (chmod +x ./run.sh), or give it to its interpreter "
                        "(bash ./run.sh)")),
        (["./nothing.sh"], f"./nothing.sh does not exist or is not a file (looked for {tmp_path}/nothing.sh)"),
        ([sys.executable, "-u", "missing.py", "--x"], "the job's script missing.py does not exist"),
    ]
    if os.geteuid() != 0:  # root reads any file
        cases.append((["secret.py"], "the job's script secret.py cannot be read by this user; make it readable"))
    for command, message in cases:
        problem = job_command.unrunnable(command)
        assert problem is not None and problem.startswith(message), (command, problem)
