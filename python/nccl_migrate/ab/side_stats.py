"""What the report tells of each side's ops, gathered while the comparison streams them, in memory
that does not grow with the job: op counts, latency percentiles per op type (from a uniform sample
of at most SAMPLE latencies per type, exact below that; each only from enough samples to mean
something, MIN_SAMPLES), and rank 0's latencies in issue order, thinned to at most POINTS."""

from __future__ import annotations

import random
from collections import Counter

SAMPLE = 20_000
POINTS = 2_000

# The fewest latencies each percentile is given from. pQ is the latency that a fraction 1 - Q of
# ops exceed: n ops hold, on average, n * (1 - Q) ops of that tail, and with fewer than one there
# is nothing of the tail in the sample: a "p99" of 6 ops is merely their slowest (often a side's
# first op, which set up its communicator). So pQ needs n >= 1 / (1 - Q): p50 2, p90 10, p99 100.
# With fewer, the percentile is left out (the count, always given, says why), never replaced by a
# value it is not.
MIN_SAMPLES = {"p50": 2, "p90": 10, "p99": 100}
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency_summary(values: list[float], count: int) -> dict[str, float | int]:
    """``count`` ops, and the percentiles of their (sampled) latencies ``values`` that so many
    samples give."""
    summary: dict[str, float | int] = {"count": count}
    for name, q in QUANTILES.items():
        if len(values) >= MIN_SAMPLES[name]:
            summary[name] = round(percentile(values, q), 3)
    return summary


class _Reservoir:
    """A uniform sample of a stream (Vitter's algorithm R), seeded so reports are reproducible."""

    def __init__(self, size: int):
        self.size, self.seen, self.values = size, 0, []
        self.random = random.Random(0)

    def add(self, value: float) -> None:
        self.seen += 1
        if len(self.values) < self.size:
            self.values.append(value)
        else:
            slot = self.random.randrange(self.seen)
            if slot < self.size:
                self.values[slot] = value


class _Series:
    """Values in order, every step-th kept; the step doubles whenever POINTS are held."""

    def __init__(self):
        self.points, self.step, self.count = [], 1, 0

    def add(self, value: float) -> None:
        if self.count % self.step == 0:
            self.points.append(value)
            if len(self.points) >= POINTS:
                self.points, self.step = self.points[::2], self.step * 2
        self.count += 1


class SideStats:
    """An observer of the comparison (compare.compare's ``observers``) for both sides."""

    def __init__(self):
        self.counts = {"a": Counter(), "b": Counter()}
        self.latency: dict[str, dict[str, _Reservoir]] = {"a": {}, "b": {}}
        self.rank0 = {"a": _Series(), "b": _Series()}

    def seen(self, label: str, entry: dict) -> None:
        op = entry["op"]
        self.counts[label][op] += 1
        reservoir = self.latency[label].get(op)
        if reservoir is None:
            reservoir = self.latency[label][op] = _Reservoir(SAMPLE)
        reservoir.add(entry.get("ms") or 0.0)
        if entry["rank"] == 0:
            self.rank0[label].add(entry.get("ms") or 0.0)

    def paired(self, key, status: str) -> None:
        pass

    def classified(self, key, position: int, cls: str) -> None:
        pass

    def op_counts(self, label: str) -> dict[str, int]:
        return dict(sorted(self.counts[label].items()))

    def latency_ms(self, label: str) -> dict[str, dict[str, float | int]]:
        """Per op type: ``count`` (the ops seen) and each percentile its sample is large enough for
        (MIN_SAMPLES), in ms rounded to microseconds."""
        return {op: latency_summary(r.values, r.seen) for op, r in sorted(self.latency[label].items())}

    def rank0_series(self, label: str) -> list[float]:
        return self.rank0[label].points
