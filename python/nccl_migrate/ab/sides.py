"""Reads back what one side recorded: each rank's ops (rank{R}.jsonl), its process facts
(rank{R}.meta.json) and, when the toolkit served it, its communicators (report_{R}.json)."""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field

from ..record_files import SECOND_WRITER, second_writer_message

Key = tuple[int, str, int]  # (rank, group, sequence number)


@dataclass
class SideData:
    directory: str
    ops: dict[Key, dict] = field(default_factory=dict)
    metas: dict[int, dict] = field(default_factory=dict)
    reports: dict[int, dict] = field(default_factory=dict)

    def ranks(self) -> list[int]:
        return sorted({key[0] for key in self.ops})

    def records(self, rank: int) -> list[dict]:
        """One rank's records in issue order."""
        return sorted((e for key, e in self.ops.items() if key[0] == rank), key=lambda e: (e["t"], e["seq"]))

    def tensors(self, entry: dict):
        """The kept tensors of one op ({"in": [...], "out": [...]}), or None."""
        if "kept" not in entry:
            return None
        import torch

        return torch.load(os.path.join(self.directory, "tensors", entry["kept"]))


class RecordError(ValueError):
    """A side's records cannot be read as written: names the file, the line and how to go on."""


# What every op record holds, with its type: a record without them was not written by the recorder.
REQUIRED = {"rank": int, "group": str, "seq": int, "op": str, "t": (int, float), "in_shapes": list,
            "out_shapes": list}


def _json(path: str):
    try:
        with open(path) as f:
            return json.load(f)
    except ValueError as error:
        raise RecordError(f"{path}: not valid JSON ({error}); the file was cut short or garbled") from None


def _rank_of(path: str, prefix: str, suffix: str) -> int | None:
    middle = os.path.basename(path)[len(prefix):-len(suffix)]
    return int(middle) if middle.isdigit() else None


def _check_second_writers(directory: str) -> None:
    markers = sorted(glob.glob(os.path.join(directory, f"*{SECOND_WRITER}*")))
    if markers:
        found = _json(markers[0])
        raise RecordError(f"{directory}: {second_writer_message(found['rank'], found['path'])} "
                          f"(pid {found['pid']} on {found['host']} found it taken; {len(markers)} such file(s))")


def _bad(path: str, number: int, what: str) -> RecordError:
    return RecordError(f"{path}, line {number}: {what}; the record is damaged (a process killed while writing, "
                       "or two processes writing one file); rerun the side")


def read_records(path: str):
    """Yields (line number, record) from one rank's JSONL file, checking each record."""
    rank = _rank_of(path, "rank", ".jsonl")
    with open(path, errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.endswith("\n"):
                raise _bad(path, number, "the last record is cut short")
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError as error:
                raise _bad(path, number, f"not a JSON record ({error})") from None
            if not isinstance(entry, dict):
                raise _bad(path, number, "not a JSON object")
            for key, kind in REQUIRED.items():
                if not isinstance(entry.get(key), kind) or isinstance(entry.get(key), bool):
                    raise _bad(path, number, f"field {key!r} is missing or not {getattr(kind, '__name__', 'a number')}")
            if entry["rank"] != rank:
                raise _bad(path, number, f"a record of rank {entry['rank']} in rank {rank}'s file")
            yield number, entry


def load(directory: str) -> SideData:
    """Every record of a side; RecordError naming the file and line of the first bad one."""
    if not os.path.isdir(directory):
        raise RecordError(f"{directory}: no such directory of records")
    _check_second_writers(directory)
    data = SideData(directory)
    for path in glob.glob(os.path.join(directory, "rank*.meta.json")):
        meta = _json(path)
        if not isinstance(meta, dict) or not isinstance(meta.get("rank"), int):
            raise RecordError(f"{path}: no rank in it; not a record of nccl-migrate ab")
        data.metas[meta["rank"]] = meta
    for path in sorted(glob.glob(os.path.join(directory, "rank*.jsonl"))):
        lines: dict[Key, int] = {}
        for number, entry in read_records(path):
            key = (entry["rank"], entry["group"], entry["seq"])
            if key in lines:
                raise _bad(path, number, f"group {key[1]} seq {key[2]} recorded twice (first on line {lines[key]})")
            lines[key] = number
            data.ops[key] = entry
    for path in glob.glob(os.path.join(directory, "report_*.json")):
        rank = _rank_of(path, "report_", ".json")
        if rank is not None:
            data.reports[rank] = _json(path)
    return data


RECORD_PATTERNS = ("rank*.jsonl", "rank*.meta.json", "report_*.json", f"*{SECOND_WRITER}*", "side.*.json",
                   "tensors/*.pt")


def clear(directory: str) -> list[str]:
    """Removes an earlier run's records from ``directory`` (each rank's files are claimed once per
    run); returns what it removed."""
    removed = [path for pattern in RECORD_PATTERNS for path in glob.glob(os.path.join(directory, pattern))]
    for path in removed:
        os.unlink(path)
    return removed


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
