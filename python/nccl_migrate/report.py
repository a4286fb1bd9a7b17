"""A job's own account of what the toolkit did, written at exit when NCCL_MIGRATE_REPORT names a
file (``{rank}`` in it becomes the process's global rank in its process group; a process no
toolkit backend served writes nothing): every group a toolkit backend served (the name the job asked for and the behaviour that
ran) and every communicator created. Unmodified jobs and A/B runs read behaviour from here, not
from guesses."""

from __future__ import annotations

import atexit
import json
import os
import sys

from . import run_files
from ._native import native
from .ab import RECORD_VARIABLE
from .record_files import (
    attempt_directory,
    mark_second_writer,
    second_writer_message,
    write_whole,
)

REPORT_VARIABLE = run_files.REPORT_VARIABLE

_groups: list[dict] = []
_global_rank: list[int] = []  # set by the first group served: the world group's rank is the global rank


def record_group(requested: str, behaviour: str, backend) -> None:
    """Called by the toolkit's creators for every group they make."""
    if not _global_rank:
        import torch.distributed as dist

        # While init_process_group creates the world group, torch has no default group yet and
        # the backend's rank is the global one; a later group's rank is its own, not the process's.
        _global_rank.append(dist.get_rank() if dist.is_initialized() else backend.rank())
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
    rank = _global_rank[0]
    target = path.replace("{rank}", str(rank))
    # In an A/B run each rank's report is written once per run: a second process with the same
    # rank is reported, never written over the first.
    in_ab_run = bool(os.environ.get(RECORD_VARIABLE))
    if in_ab_run:  # beside the records of this attempt (torch's launcher may restart the workers)
        target = os.path.join(attempt_directory(os.path.dirname(target)), os.path.basename(target))
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    if not write_whole(target, json.dumps(report(), indent=1), exclusive=in_ab_run):
        mark_second_writer(target, rank)
        print(f"nccl-migrate: {second_writer_message(rank, target)}", file=sys.stderr)


atexit.register(_write_at_exit)
