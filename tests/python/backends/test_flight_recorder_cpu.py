"""The flight recorder's dumps are torch's format: torch's own analyzer (torchfrtrace) reads them,
finds nothing wrong in a healthy run and names the missing rank when one rank ran an extra op."""

import os
import subprocess
import sys

import pytest

from ranks import run_ranks
from torch_support import fr_name


def _job(extra_op_on_rank_1):
    def run(rank, world, store):
        import torch
        import torch.distributed as dist

        import nccl_migrate

        dist.init_process_group("migrate-nccl2", store=store, rank=rank, world_size=world)
        t = torch.ones(8)
        for _ in range(3):
            dist.all_reduce(t)
        dist.broadcast(t, src=0)
        sub = dist.new_group([0, 1])
        dist.all_reduce(t, group=sub)
        if rank == 1 and extra_op_on_rank_1:
            dist.all_reduce(t, async_op=True)  # rank 0 never joins this one
        dump = nccl_migrate.flight_recorder.dump()
        path = nccl_migrate.flight_recorder.dump_to_file()
        return path, [e["profiling_name"] for e in dump["entries"]], dump["pg_config"]

    return run


def _healthy(r, w, s): return _job(False)(r, w, s)
def _extra(r, w, s): return _job(True)(r, w, s)


def _analyze(directory, prefix):
    tool = os.path.join(os.path.dirname(sys.executable), "torchfrtrace")
    return subprocess.run([tool, directory, "-p", prefix], capture_output=True, text=True, timeout=120)


def test_dump_has_torchs_fields_and_groups(tmp_path):
    results = run_ranks(_healthy, world_size=2, env={"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_")})
    for rank, (path, names, pg_config) in enumerate(results):
        assert path == str(tmp_path / f"fr_{rank}")
        assert names == [fr_name("nccl2", op) for op in ["all_reduce"] * 3 + ["broadcast", "all_reduce"]]
        assert pg_config["0"]["desc"] == "default_pg" and pg_config["0"]["ranks"] == "[0, 1]"


def test_torchs_analyzer_reads_a_healthy_run_without_complaint(tmp_path):
    run_ranks(_healthy, world_size=2, env={"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_")})
    done = _analyze(str(tmp_path), "fr_")
    assert done.returncode == 0, done.stderr
    assert "Not all ranks joining" not in done.stdout + done.stderr


def test_torchs_analyzer_names_the_rank_that_missed_a_collective(tmp_path):
    run_ranks(_extra, world_size=2, env={"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_")})
    done = _analyze(str(tmp_path), "fr_")
    out = done.stdout + done.stderr
    assert "Not all ranks joining collective" in out, out
    assert "missing ranks: {0}" in out, out


CLI = os.environ.get("NCCL_MIGRATE_CLI", os.path.join(os.path.dirname(__file__), "..", "..", "..", "build", "migrate",
                                                      "nccl-migrate"))


def test_fr_command_summarizes_dumps_and_points_at_the_unfinished_op(tmp_path):
    run_ranks(_extra, world_size=2, env={"TORCH_FR_DUMP_TEMP_FILE": str(tmp_path / "fr_")})
    done = subprocess.run([CLI, "fr", str(tmp_path / "fr_0"), str(tmp_path / "fr_1")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert any("fr_1" in l for l in lines) and f"not completed: group 0 seq 5 {fr_name('nccl2', 'all_reduce')}" in done.stdout, done.stdout
    assert "group 0 (default_pg): last enqueued collective 4, last completed 4" in done.stdout  # rank 0


def test_fr_command_rejects_a_file_that_is_not_a_dump(tmp_path):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("hello")
    done = subprocess.run([CLI, "fr", str(bogus)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "not a flight-recorder dump" in done.stderr
