"""The record writer: records reach the disk in order within one drain interval (a side killed
without exit handlers keeps them), a record whose GPU digest is not computed yet holds back the
ones after it for a bounded time, and a digest the GPU never delivers, or fails to, ends as a
named gap, never as a hang or a lost record."""

import json
import os
import threading
import time

from nccl_migrate.ab import recorder_threads
from nccl_migrate.ab.digest import PendingDigest
from nccl_migrate.ab.recorder_threads import RecordWriter
from nccl_migrate.record_files import claim


class StreamNotThereYet(PendingDigest):
    """A pending GPU digest whose stream reaches it when `arrived` is set (never, if it is not)."""

    def __init__(self):  # no tensors: only readiness and value matter to the writer
        self.arrived = threading.Event()

    def ready(self):
        return self.arrived.is_set()

    def value(self):
        assert self.arrived.is_set(), "the writer must not wait on a digest that is not ready"
        return "gpu:feed"


class StreamFailed(StreamNotThereYet):
    """A pending GPU digest whose stream hit a CUDA error (sticky after a failed op)."""

    def ready(self):
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")


def lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_records_are_on_disk_within_an_interval_while_the_job_runs(tmp_path):
    writer = RecordWriter(claim(str(tmp_path / "r.jsonl")))
    writer.put({"seq": 0, "in": "a", "out": "b"})
    time.sleep(recorder_threads.WRITE_INTERVAL * 4)
    assert [e["seq"] for e in lines(tmp_path / "r.jsonl")] == [0]
    writer.close()


def test_a_pending_gpu_digest_holds_back_later_records_until_it_arrives(tmp_path):
    writer = RecordWriter(claim(str(tmp_path / "r.jsonl")))
    pending = StreamNotThereYet()
    writer.put({"seq": 0, "in": "a", "out": pending})
    writer.put({"seq": 1, "in": "c", "out": "d"})
    time.sleep(recorder_threads.WRITE_INTERVAL * 4)
    assert lines(tmp_path / "r.jsonl") == []  # order is kept: nothing overtakes seq 0
    pending.arrived.set()
    time.sleep(recorder_threads.WRITE_INTERVAL * 4)
    assert [(e["seq"], e["out"]) for e in lines(tmp_path / "r.jsonl")] == [(0, "gpu:feed"), (1, "d")]
    writer.close()


def test_a_digest_the_gpu_never_delivers_is_named_at_close_within_the_patience(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder_threads, "GPU_DIGEST_PATIENCE", 0.3)
    writer = RecordWriter(claim(str(tmp_path / "r.jsonl")))
    writer.put({"seq": 0, "in": "a", "out": StreamNotThereYet()})
    writer.put({"seq": 1, "in": "c", "out": "d"})
    started = time.monotonic()
    writer.close()
    assert time.monotonic() - started < 3
    first, second = lines(tmp_path / "r.jsonl")
    assert first["out"] is None and first["digests_unfinished"] == ["out"] and first["in"] == "a"
    assert second == {"seq": 1, "in": "c", "out": "d"}


def test_a_stuck_stream_holds_records_back_for_the_patience_only(tmp_path, monkeypatch):
    monkeypatch.setattr(recorder_threads, "GPU_DIGEST_PATIENCE", 0.3)
    writer = RecordWriter(claim(str(tmp_path / "r.jsonl")))
    put_at = time.monotonic()
    writer.put({"seq": 0, "in": "a", "out": StreamNotThereYet()})  # behind a hung op
    writer.put({"seq": 1, "in": "c", "out": "d"})
    # The job is still running: nothing has closed the writer. Both records are on disk within a
    # second, and not before the first one's patience ran out.
    while len(lines(tmp_path / "r.jsonl")) < 2 and time.monotonic() < put_at + 1.0:
        time.sleep(0.01)
    first, second = lines(tmp_path / "r.jsonl")
    assert time.monotonic() - put_at >= 0.3
    assert first["out"] is None and first["digests_unfinished"] == ["out"] and second["seq"] == 1
    writer.close()


def test_a_cuda_error_on_a_digest_is_recorded_and_the_writer_goes_on(tmp_path):
    writer = RecordWriter(claim(str(tmp_path / "r.jsonl")))
    writer.put({"seq": 0, "in": StreamFailed(), "out": "b"})
    writer.put({"seq": 1, "in": "c", "out": "d"})
    writer.close()
    first, second = lines(tmp_path / "r.jsonl")
    assert first["in"] is None and first["digests_unfinished"] == ["in"]
    assert first["digest_errors"] == {"in": "RuntimeError: CUDA error: an illegal memory access was encountered"}
    assert second == {"seq": 1, "in": "c", "out": "d"}


def test_an_exclusive_whole_file_is_written_where_hard_links_are_refused(tmp_path, monkeypatch):
    """Some shared filesystems (FUSE, object stores, SMB) refuse os.link: the file is still written
    once, exclusively, and a second writer still finds it taken."""
    from nccl_migrate.record_files import write_whole

    def refused(source, target):
        raise PermissionError(1, "Operation not permitted", source)

    monkeypatch.setattr(os, "link", refused)
    path = tmp_path / "rank0.meta.json"
    assert write_whole(str(path), '{"rank": 0}', exclusive=True)
    assert path.read_text() == '{"rank": 0}' and not list(tmp_path.glob("*.tmp"))
    assert not write_whole(str(path), '{"rank": 0, "second": true}', exclusive=True)
    assert path.read_text() == '{"rank": 0}'


def test_two_writers_of_one_file_never_share_a_temporary_file(tmp_path):
    """Two threads (or two containers sharing a host name and pid on a shared filesystem) writing
    one whole file at once: each writes its own temporary file, so neither renames or removes the
    other's, and the file ends as one writer's text."""
    from nccl_migrate.record_files import save_whole

    path = str(tmp_path / "rank0.meta.json")
    both_written = threading.Barrier(2, timeout=10)
    errors = []

    def writer(text):
        def save(private):
            with open(private, "w") as f:
                f.write(text)
            both_written.wait()  # both temporary files exist before either is renamed into place

        try:
            save_whole(path, save)
        except Exception as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(text,)) for text in ('{"w": 1}', '{"w": 2}')]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with open(path) as f:
        assert f.read() in ('{"w": 1}', '{"w": 2}') and not list(tmp_path.glob("*.tmp"))


def test_writers_that_share_host_pid_and_thread_still_get_their_own_temporary_files(tmp_path, monkeypatch):
    """Two containers on one shared filesystem can share a host name, a pid and even a thread id:
    the temporary names must still differ, and two such writers must not clobber each other."""
    from nccl_migrate import record_files

    monkeypatch.setattr(record_files.socket, "gethostname", lambda: "node")
    monkeypatch.setattr(record_files.os, "getpid", lambda: 1)
    monkeypatch.setattr(record_files.threading, "get_ident", lambda: 7)
    path = str(tmp_path / "rank0.meta.json")
    names = {record_files._private(path) for _ in range(50)}
    assert len(names) == 50, "temporary names repeat for writers alike in host, pid and thread"
    seen = []

    def first(private):
        seen.append(private)
        with open(private, "w") as f:
            f.write('{"w": 1}')
        record_files.save_whole(path, second)  # the other container writes while this one has its file open

    def second(private):
        seen.append(private)
        with open(private, "w") as f:
            f.write('{"w": 2}')

    record_files.save_whole(path, first)
    assert len(set(seen)) == 2
    with open(path) as f:
        assert f.read() == '{"w": 1}'  # the outer writer's rename came last
    assert not list(tmp_path.glob("*.tmp"))


def test_a_write_that_fails_once_stops_the_writer_for_good(tmp_path, monkeypatch, capfd):
    """A write that fails once (the disk was full for a moment): the writer stops there, writes
    nothing more even when writes would succeed again, counts every later record as dropped and
    says so once."""
    calls = []

    def flaky(fd, line):
        calls.append(line)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        os.write(fd, (line + "\n").encode())

    monkeypatch.setattr(recorder_threads, "write_line", flaky)
    path = tmp_path / "r.jsonl"
    writer = RecordWriter(claim(str(path)), str(path))
    for seq in range(4):
        writer.put({"seq": seq, "in": "a", "out": "b"})
    writer.close()
    assert path.read_text() == ""
    assert (writer.written, writer.dropped) == (0, 4)
    assert len(calls) == 1, "the writer kept writing after a failed write"
    assert capfd.readouterr().err.count("later records are dropped") == 1


def test_a_write_that_fails_stops_the_writer_cleanly_and_names_the_error(tmp_path, capfd):
    """A full disk (/dev/full refuses every write with ENOSPC): no thread traceback, no hang, every
    record counted as dropped, and the failure names the file and the error."""
    died = []
    previous, threading.excepthook = threading.excepthook, died.append
    try:
        writer = RecordWriter(os.open("/dev/full", os.O_WRONLY), "/records/rank0.jsonl")
        for seq in range(3):
            writer.put({"seq": seq, "in": "a", "out": "b"})
        time.sleep(recorder_threads.WRITE_INTERVAL * 4)
        writer.put({"seq": 3, "in": "a", "out": "b"})
        started = time.monotonic()
        writer.close()
        assert time.monotonic() - started < 3
    finally:
        threading.excepthook = previous
    assert died == []
    assert writer.failure == "writing /records/rank0.jsonl failed after 0 record(s): No space left on device (ENOSPC)"
    assert (writer.written, writer.dropped) == (0, 4)
    assert "later records are dropped" in capfd.readouterr().err


def test_a_rank_ended_by_a_signal_waits_for_a_gpu_digest_briefly_only(tmp_path):
    """A rank its launcher ends (termination.py) closes its writer with a short patience: a digest
    its GPU never delivers is named, the records after it are written, and the close says so."""
    writer = RecordWriter(claim(str(tmp_path / "r.jsonl")))
    writer.put({"seq": 0, "in": "a", "out": StreamNotThereYet()})
    writer.put({"seq": 1, "in": "c", "out": "d"})
    started = time.monotonic()
    assert writer.close(patience=0.2, timeout=5) is True
    assert time.monotonic() - started < recorder_threads.GPU_DIGEST_PATIENCE / 2
    first, second = lines(tmp_path / "r.jsonl")
    assert first["digests_unfinished"] == ["out"] and second == {"seq": 1, "in": "c", "out": "d"}
