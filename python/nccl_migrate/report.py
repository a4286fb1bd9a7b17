"""A job's own account of what the toolkit did, written at exit when NCCL_MIGRATE_REPORT names a
file (``{rank}`` in it becomes the process's RANK): every group a toolkit backend served (the name the job asked for and the behaviour that
ran) and every communicator created. Unmodified jobs and A/B runs read behaviour from here, not
from guesses."""

from __future__ import annotations

import atexit
import json
import os

from ._native import native

REPORT_VARIABLE = "NCCL_MIGRATE_REPORT"

_groups: list[dict] = []


def record_group(requested: str, behaviour: str, backend) -> None:
    """Called by the toolkit's creators for every group they make."""
    _groups.append({"requested": requested, "behaviour": behaviour, "name": backend.name(),
                    "rank": backend.rank(), "size": backend.size()})


def report() -> dict:
    return {"pid": os.getpid(), "groups": list(_groups), "communicators_created": native.created_communicators()}


def _write_at_exit() -> None:
    path = os.environ.get(REPORT_VARIABLE)
    # Only processes the toolkit served write one: a launcher that merely imported the package
    # must not overwrite its ranks' reports.
    if not path or not _groups:
        return
    rank = os.environ.get("RANK", "0")
    target = path.replace("{rank}", rank)
    with open(target + ".tmp", "w") as out:
        json.dump(report(), out, indent=1)
    os.replace(target + ".tmp", target)


atexit.register(_write_at_exit)
