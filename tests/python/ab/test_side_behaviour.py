"""A side whose job's own environment overrode the behaviour its SPEC asked for (a launch script's
`export TORCH_DIST_USE_NCCL2=0`) is named, and the run is not called identical: unit tests on
reports as the toolkit's backends write them (report.py), then the real job through its launch
script."""

import json
import os
import shutil
import subprocess
import sys

from nccl_migrate.ab.side_behaviour import expected_behaviour, overridden
from nccl_migrate.ab.spec import parse
from torch_support import requires_torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CLI = os.environ.get("NCCL_MIGRATE_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))


def _reports(*behaviours, requested="nccl"):
    return {rank: {"pid": 1, "groups": [{"requested": requested, "behaviour": b, "name": "nccl", "rank": rank,
                                         "size": 2}], "communicators_created": []}
            for rank, b in enumerate(behaviours)}


def test_the_behaviour_a_spec_asks_for():
    assert expected_behaviour(parse("a", "legacy")) == "legacy"
    assert expected_behaviour(parse("b", "rewritten:torch")) == "rewritten"
    assert expected_behaviour(parse("b", "rewritten,NCCL_MIGRATE_EAGER_SUBGROUPS=1")) == "rewritten"
    assert expected_behaviour(parse("b", "lazy")) is None  # the name is replaced: no "nccl" group to judge
    assert expected_behaviour(parse("b", "backend=gloo")) is None
    assert expected_behaviour(parse("b", "X=1")) is None
    assert expected_behaviour(parse("b", "TORCH_DIST_USE_NCCL2=1")) is None  # not a SPEC behaviour: not judged


def test_a_side_that_ran_another_behaviour_is_named_with_what_overrode_it():
    said = overridden(parse("b", "rewritten"), _reports("legacy", "legacy"))
    assert said.startswith('side b (rewritten) asked for the rewritten behaviour, but its job\'s groups made with '
                           'backend "nccl" ran legacy')
    assert "export TORCH_DIST_USE_NCCL2=..." in said and "NM501" in said
    mixed = overridden(parse("b", "rewritten"), {**_reports("legacy"), 1: {"pid": 2}, 2: _reports("x", "rewritten-lazy-p2p")[1]})
    assert mixed.startswith('side b (rewritten) asked for the rewritten behaviour, but its job\'s groups made with '
                            'backend "nccl" ran legacy and rewritten-lazy-p2p: the job\'s own environment overrode the '
                            "side's (an `export TORCH_DIST_USE_NCCL2=...` in its launch script, which `nccl-migrate lint` "
                            "reports as NM501); remove it, or give ab the .py job itself"), mixed


def test_a_side_that_ran_what_it_asked_or_says_nothing_is_left_alone():
    assert overridden(parse("b", "rewritten"), _reports("rewritten", "rewritten")) is None
    assert overridden(parse("a", "legacy"), _reports("legacy")) is None
    assert overridden(parse("b", "rewritten"), {}) is None  # torch's own backends write no report
    # a group the job names itself is the job's choice, not the side's
    assert overridden(parse("b", "rewritten"), _reports("legacy", requested="nccl-legacy")) is None


@requires_torch("backend_plugins")
def test_a_launch_script_that_pins_the_legacy_backend_is_caught_not_called_identical(tmp_path):
    job = tmp_path / "job"
    shutil.copytree(os.path.join(ROOT, "examples", "migrating"), job)
    bin_dir = os.path.dirname(sys.executable)  # the launch script's torchrun
    done = subprocess.run([CLI, "ab", "--format", "json", "--run-dir", str(tmp_path / "run"), "--", "bash",
                           str(job / "launch.sh")], capture_output=True, text=True, timeout=600, check=False,
                          env=dict(os.environ, GPUS="2", JOB_STEPS="1",
                                   PATH=os.pathsep.join([bin_dir, os.environ.get("PATH", "")])))
    assert done.returncode == 2, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert "side b (rewritten) asked for the rewritten behaviour" in report["verdict"], report["verdict"]
    assert "asked for the legacy" not in report["verdict"]  # side a ran what it asked
