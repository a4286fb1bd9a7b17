"""`nccl-migrate fr DUMP...`: what flight-recorder dumps say, rank by rank: per group the last
collective each rank enqueued and completed, and every op not completed, so the rank that
stopped first stands out. Reads torch's dump format (the toolkit's and torch's own). For the
cross-rank match analysis, torch's own analyzer runs on the same files: `torchfrtrace DIR -p PREFIX`.
Dumps are read as data (fr_dump.py): a file that would run code when unpickled is refused. A
directory stands for the dumps in it and below: a run directory of `nccl-migrate run` or `ab`
holds them in fr/ (a side's own under a/, b/), named as torch names them (run_files.py); a dump
still being written, or left half-written (.nccl-migrate-dump-*.partial), is not one of them."""

from __future__ import annotations

import os
import re

from .fr_dump import NotADump, load
from .run_files import DUMP_NAME

DUMP_FILE = re.compile(re.escape(DUMP_NAME) + r"(\d+)")


def dump_paths(arguments: list[str]) -> list[str]:
    """The dump files the arguments name: a file as given, a directory as the dumps in it and
    below (each folder's in rank order). NotADump names a directory that holds none."""
    paths = []
    for argument in arguments:
        if not os.path.isdir(argument):
            paths.append(argument)
            continue
        found = []
        for folder, subfolders, files in os.walk(argument):
            subfolders.sort()
            ranks = sorted((int(m.group(1)), name) for name in files if (m := DUMP_FILE.fullmatch(name)))
            found.extend(os.path.join(folder, name) for _, name in ranks)
        if not found:
            raise NotADump(f"{argument}: no flight-recorder dumps in it or below (files named {DUMP_NAME}<rank>, as "
                           "`nccl-migrate run` and `ab` keep them in the run directory's fr/); pass dump files "
                           "(TORCH_FR_DUMP_TEMP_FILE<rank>) or a run directory")
        paths.extend(found)
    return paths


def summarize(path: str) -> dict:
    dump = load(path)
    groups: dict[str, dict] = {}
    pending = []
    for e in dump["entries"]:
        name, desc = e["process_group"]
        g = groups.setdefault(name, {"desc": desc, "last_enqueued": -1, "last_completed": -1})
        if not e["is_p2p"]:
            g["last_enqueued"] = max(g["last_enqueued"], e["collective_seq_id"])
            if e["state"] == "completed":
                g["last_completed"] = max(g["last_completed"], e["collective_seq_id"])
        if e["state"] != "completed":
            pending.append({"group": name, "seq": e["p2p_seq_id"] if e["is_p2p"] else e["collective_seq_id"],
                            "op": e["profiling_name"], "state": e["state"], "input_sizes": e["input_sizes"]})
    return {"path": path, "rank": os.path.basename(path), "version": dump["version"], "entries": len(dump["entries"]),
            "groups": groups, "not_completed": pending}


def render_text(summaries: list[dict]) -> str:
    lines = []
    for s in summaries:
        lines.append(f"{s['path']}: {s['entries']} entries (format {s['version']})")
        for name, g in s["groups"].items():
            lines.append(f"  group {name} ({g['desc']}): last enqueued collective {g['last_enqueued']}, "
                         f"last completed {g['last_completed']}")
        for p in s["not_completed"]:
            lines.append(f"  not completed: group {p['group']} seq {p['seq']} {p['op']} ({p['state']}) sizes {p['input_sizes']}")
    return "\n".join(lines)
