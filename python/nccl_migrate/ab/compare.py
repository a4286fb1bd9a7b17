"""Aligns two sides' ops by (rank, group, sequence number), never by time or by communicator
layout, and decides for each op: identical, equal within tolerance, divergent, or missing on one
side. Each divergent op is classified by what differed going in:

- backend: every rank's input to the op was identical on both sides; the outputs differ (a recv's
  input is its peer's send: both share one (group, seq), the p2p direction's, see op_table.channel);
- propagated: some rank's input differed, and that rank had a divergent op before it;
- job nondeterminism: some rank's input differed with no divergence before it on that rank (the
  job's own inputs differ between runs: per-run ids pickled into object collectives, unseeded
  randomness);
- not compared: the op's digests cannot be compared (its tensors were on a CUDA device on one
  side and in host memory on the other) and no kept tensors tell its values apart.

An op equal within tolerance counts as an earlier difference on its rank: inputs differing after
it follow from it.

One pass, rank by rank: each rank's two record streams are paired as they come, so only ops one
side has and the other has not yet reached are held (the window), with compact facts of ops that
differ; observers see every record once (the report's statistics and plots)."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import torch

from .digest import GPU_PREFIX
from .sides import Key, SideData

STATUSES = ("identical", "within_tolerance", "divergent", "missing_in_a", "missing_in_b")
CLASSES = ("backend", "propagated", "job_nondeterminism", "not_compared")
CAUSES = {"backend": "only outputs differ (the backends computed differently)",
          "propagated": "inputs already differed (an earlier op diverged)",
          "job_nondeterminism": "inputs already differed (the job's own inputs differ between runs, with no "
                                "divergence before)",
          "not_compared": "values not compared (device digests on one side, host digests on the other)"}
LISTED = 100  # divergences listed in full, earliest first; all are counted


@dataclass
class Comparison:
    tolerance: float
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))
    classes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLASSES, 0))
    divergences: list[dict] = field(default_factory=list)  # the first LISTED, earliest first
    object_collectives: dict[str, int] = field(default_factory=dict)  # divergent ops inside them, by function
    first_missing: dict | None = None
    classified: dict[Key, str] = field(default_factory=dict)  # each divergent op's class

    @property
    def first_divergence(self) -> dict | None:
        return self.divergences[0] if self.divergences else None

    @property
    def compared(self) -> int:
        return sum(self.counts.values())

    @property
    def identical(self) -> bool:
        return self.counts["divergent"] == 0 and self.counts["missing_in_a"] == 0 and self.counts["missing_in_b"] == 0

    @property
    def backend_implicated(self) -> bool:
        return self.classes["backend"] > 0

    @property
    def job_nondeterminism_only(self) -> bool:
        """Every divergence traces back to inputs the job itself made differ, and no op is missing."""
        return (self.counts["divergent"] > 0 and not self.backend_implicated and self.classes["job_nondeterminism"] > 0
                and self.classes["not_compared"] == 0 and self.counts["missing_in_a"] == self.counts["missing_in_b"] == 0)


def errors_between(x: list[torch.Tensor], y: list[torch.Tensor]) -> tuple[float, float, float]:
    """Max absolute error, max relative error, and the smallest tolerance that accepts them
    (|a - b| <= tolerance * max(1, |a|) element-wise)."""
    worst_abs = worst_rel = needed = 0.0
    for a, b in zip(x, y):
        if a.shape != b.shape:
            return float("inf"), float("inf"), float("inf")
        a, b = a.double(), b.double()
        diff = (a - b).abs().nan_to_num(nan=float("inf"))
        if not diff.numel():
            continue
        worst_abs = max(worst_abs, diff.max().item())
        worst_rel = max(worst_rel, (diff / a.abs().clamp_min(torch.finfo(torch.float64).tiny)).max().item())
        needed = max(needed, (diff / a.abs().clamp_min(1.0)).max().item())
    return worst_abs, worst_rel, needed


def _describe(key: Key, entry: dict) -> dict:
    shapes = entry["out_shapes"] or entry["in_shapes"]
    return {"rank": key[0], "group": key[1], "seq": key[2], "op": entry["op"], "dtype": entry["dtype"],
            "shape": shapes[0] if len(shapes) == 1 else shapes, "reduce_op": entry.get("reduce_op"),
            "peer": entry.get("peer")}


def _same_call(a: dict, b: dict) -> bool:
    return all(a.get(k) == b.get(k) for k in ("op", "dtype", "in_shapes", "out_shapes", "reduce_op", "peer"))


def _hashed_on_gpu(entry: dict) -> bool:
    return any((entry.get(side) or "").startswith(GPU_PREFIX) for side in ("in", "out"))


def _judge(a: dict, b: dict, side_a: SideData, side_b: SideData, tolerance: float) -> tuple[str, dict]:
    if not _same_call(a, b):
        return "divergent", {"reason": f"a different call: {a['op']} {a['out_shapes'] or a['in_shapes']} on side a, "
                                       f"{b['op']} {b['out_shapes'] or b['in_shapes']} on side b"}
    if "error" in a or "error" in b or a.get("unfinished") or b.get("unfinished"):
        return "divergent", {"reason": f"side a: {a.get('error', 'ok')}; side b: {b.get('error', 'ok')}"}
    if a.get("digests_unfinished") or b.get("digests_unfinished"):
        return "divergent", {"reason": "a GPU digest was never computed (its stream did not get there before the "
                                       f"rank exited): side a lacks {a.get('digests_unfinished', [])}, "
                                       f"side b lacks {b.get('digests_unfinished', [])}"}
    if a["in"] == b["in"] and a["out"] == b["out"]:
        return "identical", {}
    if "measured" in b:  # a shadow run measured the errors live, on the whole tensors
        m = b["measured"]
        facts = {"max_abs_error": m["max_abs_error"], "max_rel_error": m["max_rel_error"]}
        return ("within_tolerance" if tolerance > 0 and m["needed"] <= tolerance else "divergent"), facts
    kept_a, kept_b = side_a.tensors(a), side_b.tensors(b)
    if kept_a is None or kept_b is None:
        reason = "digests differ; error unknown (rerun with --keep-tensors to measure it)"
        if _hashed_on_gpu(a) != _hashed_on_gpu(b):
            reason = ("the op's tensors were on a CUDA device on one side and in host memory on the other (the job "
                      "places them by backend), so their digests cannot match; rerun with --keep-tensors to compare values")
        return "divergent", {"max_abs_error": None, "max_rel_error": None, "reason": reason}
    abs_err, rel_err, needed = errors_between(kept_a["in"] + kept_a["out"], kept_b["in"] + kept_b["out"])
    facts = {"max_abs_error": abs_err, "max_rel_error": rel_err}
    if _hashed_on_gpu(a) != _hashed_on_gpu(b):  # the digests say nothing: the kept inputs do
        facts["inputs_differed"] = errors_between(kept_a["in"], kept_b["in"])[0] != 0
    return ("within_tolerance" if tolerance > 0 and needed <= tolerance else "divergent"), facts


def pairs(records_a, records_b):
    """(key, entry a, entry b) for one rank's two record streams, each op once as soon as both
    sides have it (None on the side that never does), holding only the ops in between."""
    waiting: tuple[dict, dict] = ({}, {})
    streams = [iter(records_a), iter(records_b)]
    live = [True, True]
    while any(live):
        for side in (0, 1):
            if not live[side]:
                continue
            entry = next(streams[side], None)
            if entry is None:
                live[side] = False
                continue
            key = (entry["rank"], entry["group"], entry["seq"])
            other = waiting[1 - side].pop(key, None)
            if other is None:
                waiting[side][key] = entry
            else:
                yield (key, entry, other) if side == 0 else (key, other, entry)
    for key, entry in waiting[0].items():
        yield key, entry, None
    for key, entry in waiting[1].items():
        yield key, None, entry


class _Divergences:
    """Compact facts of the ops that differ, enough to classify them all once every rank is seen;
    full descriptions only for the LISTED earliest."""

    def __init__(self):
        self.ops: list[tuple[float, Key, str | None]] = []  # (issue time, key, object collective)
        self.earliest: list = []  # a max-heap by time of the LISTED earliest descriptions
        self.inputs_differed: dict[tuple[str, int], dict[int, float]] = {}  # (group, seq) -> {rank: time}
        self.first_on_rank: dict[int, float] = {}
        self.not_compared: set[Key] = set()  # digests from a device on one side, the host on the other

    def differed_before(self, rank: int, t: float) -> None:
        """An op of ``rank`` at ``t`` differed (divergent or within tolerance): later inputs of that
        rank that differ may follow from it."""
        self.first_on_rank[rank] = min(t, self.first_on_rank.get(rank, math.inf))

    def input_differed(self, key: Key, t: float) -> None:
        self.inputs_differed.setdefault(key[1:], {})[key[0]] = t

    def add(self, key: Key, t: float, description) -> None:
        self.ops.append((t, key, description.get("object_collective") if isinstance(description, dict) else None))
        self.differed_before(key[0], t)
        item = (-t, -key[2], key, description)
        if len(self.earliest) < LISTED:
            heapq.heappush(self.earliest, item)
        elif item > self.earliest[0]:
            heapq.heapreplace(self.earliest, item)

    def class_of(self, key: Key) -> str:
        if key in self.not_compared:
            return "not_compared"
        differed = self.inputs_differed.get(key[1:], {})
        if not differed:
            return "backend"
        if any(self.first_on_rank.get(rank, math.inf) < t for rank, t in differed.items()):
            return "propagated"
        return "job_nondeterminism"

    def conclude(self, result: Comparison) -> None:
        for _, key, collective in self.ops:
            cls = result.classified[key] = self.class_of(key)
            result.classes[cls] += 1
            if collective:
                result.object_collectives[collective] = result.object_collectives.get(collective, 0) + 1
        listed = sorted(self.earliest, key=lambda item: (-item[0], -item[1], item[2]))
        for _, _, key, description in listed:
            cls = result.classified[key]
            description.update({"class": cls}, cause=CAUSES[cls],
                               inputs_differed_on_ranks=sorted(self.inputs_differed.get(key[1:], {})))
            result.divergences.append(description)


def compare(a, b, tolerance: float = 0.0, observers=()) -> Comparison:
    """Compares two sides (SideData, or records streamed from their directories); ``observers``
    see each record (``seen(label, entry)``) and each paired op (``paired(key, status)``)."""
    result = Comparison(tolerance)
    divergences = _Divergences()
    first_missing = None
    for rank in sorted(set(a.ranks()) | set(b.ranks())):
        for key, ea, eb in pairs(a.records(rank), b.records(rank)):
            for label, entry in (("a", ea), ("b", eb)):
                if entry is not None:
                    for observer in observers:
                        observer.seen(label, entry)
            if ea is None or eb is None:
                status = "missing_in_a" if ea is None else "missing_in_b"
                present = ea or eb
                if first_missing is None or (present["t"], key[2]) < first_missing[0]:
                    first_missing = ((present["t"], key[2]), dict(_describe(key, present),
                                                                   missing_on="a" if ea is None else "b"))
            else:
                status, facts = _judge(ea, eb, a, b, tolerance)
                comparable = _hashed_on_gpu(ea) == _hashed_on_gpu(eb)
                inputs_differed = ea.get("in") != eb.get("in") if comparable else facts.pop("inputs_differed", None)
                if inputs_differed:
                    divergences.input_differed(key, ea["t"])
                if status == "within_tolerance":
                    divergences.differed_before(key[0], ea["t"])
                if status == "divergent" and inputs_differed is None:
                    divergences.not_compared.add(key)
                if status == "divergent":
                    description = dict(_describe(key, ea), **facts)
                    if ea.get("object_collective"):
                        description["object_collective"] = ea["object_collective"]
                    divergences.add(key, ea["t"], description)
            result.counts[status] += 1
            for observer in observers:
                observer.paired(key, status)
    divergences.conclude(result)
    result.first_missing = first_missing[1] if first_missing else None
    return result
