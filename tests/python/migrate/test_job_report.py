"""A job's own report (NCCL_MIGRATE_REPORT): the groups the toolkit served, named by the global rank
of the process, written once at exit, only by a process the toolkit served, and in an A/B run
beside the attempt's records, never over another process's report."""

import json
import os
import socket

import pytest

from nccl_migrate import report


class Backend:
    def __init__(self, rank, size, name="migrate-nccl2"):
        self._rank, self._size, self._name = rank, size, name

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return self._name


@pytest.fixture
def served(monkeypatch):
    """A process with no group served yet, whatever this test process did before."""
    monkeypatch.setattr(report, "_groups", [])
    monkeypatch.setattr(report, "_global_rank", [])
    monkeypatch.delenv("NCCL_MIGRATE_AB_RECORD", raising=False)
    monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT", raising=False)
    return monkeypatch


def test_groups_are_listed_and_the_first_ones_rank_is_the_processs(served):
    report.record_group("nccl", "rewritten", Backend(3, 4))
    report.record_group("nccl-lazy", "rewritten-lazy-p2p", Backend(0, 2, "migrate-lazy"))
    assert report._global_rank == [3]
    facts = report.report()
    assert facts["pid"] == os.getpid() and isinstance(facts["communicators_created"], list)
    assert facts["groups"] == [
        {"requested": "nccl", "behaviour": "rewritten", "name": "migrate-nccl2", "rank": 3, "size": 4},
        {"requested": "nccl-lazy", "behaviour": "rewritten-lazy-p2p", "name": "migrate-lazy", "rank": 0, "size": 2}]
    facts["groups"].clear()
    assert len(report.report()["groups"]) == 2  # a copy: the report is read, never changed through it


def test_the_report_is_written_at_exit_under_the_global_rank(served, tmp_path):
    served.setenv("NCCL_MIGRATE_REPORT", str(tmp_path / "report.{rank}.json"))
    report.record_group("nccl", "legacy", Backend(2, 4))
    report._write_at_exit()
    written = json.loads((tmp_path / "report.2.json").read_text())
    assert written["groups"][0]["rank"] == 2 and written["pid"] == os.getpid()
    report._write_at_exit()  # outside an A/B run a later write replaces it
    assert sorted(os.listdir(tmp_path)) == ["report.2.json"]


def test_a_process_the_toolkit_never_served_writes_nothing(served, tmp_path):
    served.setenv("NCCL_MIGRATE_REPORT", str(tmp_path / "report.json"))
    report._write_at_exit()
    assert os.listdir(tmp_path) == []
    served.delenv("NCCL_MIGRATE_REPORT")
    report.record_group("nccl", "legacy", Backend(0, 1))
    report._write_at_exit()
    assert os.listdir(tmp_path) == []


def test_in_an_ab_run_a_second_process_of_a_rank_is_reported_not_written_over(served, tmp_path, capsys):
    run = tmp_path / "a"
    run.mkdir()
    served.setenv("NCCL_MIGRATE_AB_RECORD", str(run))
    served.setenv("NCCL_MIGRATE_REPORT", str(run / "rank{rank}.report.json"))
    report.record_group("nccl", "legacy", Backend(1, 2))
    report._write_at_exit()
    first = (run / "rank1.report.json").read_text()
    report._write_at_exit()
    assert (run / "rank1.report.json").read_text() == first
    marker = run / f"rank1.report.json.second-writer.{socket.gethostname()}.{os.getpid()}"
    assert json.loads(marker.read_text())["rank"] == 1
    assert capsys.readouterr().err.startswith("nccl-migrate: two processes recorded rank 1 (rank1.report.json)")


def test_in_a_restarted_ab_run_the_report_goes_beside_the_attempts_records(served, tmp_path):
    served.setenv("NCCL_MIGRATE_AB_RECORD", str(tmp_path))
    served.setenv("TORCHELASTIC_RESTART_COUNT", "2")
    served.setenv("NCCL_MIGRATE_REPORT", str(tmp_path / "rank{rank}.report.json"))
    report.record_group("nccl", "legacy", Backend(0, 1))
    report._write_at_exit()
    assert json.loads((tmp_path / "attempt2" / "rank0.report.json").read_text())["groups"][0]["rank"] == 0


def test_a_group_made_after_the_world_is_named_by_the_processs_rank_in_the_world(served):
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        report.record_group("nccl", "legacy", Backend(5, 8))  # a subgroup's own rank
    finally:
        dist.destroy_process_group()
    assert report._global_rank == [0] and report.report()["groups"][0]["rank"] == 5
