"""The recorder's memory sampler (RSS over time, bounded however long the job runs) and the record
writer's accounting: what it wrote, what it dropped after a failure and the one message naming it."""

import errno
import json
import os
import time

import pytest

from nccl_migrate.ab import recorder_threads
from nccl_migrate.ab.recorder_threads import MemorySampler, RecordWriter
from nccl_migrate.record_files import claim


def _rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_a_sample_is_the_time_since_the_start_and_this_processs_rss():
    started = time.monotonic() - 2.0
    sampler = MemorySampler(started)
    sampler.sample()
    sampler.sample(device=False)
    (t0, rss0, cuda0), (t1, rss1, cuda1) = sampler.samples
    assert 2.0 <= t0 <= t1 < 10.0
    assert abs(rss0 - _rss_mib()) < 64 and rss0 > 1  # MiB, not pages or bytes
    assert cuda0 is None and cuda1 is None  # no CUDA tensors in this process


def test_past_2000_samples_every_other_one_is_dropped_and_the_interval_doubles():
    sampler = MemorySampler(time.monotonic())
    sampler.samples = [[float(i), 1.0, None] for i in range(2000)]
    sampler.sample()
    assert len(sampler.samples) == 1001 and sampler.samples[:2] == [[0.0, 1.0, None], [2.0, 1.0, None]]
    assert sampler.interval == 2 * recorder_threads.MEMORY_INTERVAL
    sampler.samples = [[0.0, 1.0, None]] * 1999
    sampler.sample()
    assert len(sampler.samples) == 2000 and sampler.interval == 2 * recorder_threads.MEMORY_INTERVAL


def test_the_sampler_samples_every_interval_until_stopped(monkeypatch):
    monkeypatch.setattr(recorder_threads, "MEMORY_INTERVAL", 0.01)
    sampler = MemorySampler(time.monotonic())
    sampler.start()
    deadline = time.monotonic() + 10
    while len(sampler.samples) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stopped.set()
    sampler.join(5)
    assert not sampler.is_alive() and len(sampler.samples) >= 3
    count = len(sampler.samples)
    time.sleep(0.05)
    assert len(sampler.samples) == count


def test_the_writer_counts_what_it_wrote_and_what_it_dropped_after_a_failure(tmp_path, monkeypatch, capfd):
    calls = []

    def fails_on_the_third(fd, text):
        calls.append(text)
        if len(calls) == 3:
            raise OSError(errno.EFBIG, "File too large")
        os.write(fd, (text + "\n").encode())

    monkeypatch.setattr(recorder_threads, "write_line", fails_on_the_third)
    path = tmp_path / "r.jsonl"
    writer = RecordWriter(claim(str(path)), path="rank0.jsonl")
    for seq in range(5):
        writer.put({"seq": seq})
    assert writer.close(timeout=10) is True
    assert (writer.written, writer.dropped) == (2, 3) and len(calls) == 3
    assert [json.loads(line)["seq"] for line in path.read_text().splitlines()] == [0, 1]
    assert writer.failure == "writing rank0.jsonl failed after 2 record(s): File too large (EFBIG)"
    err = capfd.readouterr().err
    assert err == (f"nccl-migrate ab: {writer.failure}; later records are dropped and the comparison will report "
                   "this rank's records incomplete\n")


def test_a_failure_without_an_errno_is_still_named(tmp_path):
    writer = RecordWriter(claim(str(tmp_path / "r.jsonl")))
    writer._failed(OSError("no space"))
    assert writer.failure == "writing the record file failed after 0 record(s): no space (None)"
    writer.close(timeout=10)


def test_the_file_is_closed_when_the_writer_stops(tmp_path):
    fd = claim(str(tmp_path / "r.jsonl"))
    writer = RecordWriter(fd)
    writer.put({"seq": 0})
    assert writer.close() is True
    try:
        os.fstat(fd)
        still_open = True
    except OSError:
        still_open = False
    assert not still_open and writer.written == 1


def test_both_threads_are_named_and_never_keep_the_process_alive(tmp_path):
    sampler = MemorySampler(time.monotonic())
    writer = RecordWriter(claim(str(tmp_path / "r.jsonl")))
    try:
        assert (sampler.name, sampler.daemon) == ("ab-memory", True)
        assert (writer.name, writer.daemon) == ("ab-records", True)
    finally:
        writer.close(timeout=10)


class _Statm:
    """/proc/self/statm as the kernel writes it: size, resident, shared... in pages."""

    def __init__(self, resident_pages):
        self.text = f"9999 {resident_pages} 10 1 0 100 0\n"

    def __call__(self, path, *args, **kwargs):
        assert path == "/proc/self/statm", path
        import io

        return io.StringIO(self.text)


def test_a_sample_reads_resident_pages_and_rounds_to_the_ms_and_hundredth_of_a_mib(monkeypatch):
    sampler = MemorySampler(100.0)
    sampler.page = 4096
    monkeypatch.setattr(recorder_threads, "open", _Statm(2563), raising=False)  # 10.01171875 MiB
    monkeypatch.setattr(recorder_threads.time, "monotonic", lambda: 102.123456)
    monkeypatch.setattr(recorder_threads.resource, "getrusage", lambda who: pytest.fail("statm was readable"))
    sampler.sample()
    assert sampler.samples == [[2.123, 10.01, None]]


def test_without_proc_the_peak_rss_stands_in(monkeypatch):
    import resource
    import types

    def no_proc(path, *args, **kwargs):
        raise FileNotFoundError(path)

    sampler = MemorySampler(time.monotonic())
    monkeypatch.setattr(recorder_threads, "open", no_proc, raising=False)
    monkeypatch.setattr(recorder_threads.resource, "getrusage",
                        lambda who: types.SimpleNamespace(ru_maxrss=20480 if who == resource.RUSAGE_SELF else 0))
    sampler.sample()
    assert sampler.samples[0][1] == 20.0  # ru_maxrss is in KiB


def test_device_memory_is_sampled_once_cuda_is_in_use_unless_the_rank_is_ending(monkeypatch):
    sampler = MemorySampler(time.monotonic())
    monkeypatch.setattr(recorder_threads.torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(recorder_threads.torch.cuda, "memory_allocated", lambda: 3 * 2**20 + 12345)  # bytes
    sampler.sample()
    sampler.sample(device=False)
    assert [s[2] for s in sampler.samples] == [3.01, None]


def test_an_unknown_errno_is_named_by_its_number(tmp_path, monkeypatch, capsys):
    class Stderr:
        def __init__(self):
            self.text, self.flushed = "", 0

        def write(self, text):
            self.text += text

        def flush(self):
            self.flushed += 1

    stderr = Stderr()
    monkeypatch.setattr(recorder_threads.sys, "stderr", stderr)
    writer = RecordWriter(claim(str(tmp_path / "r.jsonl")))
    writer._failed(OSError(99999, "odd"))
    writer.close(timeout=10)
    assert writer.failure == "writing the record file failed after 0 record(s): odd (99999)"
    assert stderr.flushed == 1 and stderr.text.startswith("nccl-migrate ab: writing the record file failed")


class _Arriving(recorder_threads.PendingDigest):
    """A GPU digest whose stream gets there `after` seconds from now (never, with None)."""

    def __init__(self, after):
        self.at = None if after is None else time.monotonic() + after

    def ready(self):
        return self.at is not None and time.monotonic() >= self.at

    def value(self):
        return "gpu:late"


def test_at_close_a_digest_that_arrives_within_the_patience_is_written_at_once(tmp_path):
    path = tmp_path / "r.jsonl"
    writer = RecordWriter(claim(str(path)))
    writer.put({"seq": 0, "out": _Arriving(0.3)})
    started = time.monotonic()
    assert writer.close(patience=5) is True
    assert 0.25 <= time.monotonic() - started < 0.9  # noticed within its polling step, not a second later
    assert [json.loads(line)["out"] for line in path.read_text().splitlines()] == ["gpu:late"]


def test_a_stuck_digest_is_given_only_the_patience_of_close(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    writer = RecordWriter(claim(str(path)))
    writer.put({"seq": 0, "out": _Arriving(None)})
    time.sleep(recorder_threads.WRITE_INTERVAL * 3)  # the writer has seen it waiting, and goes on
    started = time.monotonic()
    assert writer.close(patience=0.1, timeout=5) is True
    assert time.monotonic() - started < 2
    assert json.loads(path.read_text())["digests_unfinished"] == ["out"]


def test_close_gives_up_waiting_for_the_thread_after_its_timeout(tmp_path):
    path = tmp_path / "r.jsonl"
    writer = RecordWriter(claim(str(path)))
    digest = _Arriving(None)
    writer.put({"seq": 0, "out": digest})
    started = time.monotonic()
    assert writer.close(patience=3, timeout=0.2) is False
    assert time.monotonic() - started < 1.5
    # The thread it gave up on still writes the record once its digest arrives within the patience.
    digest.at = time.monotonic()
    writer.join(10)
    assert not writer.is_alive() and json.loads(path.read_text())["out"] == "gpu:late"


def test_stop_returns_once_the_sampler_has_ended_and_takes_an_unstarted_one():
    sampler = MemorySampler(time.monotonic())
    sampler.stop(timeout=1.0)  # never started: nothing to wait for, and no error
    running = MemorySampler(time.monotonic())
    running.interval = 0.001
    running.start()
    running.stop(timeout=5.0)
    assert not running.is_alive()  # no sample can land after the caller's last one
