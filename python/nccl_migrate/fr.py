"""`nccl-migrate fr DUMP...`: what flight-recorder dumps say, rank by rank: per group the last
collective each rank enqueued and completed, and every op not completed, so the rank that
stopped first stands out. Reads torch's dump format (the toolkit's and torch's own). For the
cross-rank match analysis, torch's own analyzer runs on the same files: `torchfrtrace DIR -p PREFIX`.
Dumps are read as data (fr_dump.py): a file that would run code when unpickled is refused."""

from __future__ import annotations

import os

from .fr_dump import load


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
