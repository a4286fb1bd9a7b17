"""Aligns two sides' ops by (rank, group, sequence number), never by time or by communicator
layout, and decides for each op: identical, equal within tolerance, divergent, or missing on one
side. The first divergence is classified: inputs already differed (earlier compute differs) or
only outputs differ (the backends computed differently)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .digest import GPU_PREFIX
from .sides import Key, SideData

STATUSES = ("identical", "within_tolerance", "divergent", "missing_in_a", "missing_in_b")


@dataclass
class Comparison:
    tolerance: float
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))
    first_divergence: dict | None = None
    first_missing: dict | None = None

    @property
    def compared(self) -> int:
        return sum(self.counts.values())

    @property
    def identical(self) -> bool:
        return self.counts["divergent"] == 0 and self.counts["missing_in_a"] == 0 and self.counts["missing_in_b"] == 0


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
    return ("within_tolerance" if tolerance > 0 and needed <= tolerance else "divergent"), facts


def _inputs_differed(a: SideData, b: SideData, group: str, seq: int) -> list[int]:
    """Ranks whose input to op (group, seq) already differed between the sides."""
    return sorted(rank for (rank, g, s), entry in a.ops.items()
                  if (g, s) == (group, seq) and (rank, g, s) in b.ops and entry["in"] != b.ops[(rank, g, s)]["in"])


def compare(a: SideData, b: SideData, tolerance: float = 0.0) -> Comparison:
    result = Comparison(tolerance)
    divergent: list[tuple[float, Key, dict]] = []
    missing: list[tuple[float, Key, dict]] = []
    for key in sorted(set(a.ops) | set(b.ops), key=lambda k: (k[0], k[1], k[2])):
        ea, eb = a.ops.get(key), b.ops.get(key)
        if ea is None or eb is None:
            status = "missing_in_a" if ea is None else "missing_in_b"
            present = ea or eb
            missing.append((present["t"], key, dict(_describe(key, present), missing_on="a" if ea is None else "b")))
        else:
            status, facts = _judge(ea, eb, a, b, tolerance)
            if status == "divergent":
                divergent.append((ea["t"], key, dict(_describe(key, ea), **facts)))
        result.counts[status] += 1
    if divergent:
        _, key, first = min(divergent, key=lambda d: (d[0], d[1][2]))
        ranks = _inputs_differed(a, b, key[1], key[2])
        first["inputs_differed_on_ranks"] = ranks
        first["cause"] = "inputs already differed (earlier compute differs)" if ranks else \
            "only outputs differ (the backends computed differently)"
        result.first_divergence = first
    if missing:
        result.first_missing = min(missing, key=lambda d: (d[0], d[1][2]))[2]
    return result
