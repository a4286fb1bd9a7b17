"""`nccl-migrate doctor`: what this machine and this torch make of each NCCL backend name, now.

Torch's build (CUDA, NCCL it loads), the toolkit's build (NCCL it compiled against, the torch
features it found and those it compiled out), GPUs,
whether the shim is active, what each name resolves to and why, allocator settings and their
conflicts, and what a group costs under each behaviour. Every conflict found makes doctor exit 1.
"""

from __future__ import annotations

import os
from importlib.metadata import entry_points

import torch

from . import shim, torch_features
from ._native import native
from ._registration import BACKEND_NAMES, EAGER_SUBGROUPS_VARIABLE

# What one group costs in communicators under each behaviour, from the policies' definitions.
GROUP_COST = {
    "legacy": "none at creation (one at creation with device_id); then one per device it is used on, "
              "plus one 2-rank communicator per send/recv peer pair",
    "rewritten": "exactly one, created with the group (torch: every group; toolkit: the world group, "
                 f"subgroups at first use unless {EAGER_SUBGROUPS_VARIABLE}=1)",
    "rewritten-lazy-p2p": "one, created with the group, plus one 2-rank communicator per send/recv peer pair "
                          "at first use",
}


def _entry_points_installed() -> dict:
    backends = {ep.name for ep in entry_points(group="torch.distributed.backends")}
    autoload = {ep.name for ep in entry_points(group="torch.backends")}
    return {"backends": sorted(set(BACKEND_NAMES) & backends), "autoload": "nccl_migrate" in autoload}


def examine() -> dict:
    settings = shim.job_settings()
    names = {name: shim.resolve(name) for name in shim.NCCL_NAMES}
    conflicts = []
    for name, r in names.items():
        if r["error"]:
            conflicts.append(f"{name}: {r['error']}")
        conflicts.extend(f"{name}: {w}" for w in r["warnings"])
    return {
        "torch": {"version": torch.__version__, "cuda": torch.version.cuda,
                  "nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else None,
                  "builtin_backends": shim.torch_capabilities()},
        "toolkit": {"nccl": native.nccl_build_version() or None, "backends": BACKEND_NAMES},
        # What this torch offers the toolkit; a missing feature is compiled out, not a conflict.
        "torch_features": torch_features.features(),
        "gpus": torch.cuda.device_count() if torch.cuda.is_available() else 0,
        "activation": {"NCCL_MIGRATE_ACTIVATE": os.environ.get(shim.ACTIVATE_VARIABLE),
                       "entry_points": _entry_points_installed(),
                       "how": "import nccl_migrate, NCCL_MIGRATE_ACTIVATE=1, or nccl-migrate run -- CMD"},
        "settings": settings,
        "names": names,
        "group_cost": GROUP_COST,
        "conflicts": conflicts,
    }


def render_text(report: dict) -> str:
    t, tk = report["torch"], report["toolkit"]
    lines = [
        f"torch            {t['version']} (CUDA {t['cuda']}, NCCL {t['nccl']})",
        f"toolkit          NCCL {tk['nccl'] or 'not compiled'}; backends {', '.join(tk['backends'])}",
        f"GPUs             {report['gpus']}",
        *_render_features(report["torch_features"], t["version"]),
        f"activation       NCCL_MIGRATE_ACTIVATE={report['activation']['NCCL_MIGRATE_ACTIVATE'] or '(unset)'}; "
        f"entry points: {', '.join(report['activation']['entry_points']['backends']) or 'none'}"
        f"{' + autoload' if report['activation']['entry_points']['autoload'] else ''}",
        "settings         " + ", ".join(f"{k}={v if v is not None else '(unset)'}" for k, v in report["settings"].items()),
        "",
        f"{'name':<12} {'behaviour':<20} {'implementation':<15} {'runs as':<16} why",
    ]
    for name, r in report["names"].items():
        if r["error"]:
            lines.append(f"{name:<12} {'-':<20} {'-':<15} {'-':<16} error: {r['error']}")
            continue
        lines.append(f"{name:<12} {r['behaviour']:<20} {r['implementation']:<15} {r['backend']:<16} {r['reason']}")
    lines += ["", "communicators per group:"]
    lines += [f"  {behaviour:<20} {cost}" for behaviour, cost in report["group_cost"].items()]
    if report["conflicts"]:
        lines += ["", "conflicts:"] + [f"  {c}" for c in report["conflicts"]]
    else:
        lines += ["", "no conflicts"]
    return "\n".join(lines)


def _render_features(features: dict, version: str) -> list[str]:
    lacking = {name: row for name, row in features.items() if not row["present"] and row["kind"] == "feature"}
    adapted = [name for name, row in features.items() if not row["present"] and row["kind"] == "adapted"]
    total = sum(1 for row in features.values() if row["kind"] == "feature")
    if not lacking:
        lines = [f"torch features   all {total} the toolkit can use are present"]
    else:
        lines = [f"torch features   torch {version} lacks {len(lacking)} of {total} "
                 "(compiled out of this build, or absent from torch's Python API):"]
        lines += [f"  {name:<26} {row['what']}" for name, row in lacking.items()]
    if adapted:
        lines.append(f"                 lacking, made up for by the toolkit: {', '.join(adapted)}")
    return lines
