"""Records are data: each file is named by the rank its process has in its group, one process
writes each, a second writer for a rank is reported with what to do, and a damaged record stops
the comparison with its file and line (exit 2, no traceback)."""

import json
import os
import subprocess

import pytest
from test_ab_cli import CLI, HERE, ab
from torch_support import requires_torch

SPAWN_JOB = os.path.join(HERE, "spawn_job.py")
FILE_SIZE_LIMIT_JOB = os.path.join(HERE, "file_size_limit_job.py")
FORK_JOB = os.path.join(HERE, "fork_job.py")


@requires_torch("backend_plugins")
def test_a_job_that_spawns_its_own_ranks_gets_intact_records_for_every_rank(tmp_path):
    status, report, stderr = ab(tmp_path, "--nproc", "1", "--", SPAWN_JOB)
    assert status == 0, stderr
    assert report["verdict"] == "identical" and report["ops_compared"] == 2 * (3 + 1)
    for side in ("a", "b"):
        directory = tmp_path / "run" / side
        for rank in (0, 1):
            records = [json.loads(line) for line in (directory / f"rank{rank}.jsonl").read_text().splitlines()]
            assert [(e["rank"], e["seq"]) for e in records] == [(rank, s) for s in range(4)]
            assert json.loads((directory / f"rank{rank}.meta.json").read_text())["rank"] == rank
        # Each rank's communicator report under its own rank, not the parent's RANK=0 twice.
        assert sorted(report["sides"][side]["communicators"]) == ["0", "1"]
        assert not list(directory.glob("*.tmp")) and not list(directory.glob("*second-writer*"))


@requires_torch("backend_plugins")
@pytest.mark.parametrize("start_method", ["fork", "forkserver"])
def test_ranks_started_by_fork_record_their_ops_and_process_facts(tmp_path, start_method):
    """mp.spawn-style ranks forked without exec: each records afresh (its own rank, pid and
    numbering, not the parent's copy) and writes its meta although it ends with os._exit."""
    status, report, stderr = ab(tmp_path, "--nproc", "1", "--", FORK_JOB, env={"FORK_WITH": start_method})
    assert status == 0, stderr
    assert report["verdict"] == "identical" and report["ops_compared"] == 2 * (3 + 1)
    for side in ("a", "b"):
        metas = [json.loads((tmp_path / "run" / side / f"rank{rank}.meta.json").read_text()) for rank in (0, 1)]
        assert [m["rank"] for m in metas] == [0, 1] and [m["ops"] for m in metas] == [4, 4]
        assert len({m["pid"] for m in metas}) == 2


@requires_torch("backend_plugins")
def test_ranks_that_end_without_exit_handlers_are_named_with_what_happened(tmp_path):
    status, report, stderr = ab(tmp_path, "--nproc", "1", "--", FORK_JOB, env={"FORK_WITH": "os_exit"})
    assert status == 2, stderr
    verdict = report["verdict"]
    assert "side a: rank 0 recorded its ops (rank0.jsonl) but never wrote rank0.meta.json" in verdict, verdict
    assert "os._exit" in verdict and "is nccl_migrate installed" not in verdict


@requires_torch("backend_plugins")
def test_two_processes_recording_one_rank_are_reported_with_the_fix(tmp_path):
    # Two launched copies of a job that spawns its own ranks: two rank 0s, two rank 1s.
    status, report, stderr = ab(tmp_path, "--nproc", "2", "--", SPAWN_JOB)
    assert status == 2, stderr
    assert "two processes recorded rank" in report["verdict"] and "use --nproc 1" in report["verdict"]
    assert "Traceback" not in stderr
    for side in ("a", "b"):  # the first writer's records are intact: nothing was interleaved
        for line in (tmp_path / "run" / side / "rank0.jsonl").read_text().splitlines():
            assert json.loads(line)["rank"] == 0


def _side(directory, ops_per_rank=3, ranks=2):
    """Records as the recorder writes them, for the loader (no job needed)."""
    directory.mkdir(parents=True)
    for rank in range(ranks):
        (directory / f"rank{rank}.meta.json").write_text(json.dumps({"rank": rank, "world_size": ranks,
                                                                     "peak_rss_kib": 1024, "memory": []}))
        lines = [json.dumps({"rank": rank, "group": "0", "seq": s, "op": "all_reduce", "dtype": "float32",
                             "in_shapes": [[4]], "out_shapes": [[4]], "reduce_op": "SUM", "peer": None,
                             "t": 100.0 + s, "ms": 0.5, "in": f"i{s}", "out": f"o{s}"})
                 for s in range(ops_per_rank)]
        (directory / f"rank{rank}.jsonl").write_text("".join(line + "\n" for line in lines))
    return directory


def _compare(tmp_path):
    done = subprocess.run([CLI, "ab", "compare", str(tmp_path / "a"), str(tmp_path / "b")], capture_output=True,
                          text=True, timeout=120, check=False)
    return done.returncode, done.stdout + done.stderr


def test_recorded_sides_compare_offline(tmp_path):
    _side(tmp_path / "a"), _side(tmp_path / "b")
    done = subprocess.run([CLI, "ab", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--format", "json"],
                          capture_output=True, text=True, timeout=120, check=False)
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["verdict"] == "identical", done.stderr
    assert report["ops_compared"] == report["identical"] == 2 * 3


def test_a_garbled_record_names_its_file_and_line(tmp_path):
    _side(tmp_path / "a"), _side(tmp_path / "b")
    path = tmp_path / "b" / "rank1.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[1] = lines[1][:40] + lines[0]  # two writers' bytes in one line
    path.write_text("".join(lines))
    status, output = _compare(tmp_path)
    assert status == 2 and f"{path}, line 2: not a JSON record" in output and "Traceback" not in output


def test_a_truncated_record_names_its_file_and_line(tmp_path):
    _side(tmp_path / "a"), _side(tmp_path / "b")
    path = tmp_path / "a" / "rank0.jsonl"
    path.write_text(path.read_text()[:-30])  # a process killed while writing its last line
    status, output = _compare(tmp_path)
    assert status == 2 and f"{path}, line 3: the last record is cut short" in output and "Traceback" not in output


def test_a_record_in_another_ranks_file_is_refused(tmp_path):
    _side(tmp_path / "a"), _side(tmp_path / "b")
    path = tmp_path / "a" / "rank1.jsonl"
    path.write_text(path.read_text().replace('"rank": 1', '"rank": 0', 1))
    status, output = _compare(tmp_path)
    assert status == 2 and f"{path}, line 1: a record of rank 0 in rank 1's file" in output


def test_a_meta_a_report_or_a_record_without_its_fields_names_its_file(tmp_path):
    _side(tmp_path / "a"), _side(tmp_path / "b")
    meta = tmp_path / "a" / "rank0.meta.json"
    meta.write_text(json.dumps({"rank": 0, "world_size": 2}))  # no peak_rss_kib: not the recorder's
    status, output = _compare(tmp_path)
    assert status == 2 and f"{meta}: field 'peak_rss_kib'" in output and "Traceback" not in output
    _side(tmp_path / "c"), _side(tmp_path / "d")
    report = tmp_path / "d" / "report_1.json"
    report.write_text(json.dumps({"pid": 1, "groups": []}))  # no communicators_created
    status, output = _compare_dirs(tmp_path / "c", tmp_path / "d")
    assert status == 2 and f"{report}: field 'communicators_created'" in output and "Traceback" not in output
    _side(tmp_path / "e"), _side(tmp_path / "f")
    records = tmp_path / "f" / "rank1.jsonl"
    records.write_text(records.read_text().replace('"in": "i0", ', "", 1))  # "in" may be null, never absent
    status, output = _compare_dirs(tmp_path / "e", tmp_path / "f")
    assert status == 2 and f"{records}, line 1: field 'in' is missing" in output and "Traceback" not in output


def test_a_kept_tensor_file_that_cannot_be_read_names_the_file(tmp_path):
    for side in ("a", "b"):
        _side(tmp_path / side, ops_per_rank=1, ranks=1)
    path = tmp_path / "b" / "rank0.jsonl"
    record = json.loads(path.read_text())
    record.update(out="different", kept="r0-g0-s0.pt")
    path.write_text(json.dumps(record) + "\n")
    path_a = tmp_path / "a" / "rank0.jsonl"
    path_a.write_text(json.dumps(dict(json.loads(path_a.read_text()), kept="r0-g0-s0.pt")) + "\n")
    (tmp_path / "a" / "tensors").mkdir()
    (tmp_path / "a" / "tensors" / "r0-g0-s0.pt").write_bytes(b"not a tensor file")
    status, output = _compare(tmp_path)
    pt = tmp_path / "a" / "tensors" / "r0-g0-s0.pt"
    assert status == 2 and f"{pt}: cannot be read" in output and "Traceback" not in output


def _compare_dirs(a, b):
    done = subprocess.run([CLI, "ab", "compare", str(a), str(b)], capture_output=True, text=True, timeout=120,
                          check=False)
    return done.returncode, done.stdout + done.stderr


@requires_torch("backend_plugins")
def test_a_record_file_that_cannot_grow_marks_the_rank_incomplete_and_the_job_goes_on(tmp_path):
    """Rank 1 of side b hits a file-size limit partway (as a full disk would stop it): the job
    finishes, no thread dies with a traceback, and the compare names the rank and the error."""
    status, report, stderr = ab(tmp_path, "--b", "rewritten,LIMITED_RANK=1", "--", FILE_SIZE_LIMIT_JOB)
    assert status == 2, stderr
    assert report["sides"]["b"]["failure"] is None  # the job itself succeeded
    verdict = report["verdict"]
    assert "side b: rank 1's records are incomplete: writing " in verdict, verdict
    assert "rank1.jsonl failed after" in verdict and "File too large (EFBIG)" in verdict
    assert "side a" not in verdict and "rank 0" not in verdict
    log = (tmp_path / "run" / "b" / "job.log").read_text()
    assert "Traceback" not in log and "rank 1 finished" in log
    done = subprocess.run([CLI, "ab", "record", "--side", "rewritten", "--dir", str(tmp_path / "recorded"), "--",
                           FILE_SIZE_LIMIT_JOB], capture_output=True, text=True, timeout=240, check=False,
                          env=dict(os.environ, LIMITED_RANK="0"))
    assert done.returncode == 2 and "rank 0's records are incomplete" in done.stderr, done.stderr[-2000:]
    meta = json.loads((tmp_path / "run" / "b" / "rank1.meta.json").read_text())
    assert meta["incomplete"]["records_dropped"] > 0 and meta["ops"] == meta["incomplete"]["records_written"] + \
        meta["incomplete"]["records_dropped"]
