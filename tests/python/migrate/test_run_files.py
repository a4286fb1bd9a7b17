"""`nccl-migrate run` keeps every file a job writes for itself in the run directory: the toolkit's
reports (unless the user named a report file), the flight recorder's dumps (fr/, never torch's
default ~/.cache/torch/; a dump location the user set is replaced, with a note) and torch's
launcher's logs (logs/, not a torchelastic_* folder in TMPDIR); `nccl-migrate fr` finds the dumps
from the run directory, leaving partial ones aside."""

import json
import os
import subprocess
import sys

import pytest

from torch_support import requires_torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CLI = os.environ.get("NCCL_MIGRATE_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))
DUMPING_JOB = os.path.join(ROOT, "tests", "python", "ab", "dumping_job.py")


def _cli(*args, env=None, timeout=240):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout, check=False,
                          env=dict(os.environ, **(env or {})))


def _files(directory):
    return sorted(os.path.relpath(os.path.join(root, name), directory)
                  for root, _, names in os.walk(directory) for name in names)


@requires_torch("backend_plugins")
def test_a_runs_dumps_and_reports_stay_in_its_run_directory_and_fr_finds_them(tmp_path):
    home, run = tmp_path / "home", tmp_path / "run"
    user_prefix = tmp_path / "mine" / "fr_"
    done = _cli("run", "--nproc", "2", "--run-dir", str(run), "--", DUMPING_JOB,
                env={"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
                     "TORCH_FR_DUMP_TEMP_FILE": str(user_prefix)})
    assert done.returncode == 0, done.stdout + done.stderr
    files = _files(run)
    assert [f for f in files if not f.startswith("logs/")] == ["fr/comm_lib_trace_rank_0", "fr/comm_lib_trace_rank_1",
                                                               "report_0.json", "report_1.json"]
    assert sorted(f.split("/", 2)[-1] for f in files if f.startswith("logs/")) == [  # torch's agent's, not in TMPDIR
        "attempt_0/0/stderr.log", "attempt_0/0/stdout.log", "attempt_0/1/stderr.log", "attempt_0/1/stdout.log"]
    assert _files(home) == [], "the job wrote into HOME (torch's default dump location)"
    assert not (tmp_path / "mine").exists(), "the user's dump prefix was used"
    assert (f"nccl-migrate run: TORCH_FR_DUMP_TEMP_FILE={user_prefix} replaced: the job's flight-recorder dumps go to "
            f"the run directory {run} (fr/comm_lib_trace_rank_<rank>; one fr/ per side of an A/B run), so no run or "
            "side overwrites another's") in done.stderr
    assert f"nccl-migrate run: the job's files are in {run}" in done.stderr
    assert "TORCH_NCCL_DEBUG_INFO_TEMP_FILE is deprecated" not in done.stdout + done.stderr

    # A dump left half-written by a process that died is not one of the run's dumps.
    (run / "fr" / ".nccl-migrate-dump-host-4242-0.partial").write_bytes(b"\x80\x02}")
    found = _cli("fr", "--format", "json", str(run))
    assert found.returncode in (0, 1), found.stderr
    assert [s["path"] for s in json.loads(found.stdout)] == [str(run / "fr" / f"comm_lib_trace_rank_{r}")
                                                            for r in (0, 1)]
    assert all(s["entries"] > 0 for s in json.loads(found.stdout))


@requires_torch("backend_plugins")
def test_without_a_run_directory_one_temporary_folder_holds_the_run(tmp_path):
    """Without --run-dir, a new folder in TMPDIR takes every file of the run, torch's launcher's
    logs included (its own default is a torchelastic_* folder there that it never removes)."""
    job = tmp_path / "job.py"
    job.write_text("import torch.distributed as dist\ndist.init_process_group('gloo')\ndist.barrier()\n"
                   "dist.destroy_process_group()\n")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    done = _cli("run", "--nproc", "2", "--no-activate", "--", str(job), env={"TMPDIR": str(temporary)})
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = temporary.iterdir()
    assert run.name.startswith("nccl-migrate-run-") and f"nccl-migrate run: the job's files are in {run}" in done.stderr
    assert {f.split("/")[0] for f in _files(run)} == {"logs"}  # torch's backend: no toolkit report, no dump


def test_an_unwritable_run_directory_is_refused_before_the_job_starts(tmp_path):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    done = _cli("run", "--run-dir", str(not_a_directory / "run"), "--", DUMPING_JOB, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"nccl-migrate run: --run-dir {not_a_directory / 'run'}: cannot be written (")
    assert "ranks per node" not in done.stderr


def test_the_dumps_go_to_the_run_directory_else_beside_the_report_else_where_torch_puts_them(tmp_path):
    from nccl_migrate import run_files

    env = {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/elsewhere/trace_", "NCCL_MIGRATE_REPORT": "/mine/report_{rank}.json"}
    run_files.report_into(env, str(tmp_path / "run"))  # the user's report is theirs
    assert run_files.run_directory(env, str(tmp_path / "run")) == str(tmp_path / "run")
    assert run_files.keep_dumps_in(env, str(tmp_path / "run")) == str(tmp_path / "run" / "fr")
    assert (tmp_path / "run" / "fr").is_dir()  # torch writes a dump only into a folder that exists
    assert env == {"NCCL_MIGRATE_REPORT": "/mine/report_{rank}.json",
                   "TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "run" / "fr" / "comm_lib_trace_rank_")}
    side = {}
    run_files.report_into(side, str(tmp_path / "a"))  # as `ab` names each side's report
    assert run_files.run_directory(side) == str(tmp_path / "a")
    assert run_files.run_directory({"TORCH_FR_DUMP_TEMP_FILE": "/jobs/fr_"}) is None


def test_fr_on_a_directory_without_dumps_says_so(tmp_path):
    (tmp_path / "fr").mkdir()
    (tmp_path / "fr" / ".nccl-migrate-dump-host-1-0.partial").write_bytes(b"")
    done = subprocess.run([sys.executable, "-m", "nccl_migrate", "fr", str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    said = done.stderr.splitlines()[-1]  # the last line: an older torch adds a warning of the toolkit's above it
    assert said.startswith(f"nccl-migrate fr: {tmp_path}: no flight-recorder dumps in it or below (files "
                           "named comm_lib_trace_rank_<rank>"), done.stderr


@pytest.mark.parametrize("name", ["comm_lib_trace_rank_", "comm_lib_trace_rank_x1", "comm_lib_trace_rank_1.tmp"])
def test_fr_takes_only_files_named_as_dumps(tmp_path, name):
    from nccl_migrate.fr import dump_paths

    (tmp_path / name).write_bytes(b"")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "comm_lib_trace_rank_10").write_bytes(b"")
    (tmp_path / "b" / "comm_lib_trace_rank_2").write_bytes(b"")
    assert dump_paths([str(tmp_path)]) == [str(tmp_path / "b" / "comm_lib_trace_rank_2"),
                                           str(tmp_path / "b" / "comm_lib_trace_rank_10")]
