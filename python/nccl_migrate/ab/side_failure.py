"""How a failed side failed, in the report's words: which rank died (by which signal, or with
which exit status) and after which op, its last record; or, for a side that ran past its timeout,
which ranks were still running at the deadline (stopped ones named) and where each was. From
what the launcher saw (the failed ranks' exit codes, the cause first; the ranks running at the
deadline) and what the ranks left behind: each rank's last record, and the meta a rank ended by
SIGTERM writes (the signal and the ops it was inside, termination.py).

The rank that failed is quoted in its own words: from the side's job logs, the lines its launcher
prefixed with its rank, the traceback that ended it (or, killed by a signal, its last lines), not
the follow-on errors of the peers it left behind, which the log shows last.

Also what the comparison of a failed side leaves out: the records of ops that failed or never
finished on it (its collectives failed with the rank that died, "Connection closed by peer"),
which would otherwise compare as divergent; they count as missing there, as ops it never reached."""

from __future__ import annotations

import collections
import glob
import json
import os
import re
import signal
from collections.abc import Iterable, Iterator

from ..launch import PREFIX_TEMPLATE
from ..record_files import last_attempt

TAIL_BYTES = 1 << 16  # read a rank's record file from its end, this much at a time

# Whose line a job log's line is: torchrun's prefix (ours, PREFIX_TEMPLATE: the global rank), and
# torch's own, which its excepthook puts before each line of an uncaught exception's traceback
# ("[rank1]: ") and its C++ logging before each message ("[rank1]:[E...") once the process joined
# a group. A torchrun without a prefix template (torch 2.11) prefixes its local rank
# ("[default0]:"), which names no global rank and is only removed.
LAUNCHER_PREFIX = re.compile("^" + re.escape(PREFIX_TEMPLATE).replace(re.escape("${rank}"), r"(\d+)"))
TORCH_PREFIX = re.compile(r"^\[rank(\d+)\]:( ?)")
LOCAL_PREFIX = re.compile(r"^\[(?!rank\d+\])[A-Za-z_]+\d+\]:")
TRACEBACK = "Traceback (most recent call last):"
CHAINED = ("During handling of the above exception, another exception occurred:",
           "The above exception was the direct cause of the following exception:")
OWN_LINES = 20  # the last lines of a rank killed by a signal
TRACEBACK_LINES = 60  # a longer traceback keeps its first lines and its end, where the exception is


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


def _owner(line: str) -> tuple[int | None, str, bool]:
    """(the rank a log line is from, or None; the line without prefixes; whether torch's
    excepthook wrote it)."""
    rank = None
    launcher = LAUNCHER_PREFIX.match(line)
    if launcher:
        rank, line = int(launcher.group(1)), line[launcher.end():]
    else:
        local = LOCAL_PREFIX.match(line)
        line = line[local.end():] if local else line
    torch_prefix = TORCH_PREFIX.match(line)
    if torch_prefix:
        rank = int(torch_prefix.group(1)) if rank is None else rank
        return rank, line[torch_prefix.end():], bool(torch_prefix.group(2))
    return rank, line, False


def _job_logs(run) -> list[str]:
    """The side's job logs: the one its run names, and every launching process's (``ab record``
    writes one per node into the side's directory)."""
    found = [run.log] if run.log and os.path.isfile(run.log) else []
    if os.path.isdir(run.directory):
        found += [p for p in sorted(glob.glob(os.path.join(run.directory, "job*.log"))) if p not in found]
    return found


def _tracebacks(lines: Iterable[tuple[str, bool]]) -> Iterator[tuple[list[str], bool]]:
    """The tracebacks among a rank's lines (each with whether torch's excepthook wrote it), chained
    exceptions kept together, as they end: (its lines, whether the excepthook wrote it: the
    uncaught exception that ended the process)."""
    block, state, hooked, held = [], None, False, []
    for text, by_hook in lines:
        if state == "frames" and (text.startswith((" ", "\t")) or text == TRACEBACK):
            block.append(text)
            continue
        if state == "frames":  # the exception's line ends the frames
            block.append(text)
            state = "after"
            continue
        if state == "after" and text == "":
            held.append(text)
            continue
        if state in ("after", "chain") and text in CHAINED:
            block += held + [text]
            held, state = [], "chain"
            continue
        if state == "chain" and text in ("", TRACEBACK):
            block.append(text)
            state = "frames" if text == TRACEBACK else state
            continue
        if state == "after" and not held and by_hook and hooked:  # a message of several lines
            block.append(text)
            continue
        if state is not None:
            yield block, hooked
            block, state, held = [], None, []
        if text == TRACEBACK:
            block, state, hooked = [text], "frames", by_hook
    if state is not None:
        yield block, hooked


def _shortened(block: list[str]) -> list[str]:
    """A traceback of at most TRACEBACK_LINES: its start (where it began) and its end (the frames
    nearest the error, and the error)."""
    if len(block) <= TRACEBACK_LINES:
        return block
    head = 5
    tail = TRACEBACK_LINES - head - 1
    return block[:head] + [f"... ({len(block) - head - tail} lines left out)"] + block[-tail:]


def _rank_lines(logs: list[str], rank: int) -> Iterator[tuple[str, bool]]:
    """Rank ``rank``'s lines in the job logs, prefixes removed, each with whether torch's
    excepthook wrote it; read as a stream (a job's log may be large)."""
    for path in logs:
        with open(path, errors="replace") as f:
            previous = None
            for line in f:
                owner, text, by_hook = _owner(line.rstrip("\n"))
                # torch's excepthook leaves a traceback's empty lines without its prefix: one
                # belongs with the line before it
                owner = previous if owner is None and text == "" else owner
                previous = owner
                if owner == rank:
                    yield text, by_hook


def own_output(run, rank: int, by_signal: bool) -> dict:
    """What rank ``rank`` itself printed before it failed, from the side's job logs: the traceback
    that ended it (torch's excepthook wrote it; else the last one it printed), or, when a signal
    ended it or it printed no traceback, its last lines. ``shows``: "traceback", "last lines",
    or "nothing" (no line of it in the logs). Holds the last lines and two tracebacks at most."""
    logs = _job_logs(run)
    last: collections.deque[str] = collections.deque(maxlen=OWN_LINES)

    def remembered() -> Iterator[tuple[str, bool]]:
        for text, by_hook in _rank_lines(logs, rank):
            last.append(text)
            yield text, by_hook

    uncaught, latest = None, None
    for block, hooked in _tracebacks(remembered()):
        latest = block
        uncaught = block if hooked and uncaught is None else uncaught
    chosen = uncaught or latest
    if chosen and not by_signal:
        return {"rank": rank, "shows": "traceback", "lines": _shortened(chosen), "logs": logs}
    return {"rank": rank, "shows": "last lines" if last else "nothing", "lines": list(last), "logs": logs}


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
                 "ended_by_launcher": ended, "text": text}, **facts, own_output=own_output(run, rank, code < 0))


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
