"""Progress of a long comparison: on stderr only, rate-limited, none for a quick one, none with
--quiet, and never in the JSON report on stdout."""

import io
import json
import subprocess
import sys

from nccl_migrate.ab import progress
from nccl_migrate.ab.progress import Progress
from test_record_integrity import _side


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _pairs(observer, clock, ranks, per_rank, seconds_per_pair):
    for rank in range(ranks):
        for seq in range(per_rank):
            clock.now += seconds_per_pair
            observer.paired((rank, "0", seq), "identical")


def test_progress_is_rate_limited_and_names_the_rank_and_rate(monkeypatch):
    monkeypatch.setattr(progress, "CHECK_EVERY", 1)
    clock, out = Clock(), io.StringIO()
    observer = Progress(4, stream=out, clock=clock)
    _pairs(observer, clock, ranks=4, per_rank=1000, seconds_per_pair=1 / 64)  # 62.5 s of comparing
    observer.finished()
    lines = out.getvalue().splitlines()
    assert len(lines) == 62.5 // progress.INTERVAL + 1  # one per INTERVAL, and the last
    assert lines[0] == "nccl-migrate ab: comparing: 320 ops, rank 0 (1 of 4), 64 ops/s"
    assert "rank 3 (4 of 4)" in lines[-2] and lines[-1] == "nccl-migrate ab: compared 4,000 ops of 4 ranks in 62.5 s"


class TimedStream:
    """A stream that notes the clock's time of each line written to it."""

    def __init__(self, clock):
        self.clock, self.times = clock, []

    def write(self, text):
        self.times += [self.clock.now] * text.count("\n")

    def flush(self):
        pass


def test_after_a_stall_the_lines_stay_an_interval_apart(monkeypatch):
    """A comparison that stalls (a slow disk, a huge op) for three intervals prints one line when it
    goes on, not one per interval it missed: lines are never closer than INTERVAL."""
    monkeypatch.setattr(progress, "CHECK_EVERY", 1)
    clock = Clock()
    out = TimedStream(clock)
    observer = Progress(1, stream=out, clock=clock)
    _pairs(observer, clock, ranks=1, per_rank=700, seconds_per_pair=1 / 64)  # about 11 s
    clock.now += 3 * progress.INTERVAL  # the stall
    _pairs(observer, clock, ranks=1, per_rank=700, seconds_per_pair=1 / 64)
    gaps = [later - earlier for earlier, later in zip(out.times, out.times[1:])]
    assert len(out.times) >= 4 and min(gaps) >= progress.INTERVAL, out.times


def test_a_quick_comparison_prints_nothing(monkeypatch):
    monkeypatch.setattr(progress, "CHECK_EVERY", 1)
    clock, out = Clock(), io.StringIO()
    observer = Progress(2, stream=out, clock=clock)
    _pairs(observer, clock, ranks=2, per_rank=100, seconds_per_pair=0.001)
    observer.finished()
    assert out.getvalue() == ""


COMPARE_NOW = ("import sys; from nccl_migrate.ab import progress; progress.INTERVAL = 0.0; progress.CHECK_EVERY = 1; "
               "from nccl_migrate.cli import main; sys.exit(main(sys.argv[1:]))")


def test_progress_goes_to_stderr_never_into_the_json_report_and_quiet_silences_it(tmp_path):
    a, b = _side(tmp_path / "a", ops_per_rank=5), _side(tmp_path / "b", ops_per_rank=5)
    for quiet in ([], ["--quiet"]):
        done = subprocess.run([sys.executable, "-c", COMPARE_NOW, "ab", "compare", str(a), str(b), "--format", "json",
                               *quiet], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["ops_compared"] == 10  # stdout is the report alone
        progress_lines = [line for line in done.stderr.splitlines() if "nccl-migrate ab: compar" in line]
        if quiet:
            assert progress_lines == []
        else:
            assert len(progress_lines) == 11 and progress_lines[-1].startswith("nccl-migrate ab: compared 10 ops")


class FlushCountingStream(io.StringIO):
    def __init__(self):
        super().__init__()
        self.flushed_lines = []

    def flush(self):
        self.flushed_lines.append(self.getvalue().count("\n"))
        super().flush()


def test_each_line_is_flushed_as_written_and_the_rate_and_time_count_from_the_start(monkeypatch):
    """A log read while the comparison runs shows each line at once (stderr may be a pipe or a
    file, buffered), and a monotonic clock that does not start at zero changes neither the rate
    nor the elapsed time, however short the interval."""
    monkeypatch.setattr(progress, "CHECK_EVERY", 1)
    monkeypatch.setattr(progress, "INTERVAL", 0.25)
    clock, out = Clock(), FlushCountingStream()
    clock.now = 1000.0
    observer = Progress(1, stream=out, clock=clock)
    _pairs(observer, clock, ranks=1, per_rank=20, seconds_per_pair=1 / 64)  # 0.3125 s
    observer.finished()
    assert out.getvalue().splitlines() == ["nccl-migrate ab: comparing: 16 ops, rank 0 (1 of 1), 64 ops/s",
                                           "nccl-migrate ab: compared 20 ops of 1 ranks in 0.3 s"]
    assert out.flushed_lines == [1, 2]
