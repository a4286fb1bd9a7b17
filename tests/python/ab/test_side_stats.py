"""Each side's op counts, latency percentiles and rank 0's latency series, gathered in bounded
memory while the comparison streams the records."""

from nccl_migrate.ab import side_stats
from nccl_migrate.ab.side_stats import (
    MIN_SAMPLES,
    SideStats,
    _Reservoir,
    _Series,
    percentile,
)


def test_percentiles_pick_the_nearest_rank_of_the_sorted_values():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert [percentile(values, q) for q in (0.0, 0.5, 0.6, 0.9, 0.99, 1.0)] == [1.0, 3.0, 3.0, 5.0, 5.0, 5.0]
    assert percentile(list(range(11)), 0.3) == 3 and percentile(list(range(11)), 0.26) == 3
    assert percentile([7.0], 0.99) == 7.0
    assert percentile(values, 1.5) == 5.0  # past the end: the largest


def test_a_reservoir_keeps_every_value_until_full_then_a_reproducible_uniform_sample():
    small = _Reservoir(3)
    for v in (1.0, 2.0, 3.0):
        small.add(v)
    assert small.values == [1.0, 2.0, 3.0] and small.seen == 3
    first, second = _Reservoir(100), _Reservoir(100)
    for v in range(10_000):
        first.add(float(v))
        second.add(float(v))
    assert len(first.values) == 100 and first.seen == 10_000
    assert first.values == second.values  # seeded: two reports of one run agree
    # ... and two runs of one job, by this version or another: the sample is fixed by the stream.
    known = _Reservoir(10)
    for v in range(1000):
        known.add(float(v))
    assert known.values == [819.0, 785.0, 2.0, 930.0, 506.0, 179.0, 925.0, 790.0, 746.0, 329.0]
    # Uniform over the whole stream, not the first hundred kept: about half from each half.
    late = sum(v >= 5000 for v in first.values)
    assert 30 <= late <= 70 and max(first.values) > 9000


def test_a_series_keeps_every_step_th_value_and_doubles_the_step_when_full(monkeypatch):
    monkeypatch.setattr(side_stats, "POINTS", 4)
    series = _Series()
    for v in range(10):
        series.add(float(v))
    assert series.points == [0.0, 4.0, 8.0] and series.step == 4 and series.count == 10
    short = _Series()
    for v in range(3):
        short.add(float(v))
    assert short.points == [0.0, 1.0, 2.0] and short.step == 1
    full = _Series()
    for v in range(4):
        full.add(float(v))
    assert full.points == [0.0, 2.0] and full.step == 2  # thinned as soon as POINTS are held


def test_counts_latencies_and_rank0_series_per_side():
    stats = SideStats()
    for rank, op, ms in ((0, "all_reduce", 1.0), (1, "all_reduce", 3.0), (0, "broadcast", None), (0, "all_reduce", 2.0)):
        stats.seen("a", {"rank": rank, "op": op, "ms": ms})
    stats.seen("b", {"rank": 1, "op": "send", "ms": 0.5})
    stats.paired((0, "0", 0), "identical")
    stats.classified((0, "0", 0), 0, "backend")
    assert stats.op_counts("a") == {"all_reduce": 3, "broadcast": 1}
    assert list(stats.op_counts("a")) == ["all_reduce", "broadcast"]
    assert stats.op_counts("b") == {"send": 1}
    assert stats.latency_ms("a") == {"all_reduce": {"count": 3, "p50": 2.0}, "broadcast": {"count": 1}}
    assert stats.rank0_series("a") == [1.0, 0.0, 2.0]  # a record without a time counts as 0 ms
    assert stats.rank0_series("b") == []


def test_latencies_are_rounded_to_microseconds_and_sorted_by_op():
    stats = SideStats()
    stats.seen("a", {"rank": 0, "op": "send", "ms": 1.23456})
    stats.seen("a", {"rank": 0, "op": "barrier", "ms": 0.0004})
    assert list(stats.latency_ms("a")) == ["barrier", "send"]
    stats.seen("a", {"rank": 1, "op": "send", "ms": 1.23456})
    stats.seen("a", {"rank": 1, "op": "barrier", "ms": 0.0004})
    assert stats.latency_ms("a")["send"] == {"count": 2, "p50": 1.235}
    assert stats.latency_ms("a")["barrier"]["p50"] == 0.0


def test_each_percentile_is_its_own_rank_of_the_latencies():
    stats = SideStats()
    for ms in range(101):
        stats.seen("a", {"rank": 1, "op": "all_reduce", "ms": float(ms)})
    assert stats.latency_ms("a") == {"all_reduce": {"count": 101, "p50": 50.0, "p90": 90.0, "p99": 99.0}}


def test_a_percentile_is_given_only_from_as_many_ops_as_it_needs():
    """pQ needs 1 / (1 - Q) ops (side_stats.MIN_SAMPLES): a p99 of 6 ops would be their slowest."""
    assert MIN_SAMPLES == {"p50": 2, "p90": 10, "p99": 100}
    given = {}
    for count in (1, 2, 9, 10, 99, 100):
        stats = SideStats()
        for ms in range(count):
            stats.seen("a", {"rank": 0, "op": "all_reduce", "ms": float(ms)})
        given[count] = sorted(stats.latency_ms("a")["all_reduce"])
    assert given == {1: ["count"], 2: ["count", "p50"], 9: ["count", "p50"], 10: ["count", "p50", "p90"],
                     99: ["count", "p50", "p90"], 100: ["count", "p50", "p90", "p99"]}


def test_the_count_is_every_op_seen_while_percentiles_come_from_the_sample(monkeypatch):
    monkeypatch.setattr(side_stats, "SAMPLE", 50)
    stats = SideStats()
    for ms in range(500):
        stats.seen("a", {"rank": 0, "op": "all_reduce", "ms": float(ms)})
    summary = stats.latency_ms("a")["all_reduce"]
    assert summary["count"] == 500 and "p90" in summary and "p99" not in summary  # 50 samples: too few for a p99
