"""How a failed side failed, in the report's words: which rank died (by which signal, or with
which exit status) and after which op, its last record; or, for a side that ran past its timeout,
which ranks were still running at the deadline (stopped ones named) and where each was. From
what the launcher saw (the failed ranks' exit codes, the cause first; the ranks running at the
deadline) and what the ranks left behind: each rank's last record, and the meta a rank ended by
SIGTERM writes (the signal and the ops it was inside, termination.py).

Also what the comparison of a failed side leaves out: the records of ops that failed or never
finished on it (its collectives failed with the rank that died, "Connection closed by peer"),
which would otherwise compare as divergent; they count as missing there, as ops it never reached."""

from __future__ import annotations

import glob
import json
import os
import signal

from ..record_files import last_attempt

TAIL_BYTES = 1 << 16  # read a rank's record file from its end, this much at a time


def _op_text(record: dict) -> str:
    return f"{record['op']} #{record['seq']} of group {record['group']}"


def _brief(record: dict) -> dict:
    return {"group": record["group"], "seq": record["seq"], "op": record["op"]}


def cut_by_failure(entry: dict) -> bool:
    """An op record a failure explains: it failed (its peer died) or never finished."""
    return "error" in entry or bool(entry.get("unfinished"))


def last_record(path: str) -> tuple[dict | None, dict | None, bool]:
    """(the last op the rank finished, its last record if that one failed or never finished, whether
    the file ends cut short) from one rank's record file, read from its end."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return None, None, False
    chunk, failed = TAIL_BYTES, None
    with open(path, "rb") as f:
        while True:
            f.seek(max(0, size - chunk))
            lines = f.read().split(b"\n")
            cut = bool(lines[-1])  # no newline at its end: the process was killed while writing it
            whole = lines[1:-1] if chunk < size else lines[:-1]  # the chunk's first line may be partial
            for line in reversed(whole):
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(record, dict) or not {"op", "seq", "group"} <= set(record):
                    continue
                if cut_by_failure(record):
                    failed = failed or record
                    continue
                return record, failed, cut
            if chunk >= size:
                return None, failed, cut
            chunk *= 4


def _metas(directory: str) -> dict[int, dict]:
    found = {}
    for path in glob.glob(os.path.join(directory, "rank*.meta.json")):
        try:
            with open(path) as f:
                meta = json.load(f)
            found[int(meta["rank"])] = meta
        except (OSError, ValueError, KeyError, TypeError):
            continue  # reading the side reports a damaged meta with its name
    return found


def _record_paths(directory: str) -> dict[int, str]:
    found = {}
    for path in glob.glob(os.path.join(directory, "rank*.jsonl")):
        middle = os.path.basename(path)[len("rank"):-len(".jsonl")]
        if middle.isdigit():
            found[int(middle)] = path
    return found


class _Ranks:
    """One side's ranks as their files left them."""

    def __init__(self, directory: str):
        self.directory = last_attempt(directory)[0] if os.path.isdir(directory) else directory
        self.metas = _metas(self.directory) if os.path.isdir(self.directory) else {}
        self.paths = _record_paths(self.directory) if os.path.isdir(self.directory) else {}
        self._last: dict[int, tuple] = {}

    def last(self, rank: int) -> tuple[dict | None, dict | None, bool]:
        if rank not in self._last:
            path = self.paths.get(rank)
            self._last[rank] = last_record(path) if path else (None, None, False)
        return self._last[rank]

    def where(self, rank: int) -> tuple[str, dict]:
        """"after OP (its last record)", and the same as facts."""
        done, failed, cut = self.last(rank)
        facts = {"last_record": _brief(done) if done else None}
        if done is None:
            text = "before recording any op"
        else:
            text = f"after {_op_text(done)} (its last record"
            text += "; the one after it was cut short, the process killed while writing it)" if cut else ")"
        if cut:
            facts["cut_short"] = True
        if failed is not None and "error" in failed:
            facts["failed_op"] = dict(_brief(failed), error=failed["error"][:300])
        return text, facts

    def rank_of_pid(self, pid: int) -> int | None:
        return next((rank for rank, meta in self.metas.items() if meta.get("pid") == pid), None)

    def inside(self, rank: int) -> list[dict]:
        ended = self.metas.get(rank, {}).get("ended_by")
        return list(ended.get("inside") or []) if isinstance(ended, dict) else []


def _status_text(returncode: int) -> tuple[str, str | None]:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"died by {name}", name
    return f"exited with status {returncode}", None


def _ranks_text(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _died(run, ranks: _Ranks) -> dict:
    cause, *others = run.ranks
    rank, code = cause["rank"], cause["returncode"]
    how, name = _status_text(code)
    where, facts = ranks.where(rank)
    text = f"rank {rank} {how} {where}"
    if facts.get("failed_op"):
        failed = facts["failed_op"]
        text += f"; its {_op_text(failed)} failed: {failed['error'][:200]}"
    then = [f"rank {r['rank']} {_status_text(r['returncode'])[0]}" for r in others if r["returncode"] is not None]
    if then:  # failed in their own way too, most often as their ops failed with it
        text += "; then " + ", ".join(then)
    ended = sorted(r["rank"] for r in others if r["returncode"] is None)
    if ended:
        text += f"; {_ranks_text(ended)} {'was' if len(ended) == 1 else 'were'} ended by the launcher"
    return dict({"kind": "died" if code < 0 else "exited", "rank": rank, "exit_code": code, "signal": name,
                 "ended_by_launcher": ended, "text": text}, **facts)


def _running_text(rank: int | None, stopped: bool, ranks: _Ranks, pid: int | None) -> tuple[str, dict]:
    if rank is None:
        return f"pid {pid} (no rank known)", {"rank": None, "pid": pid, "stopped": stopped}
    where, facts = ranks.where(rank)
    inside = ranks.inside(rank)
    text = f"rank {rank}"
    if stopped:
        text += " stopped (by SIGSTOP or a debugger: it could not answer)"
    if inside:
        text += f" inside {_op_text(inside[0])}" + (f" and {len(inside) - 1} more op(s)" if len(inside) > 1 else "")
    return f"{text} {where}", dict({"rank": rank, "pid": pid, "stopped": stopped, "inside": inside}, **facts)


def _hung(run, ranks: _Ranks) -> dict:
    running, seen = [], set()
    for process in run.running_at_deadline:
        rank = ranks.rank_of_pid(process["pid"])
        rank = process.get("rank") if rank is None else rank
        seen.add(rank)
        running.append((rank, bool(process.get("stopped")), process["pid"]))
    for rank, meta in sorted(ranks.metas.items()):  # ranks that say so themselves (no launcher's list)
        if rank not in seen and isinstance(meta.get("ended_by"), dict):
            running.append((rank, False, meta.get("pid")))
    described = [_running_text(rank, stopped, ranks, pid) for rank, stopped, pid in
                 sorted(running, key=lambda r: (r[0] is None, r[0] if r[0] is not None else 0, r[2] or 0))]
    limit = f"{run.timeout:g} s" if run.timeout is not None else "its limit"
    if described:
        text = (f"the job ran past its timeout ({limit}) and was ended; still running at the deadline: "
                + ", ".join(t for t, _ in described))
    else:
        text = (f"the job ran past its timeout ({limit}) and was ended"
                + ("" if ranks.paths else " before any rank recorded an op (did the rendezvous wait for a node "
                                          "that never came?)"))
    return {"kind": "hung", "timeout": run.timeout, "running": [facts for _, facts in described], "text": text}


def _vanished(run, ranks: _Ranks) -> dict | None:
    """No launcher's word on the ranks (a launch command ran them, or the records came alone): a
    rank's meta says which signal ended it; and, on a side known to have failed, a rank that
    recorded ops and left no meta ended without its exit handlers."""
    gone = sorted(set(ranks.paths) - set(ranks.metas)) if run.failure else []
    ended = sorted(rank for rank, meta in ranks.metas.items() if isinstance(meta.get("ended_by"), dict))
    if not gone and not ended:
        return None
    parts = []
    for rank in gone:
        where, _ = ranks.where(rank)
        parts.append(f"rank {rank} ended without writing its meta (killed by a signal it could not handle, such as "
                     f"SIGKILL, or crashed) {where}")
    for rank in ended:
        where, _ = ranks.where(rank)
        inside = ranks.inside(rank)
        parts.append(f"rank {rank} was ended by {ranks.metas[rank]['ended_by'].get('signal')}"
                     + (f" inside {_op_text(inside[0])}" if inside else "") + f" {where}")
    return {"kind": "died" if gone else "ended", "ranks_without_meta": gone, "ended_by_signal": ended,
            "text": "; ".join(parts)}


def explain(run, name_side: bool = True) -> dict | None:
    """The fault of a side (a SideRun) that failed, or whose ranks say a signal ended them, with
    ``text`` for the verdict (``side X: ...``; without ``name_side``, for ``ab record``'s one
    side, what follows it); None for a side that did not fail."""
    ranks = _Ranks(run.directory)
    if run.timed_out:
        fault = _hung(run, ranks)
    elif run.ranks and run.ranks[0].get("returncode") is not None:
        fault = _died(run, ranks)
    else:
        fault = _vanished(run, ranks)
        if fault is None:
            return {"kind": "failed", "text": run.failure} if run.failure else None
    hung = fault["kind"] == "hung" and fault["running"]  # a side that ran no rank did not hang
    if name_side:
        fault["text"] = f"side {run.side.label}{' hung' if hung else ''}: {fault['text']}"
    elif hung:
        fault["text"] = f"the side hung: {fault['text']}"
    return fault


def compare_up_to_failure(data) -> dict:
    """Readies a failed side's records (a RecordedSide) for the comparison: a last record cut short
    ends its rank's file there, and the ops cut by the failure are left out, counted in the dict
    returned (``count``) as the comparison streams them."""
    data.accept_cut_end = True
    left_out = {"count": 0}
    inner = data.transform

    def transform(entry: dict) -> dict | None:
        if cut_by_failure(entry):
            left_out["count"] += 1
            return None
        return entry if inner is None else inner(entry)

    data.transform = transform
    return left_out
