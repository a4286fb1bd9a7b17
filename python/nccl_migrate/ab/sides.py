"""Reads back what one side recorded: each rank's ops (rank{R}.jsonl), its process facts
(rank{R}.meta.json) and, when the toolkit served it, its communicators (report_{R}.json)."""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field

Key = tuple[int, str, int]  # (rank, group, sequence number)


@dataclass
class SideData:
    directory: str
    ops: dict[Key, dict] = field(default_factory=dict)
    metas: dict[int, dict] = field(default_factory=dict)
    reports: dict[int, dict] = field(default_factory=dict)

    def tensors(self, entry: dict):
        """The kept tensors of one op ({"in": [...], "out": [...]}), or None."""
        if "kept" not in entry:
            return None
        import torch

        return torch.load(os.path.join(self.directory, "tensors", entry["kept"]))


def _json(path: str):
    with open(path) as f:
        return json.load(f)


def load(directory: str) -> SideData:
    data = SideData(directory)
    for path in glob.glob(os.path.join(directory, "rank*.meta.json")):
        meta = _json(path)
        data.metas[meta["rank"]] = meta
    for path in glob.glob(os.path.join(directory, "rank*.jsonl")):
        with open(path) as f:
            for line in f:
                if line.strip():
                    entry = json.loads(line)
                    data.ops[(entry["rank"], entry["group"], entry["seq"])] = entry
    for path in glob.glob(os.path.join(directory, "report_*.json")):
        rank = os.path.basename(path)[len("report_"):-len(".json")]
        if rank.isdigit():
            data.reports[int(rank)] = _json(path)
    return data


def missing_ranks(data: SideData) -> list[int]:
    """Ranks the job had but that wrote no record at exit (the recorder did not run there)."""
    world = max((m.get("world_size", 1) for m in data.metas.values()), default=1)
    return [r for r in range(world) if r not in data.metas] if data.metas else [0]


def shadow_sides(data: SideData) -> tuple[SideData, SideData, dict]:
    """A shadow run's records as two sides: a holds the primary's ops, b the same ops with the
    shadow's output digest, latency and measured errors. Ops without a shadow (issued from C++,
    or on a group created before the recorder) are left out of both and counted."""
    a, b = SideData(data.directory), SideData(data.directory)
    a.reports = b.reports = data.reports
    a.metas = data.metas
    b.metas = {rank: dict(meta, backend=meta.get("shadow_backend"),
                          backend_class="shadow groups", memory=[])
               for rank, meta in data.metas.items()}
    not_shadowed = {"count": 0, "first": None}
    for key, entry in sorted(data.ops.items(), key=lambda item: item[1]["t"]):
        shadow = entry.get("shadow")
        if not shadow or "skipped" in shadow:
            not_shadowed["count"] += 1
            if not_shadowed["first"] is None:
                why = shadow["skipped"] if shadow else "failed, or never completed, on the primary"
                not_shadowed["first"] = {"rank": key[0], "group": key[1], "seq": key[2], "op": entry["op"],
                                         "reason": why}
            continue
        a.ops[key] = {k: v for k, v in entry.items() if k != "shadow"}
        mirrored = dict(a.ops[key], out=shadow.get("out"), ms=shadow.get("ms") or 0.0)
        mirrored.pop("perturbed", None)
        mirrored.pop("kept", None)
        if "error" in shadow:
            mirrored["error"] = shadow["error"]
        if "measured" in shadow:
            mirrored["measured"] = shadow["measured"]
        b.ops[key] = mirrored
    return a, b, not_shadowed
