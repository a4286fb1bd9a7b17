"""tests/gpu/gpu_check.py's whole run without a GPU: its Check plans, runs and reports made-up
probes (no device, the group join and teardown stood in for), so what is tested is the driver: one rank
and why on one GPU without NCCL's multi-rank switch, two-rank probes reported not run, probes
sharing a world per backend, the concurrent worlds, the teardown interpreters judged on their
exit, a world ended by a hung probe giving its unreached probes a fresh one, the report files
rewritten as it goes, and the exit status."""

import argparse
import json
import os
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))

import gpu_check
import gpu_plan as plan
import gpu_probe_table as table
import gpu_probes

ENV = {"python": "3.12.3", "torch": "2.11.0+cu130", "cuda": "13.0", "gpus": 1, "gpu": "NVIDIA H200",
       "nccl": "2.28.9", "libnccl": "/x/libnccl.so.2", "multi_rank_switch": False, "torch_backends": {"nccl": "legacy"},
       "ours_built": True}


def _passes(r):
    r.check("ok", True)
    r.headline(f"ran in {os.environ.get('PROBE_MODE', 'the shared world')}")


def _identity(r):
    r.check("unchanged", True, weak=r.at_one_rank("an identity at one rank"))


def _hangs_for_ours(r):
    r.check("started", True)
    if r.ours:
        time.sleep(60)


SPECS = [plan.ProbeSpec("pair", 30, 1, alone=True, two_ranks=True),
         plan.ProbeSpec("first", 30, 0.1), plan.ProbeSpec("hangs", 2, 0.1), plan.ProbeSpec("after", 30, 0.1),
         plan.ProbeSpec("weak", 30, 0.1),
         plan.ProbeSpec("mode", 30, 0.1, stage=2, alone=True, concurrent=True,
                        env=(("PROBE_MODE", "a world of its own"),)),
         plan.ProbeSpec("exit", 30, 0.1, stage=2, children=True)]
FUNCTIONS = {"pair": _passes, "first": _passes, "hangs": _hangs_for_ours, "after": _passes, "weak": _identity,
             "mode": _passes}


@pytest.fixture
def fake_table(monkeypatch, tmp_path):
    monkeypatch.setattr(table, "PROBES", {s.name: s for s in SPECS})
    monkeypatch.setattr(table, "FUNCTIONS", FUNCTIONS)
    monkeypatch.setattr(gpu_probes.Rank, "join_group", lambda self, timeout_s: None)
    monkeypatch.setattr(table.dist, "destroy_process_group", lambda: None)
    child = tmp_path / "child.py"
    # migrate-legacy's interpreter prints an abort on its way out; torch's exits cleanly.
    child.write_text("import sys\nprint('" + plan.CHILD_OPS_DONE + "')\n"
                     "if 'migrate-legacy' in sys.argv: print('terminate called after throwing')\n")
    monkeypatch.setattr(gpu_check, "TEARDOWN_CHILD", str(child))


def test_a_whole_check_on_one_gpu_plans_runs_and_reports_every_probe(fake_table, tmp_path):
    out = tmp_path / "out"
    args = argparse.Namespace(deadline=120.0, margin=0.0, out=str(out), world="auto", groups=1, start_method="fork", spent=95.0)
    check = gpu_check.Check(args, dict(ENV), ["nccl", "migrate-legacy"], SPECS, started=time.monotonic())
    check.run_all()
    cells = {(r["probe"], r["backend"]): (r["verdict"], r["detail"]) for r in check.results}

    assert check.world == 1 and "NCCL 2.28.9 is older than 2.30" in check.world_reason
    assert cells[("pair", "migrate-legacy")][0] == plan.NOT_RUN
    assert "needs two ranks" in cells[("pair", "migrate-legacy")][1]
    assert cells[("first", "nccl")] == (plan.PASS, "ran in the shared world")
    assert cells[("hangs", "nccl")][0] == plan.PASS
    assert cells[("hangs", "migrate-legacy")][0] == plan.TIMEOUT
    # The probes the hung world never reached ran in a fresh one.
    assert cells[("after", "migrate-legacy")] == (plan.PASS, "ran in the shared world")
    assert cells[("weak", "migrate-legacy")] == (plan.WEAK, "an identity at one rank")
    assert cells[("mode", "nccl")] == (plan.PASS, "ran in a world of its own")
    assert cells[("exit", "nccl")][0] == plan.PASS
    assert cells[("exit", "migrate-legacy")][0] == plan.FAIL
    assert "terminate called" in cells[("exit", "migrate-legacy")][1]
    assert check.status() == 1
    # Ours ran every stage before torch's reference began.
    order = [(r["probe"], r["backend"]) for r in check.results if r["verdict"] != plan.NOT_RUN]
    assert max(i for i, (_, b) in enumerate(order) if b == "migrate-legacy") < \
        min(i for i, (_, b) in enumerate(order) if b == "nccl")

    report = json.loads((out / "gpu_check.json").read_text())
    assert report["world"] == 1 and len(report["runs"]) == len(check.results)
    table_text = (out / "gpu_check.md").read_text()
    assert "Ranks per world: 1 (no device shared): one rank: one GPU" in table_text
    assert "What this cannot show: no peer" in table_text
    weak = "cannot fail at 1 rank: an identity at one rank"
    assert f"| weak | {weak} | {weak} |" in table_text
    assert "| hangs | pass: 1 check | timeout: 2 s: rank 0 after started |" in table_text
    assert "build 95 s" in table_text
    kept = (out / "gpu_check_logs.txt").read_text()  # the logs of what did not pass, in one file
    assert "===== first+3.migrate-legacy: rank0.log" in kept  # the world the hung probe ended
    assert "first+3.nccl" not in kept  # torch's world passed: nothing kept


def test_a_deadline_too_short_for_a_world_reports_its_probes_not_run(fake_table, tmp_path):
    args = argparse.Namespace(deadline=plan.SETUP_S + 1, margin=0.0, out=str(tmp_path), world="1", groups=1,
                              start_method="fork", spent=0.0)
    check = gpu_check.Check(args, dict(ENV), ["nccl", "migrate-legacy"], SPECS, started=time.monotonic())
    check.run_all()
    mine = [r for r in check.results if r["backend"] == "migrate-legacy" and r["probe"] != "pair"]
    assert mine and all(r["verdict"] == plan.NOT_RUN and r["detail"].startswith("deadline: needs about ")
                        for r in mine)
    assert check.status() == 3
