"""Reads back what one side recorded: each rank's ops (rank{R}.jsonl), streamed rank by rank and
checked record by record, its process facts (rank{R}.meta.json) and, when the toolkit served it,
its communicators (report_{R}.json). Only one rank's keys are held at a time (to catch an op
recorded twice), so reading a side costs memory for its largest rank, not for the job."""

from __future__ import annotations

import glob
import json
import os
import shutil
from dataclasses import dataclass, field

from ..record_files import ATTEMPT, SECOND_WRITER, last_attempt, second_writer_message
from ..run_files import DUMP_FOLDER, LOG_FOLDER

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
        """The kept tensors of one op ({"in": [...], "out": [...]}), or None; RecordError names a
        file that cannot be read."""
        if "kept" not in entry:
            return None
        import pickle

        import torch

        name = entry["kept"]
        if not isinstance(name, str) or os.path.basename(name) != name or name in ("", ".", ".."):
            raise RecordError(f"{self.directory}: rank {entry['rank']}, group {entry['group']}, seq {entry['seq']} "
                              f"names kept tensors {name!r}, not a file in tensors/; the record is damaged or was "
                              "not written by nccl-migrate ab: rerun the side")
        path = os.path.join(self.directory, "tensors", name)
        try:
            # Records may come from elsewhere: tensors and plain data only, whatever the environment
            # asks of torch.load's default (TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD turns it off).
            kept = torch.load(path, weights_only=True)
        except pickle.UnpicklingError as error:  # torch's restricted unpickler names what it refused
            lines = str(error).splitlines()
            refused = next((line.strip() for line in lines if "GLOBAL" in line or "Unsupported" in line), "")
            raise RecordError(f"{path}: cannot be read as kept tensors: torch.load(weights_only=True) refused it "
                              f"({refused or 'not a tensor file'}), and nothing in it was run; it was not written by "
                              f"nccl-migrate ab for rank {entry['rank']}, group {entry['group']}, seq {entry['seq']}, "
                              "or it was damaged or tampered with: rerun the side with --keep-tensors, or without it "
                              "to compare digests alone") from None
        except (OSError, RuntimeError, EOFError, ValueError) as error:
            raise RecordError(f"{path}: cannot be read ({type(error).__name__}: {str(error)[:200]}); it holds the kept "
                              f"tensors of rank {entry['rank']}, group {entry['group']}, seq {entry['seq']}; rerun "
                              "the side with --keep-tensors, or without it to compare digests alone") from None
        if not isinstance(kept, dict) or not isinstance(kept.get("in"), list) or not isinstance(kept.get("out"), list):
            raise RecordError(f"{path}: not kept tensors of nccl-migrate ab (rank {entry['rank']}, group "
                              f"{entry['group']}, seq {entry['seq']})")
        return kept


class RecordError(ValueError):
    """A side's records cannot be read as written: names the file, the line and how to go on."""


# What every op record holds, with its type: a record without them was not written by the recorder.
REQUIRED = {"rank": int, "group": str, "seq": int, "op": str, "t": (int, float), "in_shapes": list,
            "out_shapes": list}
PRESENT = {"in": str, "out": str, "dtype": str}  # null when the op has none, but never absent
META_REQUIRED = {"rank": int, "world_size": int, "peak_rss_kib": (int, float)}
REPORT_REQUIRED = {"communicators_created": list}


def _missing_field(document: dict, required: dict, nullable: dict = {}) -> str | None:  # noqa: B006 - read only
    """What a document lacks of its schema (``key`` of a type; ``nullable`` ones may be null), or None."""
    for key, kind in required.items():
        value = document.get(key)
        if not isinstance(value, kind) or value is True or value is False:
            return f"field {key!r} is missing or not {getattr(kind, '__name__', 'a number')}"
    for key, kind in nullable.items():
        if key not in document or not (document[key] is None or isinstance(document[key], kind)):
            return f"field {key!r} is missing or not {kind.__name__} or null"
    return None


def _json(path: str, required: dict | None = None):
    """A JSON document, an object with ``required`` fields when given; RecordError names the file."""
    try:
        with open(path) as f:
            document = json.load(f)
    except ValueError as error:
        raise RecordError(f"{path}: not valid JSON ({error}); the file was cut short or garbled") from None
    except OSError as error:
        raise RecordError(f"{path}: cannot be read ({error.strerror or error})") from None
    if required is not None:
        problem = _missing_field(document, required) if isinstance(document, dict) else "not a JSON object"
        if problem:
            raise RecordError(f"{path}: {problem}; not written by nccl-migrate (or damaged): remove it, or "
                              "rerun the side")
    return document


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


def read_records(path: str, accept_cut_end: bool = False):
    """Yields (line number, record) from one rank's JSONL file, checking each record. With
    ``accept_cut_end`` (a side whose rank was killed), a last line cut short ends the file there
    (the process was killed while writing it: the records before it are whole)."""
    rank = _rank_of(path, "rank", ".jsonl")
    with open(path, errors="replace") as f:
        for number, line in enumerate(f, 1):
            if not line.endswith("\n"):
                if accept_cut_end:
                    return
                raise _bad(path, number, "the last record is cut short")
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError as error:
                raise _bad(path, number, f"not a JSON record ({error})") from None
            if not isinstance(entry, dict):
                raise _bad(path, number, "not a JSON object")
            problem = _missing_field(entry, REQUIRED, PRESENT)
            if problem:
                raise _bad(path, number, problem)
            if entry["rank"] != rank:
                raise _bad(path, number, f"a record of rank {entry['rank']} in rank {rank}'s file")
            yield number, entry


MEMORY_RANKS = 8  # ranks whose memory samples the report plots (every rank's peak is kept)


class RecordedSide:
    """A side's records in its directory, streamed: ``records(rank)`` reads that rank's file as
    the comparison asks for it; ``transform`` turns each record into what this side compares
    (None: left out), for the two sides of one shadow run."""

    def __init__(self, directory: str, transform=None):
        self.directory, self.transform = directory, transform
        self.metas: dict[int, dict] = {}
        self.reports: dict[int, dict] = {}
        self.paths: dict[int, str] = {}
        self.attempt = 0  # torch's launcher restarted the workers this many times; earlier attempts are not read
        self.accept_cut_end = False  # the side failed: a rank killed while writing its last record

    def ranks(self) -> list[int]:
        return sorted(self.paths)

    def records(self, rank: int):
        path = self.paths.get(rank)
        if path is None:
            return
        lines: dict[tuple[str, int], int] = {}
        for number, entry in read_records(path, self.accept_cut_end):
            key = (entry["group"], entry["seq"])
            if key in lines:
                raise _bad(path, number, f"group {key[0]} seq {key[1]} recorded twice (first on line {lines[key]})")
            lines[key] = number
            if self.transform is not None:
                entry = self.transform(entry)
            if entry is not None:
                yield entry

    tensors = SideData.tensors


def load(directory: str) -> RecordedSide:
    """A side's records, to be streamed; its metas and reports read now. RecordError names the
    file (and line, while streaming) of the first bad one."""
    if not os.path.isdir(directory):
        raise RecordError(f"{directory}: no such directory of records")
    directory, attempt = last_attempt(directory)  # workers restarted: the last attempt is the run
    _check_second_writers(directory)
    data = RecordedSide(directory)
    data.attempt = attempt
    for path in glob.glob(os.path.join(directory, "rank*.meta.json")):
        meta = _json(path, META_REQUIRED)
        if meta["rank"] >= MEMORY_RANKS:
            meta["memory"] = []
        data.metas[meta["rank"]] = meta
    for path in glob.glob(os.path.join(directory, "rank*.jsonl")):
        rank = _rank_of(path, "rank", ".jsonl")
        if rank is not None:
            data.paths[rank] = path
    for path in glob.glob(os.path.join(directory, "report_*.json")):
        rank = _rank_of(path, "report_", ".json")
        if rank is not None:
            report = data.reports[rank] = _json(path, REPORT_REQUIRED)
            if not all(isinstance(c, dict) and "key" in c and "purpose" in c for c in report["communicators_created"]):
                raise RecordError(f"{path}: a communicator without its key or purpose; not written by nccl-migrate "
                                  "(or damaged): remove it, or rerun the side")
    return data


RECORD_PATTERNS = ("rank*.jsonl", "rank*.meta.json", "report_*.json", f"*{SECOND_WRITER}*", "side.*.json",
                   "tensors/*.pt")


def clear(directory: str) -> list[str]:
    """Removes an earlier run's records from ``directory`` (each rank's files are claimed once per
    run), and its flight-recorder dumps (the partial ones it left included) and torch's launcher's
    logs, so that what the side's fr/ and logs/ hold is this run's; returns what it removed."""
    removed = [path for pattern in RECORD_PATTERNS for path in glob.glob(os.path.join(directory, pattern))]
    for path in removed:
        os.unlink(path)
    folders = [*glob.glob(os.path.join(directory, f"{ATTEMPT}*")), os.path.join(directory, DUMP_FOLDER),
               os.path.join(directory, LOG_FOLDER)]
    for path in folders:  # restarted workers' records; the dumps; the logs
        if os.path.isdir(path):
            shutil.rmtree(path)
            removed.append(path)
    return removed


def incomplete_records(data: SideData) -> list[str]:
    """Why each rank whose records are incomplete is so (a write failed while the job ran: disk
    full, a file-size limit, the directory removed or read-only), as its meta says."""
    found = []
    for rank, meta in sorted(data.metas.items()):
        incomplete = meta.get("incomplete")
        if incomplete is None:
            continue
        facts = incomplete if isinstance(incomplete, dict) else {"error": str(incomplete)}
        found.append(f"rank {rank}'s records are incomplete: {facts.get('error')} "
                     f"({facts.get('records_written', '?')} record(s) written, {facts.get('records_dropped', '?')} "
                     f"dropped); free space or fix {data.directory}, then rerun the side")
    return found


def missing_ranks(data: SideData) -> list[int]:
    """Ranks the job had whose process facts (rank{R}.meta.json, written at exit) are missing."""
    world = max((m.get("world_size", 1) for m in data.metas.values()), default=1)
    recorded = set(getattr(data, "paths", {}))
    ranks = (set(range(world)) if data.metas else {0}) | recorded
    return sorted(ranks - set(data.metas))


def unrecorded_message(data: SideData, rank: int) -> str:
    """What a rank without process facts means, and what to do."""
    if rank in getattr(data, "paths", {}):
        return (f"rank {rank} recorded its ops (rank{rank}.jsonl) but never wrote rank{rank}.meta.json at exit: its "
                "process ended without Python's exit handlers (os._exit, as a child forked without exec by os.fork "
                "often ends; or it was killed), so its last records may be lost too, or it could not write the file "
                "(its stderr, in the job's output, says so); end such a process with sys.exit, or start ranks with "
                "multiprocessing (mp.spawn, any start method) instead of os.fork")
    return (f"rank {rank} recorded nothing (is nccl_migrate installed in the job's Python, and "
            "TORCH_DEVICE_BACKEND_AUTOLOAD not 0?)")


def shadow_sides(data: RecordedSide) -> tuple[RecordedSide, RecordedSide, dict]:
    """A shadow run's records as two sides: a holds the primary's ops, b the same ops with the
    shadow's output digest, latency and measured errors. Ops without a shadow (issued from C++
    and not replayable, or on a group created before the recorder) are left out of both and
    counted in the returned dict as the comparison streams them, the earliest named."""
    not_shadowed = {"count": 0, "first": None}

    def primary(entry: dict) -> dict | None:
        shadow = entry.get("shadow")
        if not shadow or "skipped" in shadow:
            not_shadowed["count"] += 1
            first = not_shadowed["first"]
            if first is None or (entry["t"], entry["seq"]) < (first["t"], first["seq"]):
                why = shadow["skipped"] if shadow else "failed, or never completed, on the primary"
                not_shadowed["first"] = {"rank": entry["rank"], "group": entry["group"], "seq": entry["seq"],
                                         "op": entry["op"], "reason": why, "t": entry["t"]}
            return None
        return {k: v for k, v in entry.items() if k != "shadow"}

    def mirrored(entry: dict) -> dict | None:
        shadow = entry.get("shadow")
        if not shadow or "skipped" in shadow:
            return None
        mirror = {k: v for k, v in entry.items() if k not in ("shadow", "perturbed", "kept")}
        mirror.update(out=shadow.get("out"), ms=shadow.get("ms") or 0.0)
        for key in ("error", "measured"):
            if key in shadow:
                mirror[key] = shadow[key]
        return mirror

    a, b = RecordedSide(data.directory, primary), RecordedSide(data.directory, mirrored)
    a.attempt = b.attempt = data.attempt  # a restarted run's last attempt, which the report names
    a.paths = b.paths = data.paths
    a.reports = b.reports = data.reports
    a.metas = data.metas
    b.metas = {rank: dict(meta, backend=meta.get("shadow_backend"), backend_class="shadow groups", memory=[])
               for rank, meta in data.metas.items()}
    return a, b, not_shadowed
