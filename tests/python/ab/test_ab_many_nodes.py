"""Sides recorded where jobs really run, then compared offline: a two-node job (two torchrun agents,
--nnodes 2, c10d rendezvous on localhost) per side, one side through `ab record -- torchrun ...` on
each node, the other through `ab record`'s .py form with torch's launcher and, for jobs a
scheduler starts, the environment alone (`ab record --print-env`) given to plain torchrun."""

import json
import os
import shlex
import socket
import subprocess
import sys

from test_ab_cli import CLI, ROOT, TINY_JOB, ab
from torch_support import requires_torch

DDP_JOB = os.path.join(ROOT, "examples", "ddp_job.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _on_two_nodes(commands: list[list[str]], env: dict) -> list[subprocess.CompletedProcess]:
    """Starts one command per node at once (both must meet at the rendezvous) and waits for both."""
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for c in commands]
    try:
        outputs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    return [subprocess.CompletedProcess(c, p.returncode, out) for c, p, out in zip(commands, procs, outputs)]


def _rendezvous(run_id: str) -> list[str]:
    return ["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"localhost:{_free_port()}",
            "--rdzv-id", run_id]


def _environment_only(spec: str, directory) -> dict:
    """What `ab record --print-env` tells a scheduler to export, applied to this environment."""
    printed = subprocess.run([CLI, "ab", "record", "--side", spec, "--dir", str(directory), "--print-env"],
                             capture_output=True, text=True, timeout=120, check=True).stdout
    env = dict(os.environ, JOB_STEPS="1")
    for line in printed.splitlines():
        word, _, assignment = line.partition(" ")
        if word == "unset":
            env.pop(assignment, None)
        else:
            key, _, value = assignment.partition("=")
            env[key] = shlex.split(value)[0]
    return env


@requires_torch("backend_plugins")
def test_two_node_runs_recorded_per_side_and_compared_offline(tmp_path):
    env = dict(os.environ, JOB_STEPS="1")
    side_a = tmp_path / "a"
    rendezvous = _rendezvous("side-a")
    done = _on_two_nodes([[CLI, "ab", "record", "--side", "legacy", "--dir", str(side_a), "--",
                           *TORCHRUN, *rendezvous, "--nproc-per-node", "1", DDP_JOB] for _ in range(2)], env)
    assert [d.returncode for d in done] == [0, 0], [d.stdout[-2000:] for d in done]

    side_b = tmp_path / "b"  # started by a "scheduler": plain torchrun, the recorder on by environment alone
    rendezvous = _rendezvous("side-b")
    done = _on_two_nodes([[*TORCHRUN, *rendezvous, "--nproc-per-node", "1", DDP_JOB] for _ in range(2)],
                         _environment_only("rewritten", side_b))
    assert [d.returncode for d in done] == [0, 0], [d.stdout[-2000:] for d in done]

    for side in (side_a, side_b):  # one record file per global rank, written by one process each
        assert sorted(p.name for p in side.glob("rank*.jsonl")) == ["rank0.jsonl", "rank1.jsonl"]
        assert {json.loads(p.read_text())["world_size"] for p in side.glob("rank*.meta.json")} == {2}
    status, report, stderr = ab(tmp_path, "compare", str(side_a), str(side_b))
    assert status == 0, stderr
    assert report["verdict"] == "identical" and report["ops_compared"] == report["identical"] > 0
    legacy, rewritten = report["sides"]["a"]["communicators"], report["sides"]["b"]["communicators"]
    assert any("p2p" in c for c in legacy["0"]) and not any("p2p" in c for c in rewritten["0"])
    assert (tmp_path / "run" / "report.html").exists()


@requires_torch("backend_plugins")
def test_the_py_form_runs_each_node_through_torchs_launcher(tmp_path):
    env = dict(os.environ, JOB_STEPS="1")
    rendezvous = _rendezvous("py-form")
    done = _on_two_nodes([[CLI, "ab", "record", "--side", "rewritten", "--dir", str(tmp_path / "b"), "--nproc", "1",
                           *rendezvous, "--", DDP_JOB] for _ in range(2)], env)
    assert [d.returncode for d in done] == [0, 0], [d.stdout[-2000:] for d in done]
    assert sorted(p.name for p in (tmp_path / "b").glob("rank*.jsonl")) == ["rank0.jsonl", "rank1.jsonl"]
    logs = " ".join(p.read_text() for p in (tmp_path / "b").glob("job.*.log"))
    assert "[rank0]" in logs and "[rank1]" in logs, "each rank's output, prefixed by torch's launcher"


def test_a_failed_side_is_reported_by_record_and_by_compare(tmp_path):
    job = tmp_path / "fails.py"
    job.write_text("import sys\nsys.exit(3)\n")
    done = subprocess.run([CLI, "ab", "record", "--side", "legacy", "--dir", str(tmp_path / "a"), "--nproc", "1",
                           "--", str(job)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "rank 0 exited with status 3" in done.stderr
    status, report, _ = ab(tmp_path, "compare", str(tmp_path / "a"), str(tmp_path / "a"))
    assert status == 2 and "rank 0 exited with status 3" in report["verdict"]


@requires_torch("backend_plugins")
def test_workers_restarted_by_torchs_launcher_are_compared_by_their_last_attempt(tmp_path):
    """Rank 1 fails on the first attempt and torch's launcher restarts the workers (--max-restarts):
    the restarted ranks record afresh, and the compare reads the attempt that finished."""
    env = dict(os.environ, TINY_FAIL_FIRST_ATTEMPT="1")
    for spec, label in (("legacy", "a"), ("rewritten", "b")):
        done = subprocess.run([CLI, "ab", "record", "--side", spec, "--dir", str(tmp_path / label), "--max-restarts",
                               "1", "--", TINY_JOB], capture_output=True, text=True, timeout=240, env=env, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
    status, report, stderr = ab(tmp_path, "compare", str(tmp_path / "a"), str(tmp_path / "b"))
    assert status == 0, stderr
    assert report["verdict"] == "identical" and report["ops_compared"] == report["identical"] == 2 * 3
    assert report["sides"]["a"]["restarts"] == report["sides"]["b"]["restarts"] == 1


def test_a_side_whose_other_node_never_comes_records_its_failure(tmp_path):
    """`ab record` on one node of a two-node side, the other never started: past --timeout the
    side's failure is written and named, and a compare says why it cannot compare."""
    done = subprocess.run([CLI, "ab", "record", "--side", "legacy", "--dir", str(tmp_path / "a"), "--nproc", "1",
                           *_rendezvous("alone"), "--timeout", "4", "--", TINY_JOB],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "ran past its timeout" in done.stderr, (done.returncode, done.stderr[-2000:])
    sides = list((tmp_path / "a").glob("side.*.json"))
    assert len(sides) == 1 and "ran past its timeout" in json.loads(sides[0].read_text())["failure"]
    status, report, _ = ab(tmp_path, "compare", str(tmp_path / "a"), str(tmp_path / "a"))
    assert status == 2 and "ran past its timeout" in report["verdict"]


def test_a_launch_command_is_run_once_as_given(tmp_path):
    """`ab record -- srun python job.py` or a shell script: the command starts the ranks itself, so
    it runs once, with the side's environment; torch's launcher starting it --nproc times would
    start every rank that many times over."""
    starts = tmp_path / "starts"
    script = tmp_path / "launch.sh"
    script.write_text(f'#!/bin/sh\necho "$NCCL_MIGRATE_AB_RECORD" >> {starts}\n')
    script.chmod(0o755)
    done = subprocess.run([CLI, "ab", "record", "--side", "legacy", "--dir", str(tmp_path / "a"), "--", "sh",
                           str(script)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert starts.read_text().splitlines() == [str(tmp_path / "a")]  # once, recording into the side's directory


def test_launcher_options_with_a_launch_command_are_refused(tmp_path):
    done = subprocess.run([CLI, "ab", "record", "--side", "legacy", "--dir", str(tmp_path / "a"), "--nproc", "4",
                           "--", "srun", "python", "job.py"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "--nproc apply to a .py job only: srun is a launch command" in done.stderr
    assert not (tmp_path / "a").exists()  # nothing started
