"""The launcher's parts that need no job: torchrun's arguments, the job's environment for the
launch, the ranks found below a launcher at its deadline, stopped ones woken to end, and how a
side's failure is said."""

import os
import signal
import subprocess
import time

import pytest

from nccl_migrate import launch
from nccl_migrate.launch import JobResult, RankResult, RunningProcess


def test_a_job_is_ok_only_when_every_rank_exited_0_in_time():
    assert JobResult().ok and JobResult(ranks=[RankResult(0, 0), RankResult(1, 0)]).ok
    assert not JobResult(ranks=[RankResult(0, 0), RankResult(1, 1)]).ok
    assert not JobResult(ranks=[RankResult(0, None)]).ok
    assert not JobResult(timed_out=True).ok and not JobResult(error="rendezvous failed").ok


@pytest.mark.parametrize("result, said", [
    (JobResult(timed_out=True, timeout=90, seconds=91.6), "the job ran past its timeout (90 s) and was ended after 92 s"),
    (JobResult(timed_out=True, timeout=2.5, seconds=3), "the job ran past its timeout (2.5 s) and was ended after 3 s"),
    (JobResult(timed_out=True, seconds=3, error="x"), "the job ran past its timeout (its limit) and was ended after 3 s"),
    (JobResult(error="torchrun: bad --nnodes", ranks=[RankResult(0, 1)]), "torchrun: bad --nnodes"),
    (JobResult(ranks=[RankResult(2, -signal.SIGKILL), RankResult(0, 1)]), "rank 2 was killed by SIGKILL"),
    (JobResult(ranks=[RankResult(1, None), RankResult(3, 7), RankResult(0, -15)]), "rank 3 exited with status 7"),
    (JobResult(ranks=[RankResult(1, None), RankResult(0, 0)]), "a rank was ended after a peer failed"),
])
def test_a_failure_is_said_by_its_first_cause(result, said):
    assert result.describe_failure() == said


def test_torchrun_gets_a_local_rendezvous_unless_the_launcher_arguments_give_one(monkeypatch):
    monkeypatch.setattr(launch, "_prefix_arguments", lambda: ["--log-line-prefix-template", "[rank${rank}] "])
    args = launch.torchrun_arguments(["job.py", "--steps", "2"], 3)
    assert args[:2] == ["--nproc-per-node", "3"]
    assert args[2:7] == ["--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "--rdzv-id"]
    assert args[8:] == ["--max-restarts", "0", "--tee", "3", "--log-line-prefix-template", "[rank${rank}] ",
                        "job.py", "--steps", "2"]
    assert args[7] != launch.torchrun_arguments(["job.py"], 1)[7]  # a rendezvous id of its own each time
    for given in (["--rdzv-endpoint", "node0:29400", "--nnodes", "2"], ["--master-addr", "node0"]):
        args = launch.torchrun_arguments(["job.py"], 2, given)
        assert "localhost:0" not in args and "--rdzv-backend" not in args[:len(args) - len(given) - 1]
        assert args[-len(given) - 1:] == [*given, "job.py"]
    assert launch.torchrun_arguments(["job.py"], 1, None)[-1] == "job.py"


def test_the_log_line_prefix_is_asked_for_where_torchrun_has_the_option():
    from torch.distributed.run import get_args_parser

    has = "--log-line-prefix-template" in get_args_parser()._option_string_actions
    assert launch._prefix_arguments() == (["--log-line-prefix-template", launch.PREFIX_TEMPLATE] if has else [])


def test_a_program_that_is_not_a_python_script_runs_with_no_python():
    assert launch._python_script(["train.py", "-x"]) == ["train.py", "-x"]
    assert launch._python_script(["./train", "-x"]) == ["--no-python", "./train", "-x"]


def test_the_jobs_environment_is_the_processs_for_the_launch_only(monkeypatch):
    monkeypatch.setenv("OUTSIDE", "1")
    before = dict(os.environ)
    with launch._environment({"ONLY": "this"}):
        assert dict(os.environ) == {"ONLY": "this"}
    assert dict(os.environ) == before
    with pytest.raises(RuntimeError):
        with launch._environment({"ONLY": "this"}):
            raise RuntimeError
    assert dict(os.environ) == before
    with launch._environment(None):
        assert dict(os.environ) == before


def test_the_ranks_below_a_launcher_are_the_topmost_processes_with_a_rank(monkeypatch):
    # pid -> (parent, state, start ticks): launcher 10 runs an agent 11, which runs ranks 12 and 13;
    # 14 is rank 12's data loader (it inherited RANK), 15 a helper of the agent without RANK, 16 its
    # stopped child, and 20 a process elsewhere.
    table = {10: (1, "S", 100), 11: (10, "S", 101), 12: (11, "S", 102), 13: (11, "T", 103), 14: (12, "S", 104),
             15: (11, "S", 105), 16: (15, "t", 106), 20: (1, "S", 107)}
    variables = {12: 1, 13: 0, 14: 1, 20: 5}
    monkeypatch.setattr(launch, "_processes", lambda: table)
    monkeypatch.setattr(launch, "_rank_variable", variables.get)
    ranks, stopped = launch.ranks_running_under(10)
    assert ranks == [RunningProcess(13, 0, True, 103), RunningProcess(12, 1, False, 102)]
    assert sorted(stopped) == [13, 16]
    assert launch.ranks_running_under(12) == ([RunningProcess(14, 1, False, 104)], [])
    assert launch.ranks_running_under(99) == ([], [])


def test_ranks_of_one_rank_number_are_ordered_by_pid(monkeypatch):
    table = {10: (1, "S", 1), 31: (10, "S", 2), 30: (10, "S", 3)}
    monkeypatch.setattr(launch, "_processes", lambda: table)
    monkeypatch.setattr(launch, "_rank_variable", lambda pid: 0)
    assert [p.pid for p in launch.ranks_running_under(10)[0]] == [30, 31]


def _wait_until_it_runs(proc, program: bytes, within: float = 10.0) -> None:
    """Until ``proc`` has exec'd ``program``: before that, /proc/PID/environ is still the
    environment of the process it was forked from (seen on a loaded machine: RANK not there yet)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[0].endswith(program):
                    return
        except OSError:
            pass
        time.sleep(0.01)
    raise AssertionError(f"{program!r} did not start within {within} s")


def test_the_rank_variable_is_read_from_the_process_environment():
    child = subprocess.Popen(["sleep", "30"], env={"PATH": os.environ["PATH"], "RANK": "7"})
    other = subprocess.Popen(["sleep", "30"], env={"PATH": os.environ["PATH"], "RANK": "x", "NOT_RANK": "3"})
    try:
        for proc in (child, other):
            _wait_until_it_runs(proc, b"sleep")
        assert launch._rank_variable(child.pid) == 7
        assert launch._rank_variable(other.pid) is None
        assert launch._rank_variable(2 ** 22 + 12345) is None  # no such process
        found = launch._processes()
        assert found[child.pid] == launch._stat(child.pid) and found[child.pid][0] == os.getpid()
    finally:
        child.kill(), other.kill()
        child.wait(), other.wait()


def test_a_stopped_process_is_ended_by_sigterm_once_woken():
    child = subprocess.Popen(["sleep", "30"])
    try:
        os.kill(child.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while launch._stat(child.pid)[1] not in "Tt" and time.monotonic() < deadline:
            time.sleep(0.01)
        launch.end_stopped([child.pid, 2 ** 22 + 12345])  # a pid that is gone is no error
        assert child.wait(timeout=10) == -signal.SIGTERM
    finally:
        child.kill()


def test_a_launchers_output_is_passed_on_line_by_line():
    import io

    class Sink(io.StringIO):
        flushes = 0

        def flush(self):
            Sink.flushes += 1

    sink = Sink()
    launch._pump(io.BytesIO(b"one\n\xfftwo\nlast"), sink)
    assert sink.getvalue() == "one\n\ufffdtwo\nlast" and Sink.flushes == 3


def test_a_launch_command_is_run_and_its_exit_status_kept(capfd):
    result = launch.run_launcher(["sh", "-c", "echo from the launcher; exit 3"], timeout=60)
    assert [(r.rank, r.returncode) for r in result.ranks] == [(0, 3)]
    assert result.error == "sh exited with status 3" and not result.timed_out and result.timeout == 60
    assert "from the launcher" in capfd.readouterr().out and 0 < result.seconds < 30
    ok = launch.run_launcher(["true"], env=dict(os.environ), timeout=None)
    assert ok.ok and ok.error is None and [(r.rank, r.returncode) for r in ok.ranks] == [(0, 0)]
    missing = launch.run_launcher(["/nonexistent/launcher"])
    assert missing.error.startswith("cannot start /nonexistent/launcher: ") and missing.ranks == []


def test_a_launch_command_past_its_timeout_is_ended_as_a_whole(monkeypatch):
    started = time.monotonic()
    result = launch.run_launcher(["sh", "-c", "sleep 30 & wait"], timeout=0.2)
    assert result.timed_out and result.timeout == 0.2 and result.ranks == [] and result.error is None
    assert time.monotonic() - started < 20 and result.seconds >= 0.2


def test_a_deadline_notes_the_running_ranks_ends_the_stopped_and_signals_this_process(monkeypatch):
    running = [RunningProcess(5, 0, True, 1)]
    monkeypatch.setattr(launch, "ranks_running_under", lambda pid: (running, [5]) if pid == os.getpid() else ([], []))
    ended, signalled = [], []
    monkeypatch.setattr(launch, "end_stopped", ended.append)
    monkeypatch.setattr(launch.os, "kill", lambda pid, signum: signalled.append((pid, signum)))
    deadline = launch._Deadline(0.01)
    deadline.timer.join(10)
    assert deadline.fired and deadline.running == running and ended == [[5]]
    assert signalled == [(os.getpid(), signal.SIGTERM)]
    disarmed = launch._Deadline(0.2)
    disarmed.disarm()
    time.sleep(0.3)
    assert not disarmed.fired and signalled == [(os.getpid(), signal.SIGTERM)]


def test_a_deadline_without_proc_still_signals(monkeypatch):
    def no_proc(pid):
        raise OSError("no /proc")

    monkeypatch.setattr(launch, "ranks_running_under", no_proc)
    signalled = []
    monkeypatch.setattr(launch.os, "kill", lambda pid, signum: signalled.append(signum))
    deadline = launch._Deadline(0.01)
    deadline.timer.join(10)
    assert deadline.fired and deadline.running == [] and signalled == [signal.SIGTERM]


def test_signals_stop_the_launch_with_torchs_exception_and_the_old_handlers_come_back():
    from torch.distributed.elastic.multiprocessing.api import SignalException

    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    for signum in (signal.SIGTERM, signal.SIGINT):
        with pytest.raises(SignalException) as stopped:
            with launch._stopped_by_signals():
                os.kill(os.getpid(), signum)
                time.sleep(5)
        assert stopped.value.sigval == signum and str(os.getpid()) in str(stopped.value)
    assert {s: signal.getsignal(s) for s in before} == before


def test_signal_handlers_are_left_alone_off_the_main_thread():
    import threading

    seen = []

    def launch_here():
        with launch._stopped_by_signals():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=launch_here)
    thread.start()
    thread.join(10)
    assert seen == [signal.getsignal(signal.SIGTERM)]


class _Launcher:
    """torch's elastic_launch(config, entrypoint)(*args) stood in for: records what it was given and
    does what `then` says (return, or raise what torch's launcher raises: ChildFailedError for failed
    ranks, SignalException when this process is signalled)."""

    def __init__(self, then=None):
        self.then, self.calls = then, []

    def __call__(self, config, entrypoint):
        def launch_now(*args):
            self.calls.append((config.nproc_per_node, config.max_restarts, entrypoint, list(args), dict(os.environ)))
            if self.then is not None:
                self.then()
        return launch_now


@pytest.fixture
def launcher(monkeypatch):
    import torch.distributed.launcher.api as api

    def install(then=None):
        stand_in = _Launcher(then)
        monkeypatch.setattr(api, "elastic_launch", stand_in)
        return stand_in
    return install


def test_a_job_runs_its_ranks_through_torchs_launcher_in_its_environment(launcher):
    stand_in = launcher()
    result = launch.run_job(["job.py", "-x"], 3, env={"JOB": "1", "PATH": os.environ["PATH"]}, timeout=60)
    (nproc, restarts, entrypoint, args, env), = stand_in.calls
    assert (nproc, restarts, args) == (3, 0, ["-u", "job.py", "-x"]) and entrypoint.endswith("python")
    assert env["JOB"] == "1" and "JOB" not in os.environ  # the job's environment, for the launch only
    assert [(r.rank, r.returncode) for r in result.ranks] == [(0, 0), (1, 0), (2, 0)]
    assert result.ok and result.timeout == 60 and not result.timed_out and 0 <= result.seconds < 30
    binary = launcher()
    launch.run_job(["./train"], 1, timeout=None)
    assert binary.calls[0][2] == "./train"  # a program, run with --no-python


def test_failed_ranks_are_named_the_cause_first(launcher):
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    def fail():
        failures = {0: ProcessFailure(0, 10, -signal.SIGTERM, "/nonexistent"),
                    1: ProcessFailure(1, 11, -signal.SIGKILL, "/nonexistent")}
        raise ChildFailedError("job.py", failures)

    launcher(fail)
    result = launch.run_job(["job.py"], 2, timeout=None)
    assert [(r.rank, r.returncode) for r in result.ranks] == [(1, -signal.SIGKILL), (0, None)]
    assert result.describe_failure() == "rank 1 was killed by SIGKILL" and result.timeout is None


def test_a_launcher_stopped_by_a_signal_or_failing_says_so(launcher):
    from torch.distributed.elastic.multiprocessing.api import SignalException

    def stopped():
        raise SignalException("stopped", sigval=signal.SIGINT)

    launcher(stopped)
    assert launch.run_job(["job.py"], 1, timeout=60).error == "the launcher was stopped by SIGINT"

    def broken():
        raise RuntimeError("rendezvous closed")

    launcher(broken)
    assert launch.run_job(["job.py"], 1).error == "torch's launcher failed: RuntimeError: rendezvous closed"


def test_a_job_past_its_timeout_is_ended_and_its_running_ranks_noted(launcher, monkeypatch):
    running = [RunningProcess(7, 0, False, 1)]
    monkeypatch.setattr(launch, "ranks_running_under", lambda pid: (running, []))
    launcher(lambda: time.sleep(30))  # until the deadline's SIGTERM stops it
    started = time.monotonic()
    result = launch.run_job(["job.py"], 1, timeout=0.3)
    assert time.monotonic() - started < 10
    assert result.timed_out and result.running_at_deadline == running and result.error is None
    assert result.timeout == 0.3 and result.seconds >= 0.3


@pytest.mark.parametrize("launcher_args, said", [
    (["--nnodes", "x:y:z"], "torchrun rejected the launch arguments ['--nnodes', 'x:y:z']: "),
    (["--bogus-option"], "torchrun rejected the launch arguments ['--bogus-option']: "),
])
def test_launch_arguments_torchrun_refuses_are_named(launcher, launcher_args, said):
    stand_in = launcher()
    result = launch.run_job(["job.py"], 1, launcher_args=launcher_args)
    assert result.error.startswith(said) and stand_in.calls == []
    assert len(result.error) > len(said)  # with torchrun's own words


def test_torchruns_own_words_end_the_message(launcher):
    launcher()
    assert launch.run_job(["job.py"], 1, launcher_args=["--bogus-option"]).error.endswith(
        ": error: unrecognized arguments: --bogus-option")


def test_a_job_without_a_limit_given_is_ended_after_ten_minutes():
    import inspect

    for function in (launch.run_job, launch.run_launcher):
        assert inspect.signature(function).parameters["timeout"].default == 600.0


def test_a_launch_command_gets_the_jobs_environment_and_its_output_and_errors_go_to_ours(capsys):
    result = launch.run_launcher(["sh", "-c", "echo out $MARK; echo err >&2"],
                                 env={"MARK": "given", "PATH": os.environ["PATH"]}, timeout=60)
    assert result.ok
    assert capsys.readouterr().out.splitlines() == ["out given", "err"]


def test_a_launch_command_past_its_timeout_is_ended_with_its_whole_session(tmp_path, monkeypatch):
    asked = []
    real = launch.ranks_running_under
    monkeypatch.setattr(launch, "ranks_running_under", lambda pid: asked.append(pid) or real(pid))
    pid_file = tmp_path / "pid"
    result = launch.run_launcher(["sh", "-c", f"sleep 30 & echo $! > {pid_file}; wait"], timeout=0.5)
    assert result.timed_out and len(asked) == 1 and asked[0] != os.getpid()
    sleeper = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while launch._stat(sleeper) not in (None,) and launch._stat(sleeper)[1] != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert launch._stat(sleeper) is None or launch._stat(sleeper)[1] == "Z"  # the launcher's child ended too


def test_without_proc_a_launch_past_its_timeout_is_still_ended(monkeypatch):
    def no_proc(pid):
        raise OSError("no /proc")

    monkeypatch.setattr(launch, "ranks_running_under", no_proc)
    result = launch.run_launcher(["sleep", "30"], timeout=0.3)
    assert result.timed_out and result.running_at_deadline == []


class _Launcher_process:
    """A launcher process (a session leader) whose first wait runs past its grace."""

    def __init__(self):
        self.proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
        self.pid, self.waits = self.proc.pid, []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        if len(self.waits) == 1:
            raise subprocess.TimeoutExpired("sleep", timeout)
        return self.proc.wait()


def test_the_launcher_gets_a_grace_longer_than_torchruns_then_sigkill(monkeypatch):
    launcher = _Launcher_process()
    gone = RunningProcess(2 ** 22 + 12345, 0, False, None)  # a rank that ended meanwhile
    monkeypatch.setattr(launch, "_still_the_same", lambda rank: True)
    launch._end(launcher, [gone])
    assert launcher.waits == [launch.AGENT_GRACE_SECONDS + 10, None]
    assert launcher.proc.returncode in (-signal.SIGTERM, -signal.SIGKILL)


def test_a_rank_that_may_not_be_signalled_is_left_alone(monkeypatch):
    def refused(pid, signum):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(launch.os, "kill", refused)
    launch.end_stopped([12345])  # no error
    launcher = _Launcher_process()
    monkeypatch.setattr(launch, "_still_the_same", lambda rank: True)
    try:
        launch._end(launcher, [RunningProcess(12345, 0, False, None)])  # the rank's SIGKILL refused: no error
    finally:
        launcher.proc.kill()
        launcher.proc.wait()


def test_a_deadline_not_reached_notes_no_ranks_and_never_keeps_the_process_alive():
    deadline = launch._Deadline(30)
    try:
        assert deadline.running == [] and deadline.timer.daemon and not deadline.fired
    finally:
        deadline.disarm()


def test_a_process_state_and_parent_are_read_whatever_its_name(tmp_path):
    import shutil

    odd = tmp_path / "a) (b"
    shutil.copy("/bin/sleep", odd)
    child = subprocess.Popen([str(odd), "30"])
    try:
        deadline = time.monotonic() + 10
        while launch._stat(child.pid)[1] != "S" and time.monotonic() < deadline:
            time.sleep(0.01)
        parent, state, started = launch._stat(child.pid)
        assert (parent, state) == (os.getpid(), "S") and started > 0
    finally:
        child.kill()
        child.wait()


def test_a_dead_process_is_not_taken_for_a_stopped_one(monkeypatch):
    monkeypatch.setattr(launch, "_processes", lambda: {10: (1, "S", 1), 11: (10, "X", 2), 12: (10, "t", 3)})
    monkeypatch.setattr(launch, "_rank_variable", lambda pid: None)
    assert launch.ranks_running_under(10) == ([], [12])


def test_a_rank_variable_that_is_not_text_is_no_rank():
    child = subprocess.Popen(["sleep", "30"], env={b"PATH": os.environb[b"PATH"], b"RANK": b"\xff1"})
    try:
        assert launch._rank_variable(child.pid) is None
    finally:
        child.kill()
        child.wait()
