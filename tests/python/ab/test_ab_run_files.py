"""`nccl-migrate ab` keeps each side's flight-recorder dumps and torch's launcher's logs in the
side's own folder of the run directory (a/fr/, b/fr/), where `nccl-migrate fr` finds them: never in
torch's default ~/.cache/torch/, where side b's dumps overwrote side a's; a side that starts again
clears what an earlier run left there, half-written dumps included."""

import json
import os
import subprocess

from torch_support import requires_torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CLI = os.environ.get("NCCL_MIGRATE_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))
DUMPING_JOB = os.path.join(HERE, "dumping_job.py")


def _files(directory):
    return sorted(os.path.relpath(os.path.join(root, name), directory)
                  for root, _, names in os.walk(directory) for name in names)


@requires_torch("backend_plugins")
def test_each_sides_dumps_stay_in_its_folder_and_fr_finds_both(tmp_path):
    home, run = tmp_path / "home", tmp_path / "run"
    env = dict(os.environ, HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"),
               TORCH_FR_DUMP_TEMP_FILE=str(tmp_path / "mine" / "fr_"))
    done = subprocess.run([CLI, "ab", "--format", "json", "--run-dir", str(run), "--", DUMPING_JOB],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr
    for side in ("a", "b"):
        files = _files(run / side)
        assert [f for f in files if f.startswith("fr/")] == ["fr/comm_lib_trace_rank_0", "fr/comm_lib_trace_rank_1"]
        assert len([f for f in files if f.startswith("logs/")]) == 4, files  # each rank's stdout and stderr
    assert _files(home) == [], "a side's job wrote into HOME (torch's default dump location)"
    assert not (tmp_path / "mine").exists(), "the user's dump prefix, shared by both sides, was used"

    found = subprocess.run([CLI, "fr", "--format", "json", str(run)], capture_output=True, text=True, timeout=120,
                           check=False)
    assert found.returncode in (0, 1), found.stderr
    assert [s["path"] for s in json.loads(found.stdout)] == [str(run / side / "fr" / f"comm_lib_trace_rank_{rank}")
                                                            for side in ("a", "b") for rank in (0, 1)]


def test_a_side_that_starts_again_clears_the_dumps_and_logs_an_earlier_run_left(tmp_path):
    from nccl_migrate.ab.sides import clear

    side = tmp_path / "a"
    (side / "fr").mkdir(parents=True)
    (side / "fr" / "comm_lib_trace_rank_0").write_bytes(b"an earlier run's dump")
    (side / "fr" / ".nccl-migrate-dump-host-4242-0.partial").write_bytes(b"half a dump")
    (side / "logs" / "id_x" / "attempt_0" / "0").mkdir(parents=True)
    (side / "logs" / "id_x" / "attempt_0" / "0" / "stdout.log").write_text("old output\n")
    (side / "notes.txt").write_text("the user's")
    assert sorted(clear(str(side))) == [str(side / "fr"), str(side / "logs")]
    assert _files(side) == ["notes.txt"]
