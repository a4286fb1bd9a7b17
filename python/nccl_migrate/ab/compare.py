"""Aligns two sides' ops by (rank, group, sequence number), never by time or by communicator
layout, and decides for each op: identical, equal within tolerance, divergent, or missing on one
side. Each divergent op is classified by what differed going in:

- backend-dependent path: some rank issued a different call there on each side (another op,
  shape, dtype, reduce op or peer: the job took another path under the other behaviour, a branch
  on the backend's type or name), and no rank whose input differed had differed before;
- backend: every rank's input to the op was identical on both sides; the outputs differ (a recv's
  input is its peer's send: both share one (group, seq), the p2p direction's, see op_table.channel;
  a batch of sends and recvs has its own sent tensors and the messages it received, each its
  sender's (channel, seq), for inputs);
- propagated: some rank's input differed, and that rank had a divergent op before it;
- job nondeterminism: some rank's input differed with no divergence before it on that rank and
  every rank issued the same call on both sides (the job's own inputs differ between runs: per-run
  ids pickled into object collectives, unseeded randomness);
- not compared: the op's digests cannot be compared (its tensors were on a CUDA device on one
  side and in host memory on the other) and no kept tensors tell its values apart.

An op equal within tolerance counts as an earlier difference on its rank: inputs differing after
it follow from it. The earliest divergence is the first by op order (its position among its rank's
ops), then the lowest rank: the same on every run of the same records.

One pass, rank by rank: each rank's two record streams are paired as they come, so only ops one
side has and the other has not yet reached are held (the window); the facts of ops that differ go
to disk (divergences.py) and are classified once every rank is read, so memory does not grow with
the number of divergences; observers see every record once (the report's statistics and plots)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .digest import GPU_PREFIX
from .divergences import CLASSES, Divergences
from .sides import Key, SideData

STATUSES = ("identical", "within_tolerance", "divergent", "missing_in_a", "missing_in_b")


@dataclass
class Comparison:
    tolerance: float
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))
    classes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLASSES, 0))
    divergences: list[dict] = field(default_factory=list)  # the first LISTED, earliest first
    samples: dict[str, list[dict]] = field(default_factory=dict)  # per class, the first SAMPLED
    object_collectives: dict[str, int] = field(default_factory=dict)  # divergent ops inside them, by function
    first_missing: dict | None = None
    first_different_call: dict | None = None  # the earliest op whose call differs, with both calls

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
    def path_differs(self) -> bool:
        """The job took another path under the other behaviour: a divergence whose cause is a
        different call on each side."""
        return self.classes["backend_dependent_path"] > 0

    @property
    def job_nondeterminism_only(self) -> bool:
        """Every divergence traces back to inputs the job itself made differ (with the same calls on
        both sides), and no op is missing."""
        return (self.counts["divergent"] > 0 and not self.backend_implicated and self.classes["job_nondeterminism"] > 0
                and not self.path_differs and self.classes["not_compared"] == 0
                and self.counts["missing_in_a"] == self.counts["missing_in_b"] == 0)


def _worst(errors: torch.Tensor) -> float:
    """The largest of some errors, any NaN among them (an infinity divided by one) unbounded."""
    return errors.nan_to_num(nan=math.inf, posinf=math.inf).max().item()


def errors_between(x: list[torch.Tensor], y: list[torch.Tensor]) -> tuple[float, float, float]:
    """Max absolute error, max relative error, and the smallest tolerance that accepts them
    (|a - b| <= tolerance * max(1, |a|) element-wise). Equal values agree, infinities included; a
    NaN agrees with nothing, and an infinity with nothing but itself: their error is unbounded."""
    worst_abs = worst_rel = needed = 0.0
    for a, b in zip(x, y):
        if a.shape != b.shape:
            return math.inf, math.inf, math.inf
        a, b = a.double(), b.double()
        diff = torch.where(a == b, 0.0, (a - b).abs().nan_to_num(nan=math.inf, posinf=math.inf))
        if not diff.numel():
            continue
        worst_abs = max(worst_abs, diff.max().item())
        worst_rel = max(worst_rel, _worst(diff / a.abs().clamp_min(torch.finfo(torch.float64).tiny)))
        needed = max(needed, _worst(diff / a.abs().clamp_min(1.0)))
    return worst_abs, worst_rel, needed


def _describe(key: Key, entry: dict) -> dict:
    shapes = entry["out_shapes"] or entry["in_shapes"]
    return {"rank": key[0], "group": key[1], "seq": key[2], "op": entry["op"], "dtype": entry["dtype"],
            "shape": shapes[0] if len(shapes) == 1 else shapes, "reduce_op": entry.get("reduce_op"),
            "peer": entry.get("peer")}


def _same_call(a: dict, b: dict) -> bool:
    return all(a.get(k) == b.get(k) for k in ("op", "dtype", "in_shapes", "out_shapes", "reduce_op", "peer"))


# The word before a peer's rank: to the rank an op sends to or reduces on; from the one it gets from.
_TOWARDS = ("send", "isend", "reduce", "gather")


def _tensors(shapes: list) -> str:
    """Shapes in plain words: one shape as itself, several as a list, with their elements."""
    elements = sum(math.prod(shape) for shape in shapes)
    return f"{shapes[0] if len(shapes) == 1 else shapes} ({elements} elements)"


def call_words(entry: dict) -> str:
    """A call as the job issued it, in plain words: ``all_reduce SUM of float32 [16, 8] (128
    elements)``, ``all_gather_into_tensor of float32 [4] (4 elements) into [8] (8 elements)``,
    ``send of int64 [2] (2 elements) to rank 1``."""
    words = entry["op"] + (f" {entry['reduce_op']}" if entry.get("reduce_op") else "")
    ins, outs = entry["in_shapes"], entry["out_shapes"]
    if ins or outs:
        words += f" of {entry['dtype']} " + _tensors(ins or outs)
        if ins and outs and ins != outs:
            words += " into " + _tensors(outs)
    if entry.get("peer") is not None:
        words += f" {'to' if entry['op'] in _TOWARDS else 'from'} rank {entry['peer']}"
    return words


def _hashed_on_gpu(entry: dict) -> bool:
    return any(str(entry.get(side)).startswith(GPU_PREFIX) for side in ("in", "out"))  # a digest, or None


def _judge(a: dict, b: dict, side_a: SideData, side_b: SideData, tolerance: float) -> tuple[str, dict]:
    if not _same_call(a, b):
        return "divergent", {"calls": {"a": call_words(a), "b": call_words(b)},
                             "reason": f"a different call: {a['op']} {a['out_shapes'] or a['in_shapes']} on side a, "
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


def compare(a, b, tolerance: float = 0.0, observers=()) -> Comparison:
    """Compares two sides (SideData, or records streamed from their directories); ``observers``
    see each record (``seen(label, entry)``), each paired op (``paired(key, status)``) and, once
    every rank is read, each divergent op's class (``classified(key, position, class)``, position:
    its index among its rank's paired ops)."""
    result = Comparison(tolerance)
    divergences = Divergences()
    try:
        result.first_missing = _pair_all(a, b, tolerance, observers, result, divergences)
        classified = divergences.conclude()
        result.classes = classified.counts()
        result.object_collectives = classified.object_collectives()
        result.divergences = classified.earliest()
        result.samples = classified.samples()
        for key, position, cls in classified.each():
            for observer in observers:
                observer.classified(key, position, cls)
    finally:
        divergences.close()
    return result


def _pair_all(a, b, tolerance: float, observers, result: Comparison, divergences: Divergences) -> dict | None:
    """Pairs and judges every op, rank by rank; returns the first op missing on one side and notes
    the earliest op whose call differs in ``result``, each the earliest by op order, then rank."""
    first_missing = first_call = None
    for rank in sorted(set(a.ranks()) | set(b.ranks())):
        for position, (key, ea, eb) in enumerate(pairs(a.records(rank), b.records(rank))):
            for label, entry in (("a", ea), ("b", eb)):
                if entry is not None:
                    for observer in observers:
                        observer.seen(label, entry)
            if ea is None or eb is None:
                status = "missing_in_a" if ea is None else "missing_in_b"
                present = ea or eb
                # By op order, then rank (ranks come in order: a tie keeps the lower), as the first
                # divergence: never by clock, which differs between runs and between hosts.
                if first_missing is None or position < first_missing[0]:
                    first_missing = (position, dict(_describe(key, present), missing_on="a" if ea is None else "b"))
            else:
                status, description = _judged(key, ea, eb, a, b, tolerance, position, divergences)
                if "calls" in description and (first_call is None or position < first_call[0]):
                    first_call = (position, description)  # ranks come in order: a tie keeps the lower
            result.counts[status] += 1
            for observer in observers:
                observer.paired(key, status)
    result.first_different_call = first_call[1] if first_call else None
    return first_missing[1] if first_missing else None


def _judged(key, ea: dict, eb: dict, a, b, tolerance: float, position: int,
            divergences: Divergences) -> tuple[str, dict]:
    """One op present on both sides: its status, and what the classification needs of it; the
    description of a divergent op (empty for any other)."""
    status, facts = _judge(ea, eb, a, b, tolerance)
    path = "calls" in facts  # a different call: what it moved differs whatever the digests say
    if path or _hashed_on_gpu(ea) == _hashed_on_gpu(eb):
        inputs_differed = path or ea.get("in") != eb.get("in")
    else:
        inputs_differed = facts.pop("inputs_differed", None)
    if inputs_differed:
        divergences.input_differed(key, ea["t"], path)
        for channel, seq in sent_messages(ea):  # a batch's sends are its receivers' inputs
            divergences.input_differed((key[0], channel, seq), ea["t"], path)
    if status == "within_tolerance":
        divergences.differed_before(key[0], ea["t"])
    description = {}
    if status == "divergent":
        description = dict(_describe(key, ea), **facts)
        if ea.get("object_collective"):
            description["object_collective"] = ea["object_collective"]
        divergences.add(key, ea["t"], position, description, not_compared=inputs_differed is None,
                        received=received_messages(ea))
    return status, description


def sent_messages(entry: dict) -> list[tuple[str, int]]:
    """The (channel, seq) of each message a batch of sends and recvs sent (none for other ops)."""
    return [(channel, seq) for kind, channel, seq in entry.get("messages", ()) if kind == "send"]


def received_messages(entry: dict) -> list[tuple[str, int]]:
    """The (channel, seq) of each message a batch of sends and recvs received: its senders' inputs."""
    return [(channel, seq) for kind, channel, seq in entry.get("messages", ()) if kind == "recv"]
