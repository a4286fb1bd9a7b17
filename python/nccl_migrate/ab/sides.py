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
