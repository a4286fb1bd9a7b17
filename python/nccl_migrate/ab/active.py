"""Which recorder is on in this process, and whether this thread is inside a wrapped call: the
state the wrappers (wrappers.py) and the recorder's hooks (recorder.py) share."""

from __future__ import annotations

import threading

# The Recorder install() started; while None, every wrapper and hook passes straight through.
recorder = None


class _Inside(threading.local):
    """``with inside:`` marks calls that are not the job's own (a wrapped call's nested ones and
    its hooks, a shadow's ops): wrappers and hooks let them pass unrecorded."""

    active = False

    def __enter__(self) -> None:
        self.active = True

    def __exit__(self, *exc) -> None:
        self.active = False


inside = _Inside()


class _ObjectCollective(threading.local):
    """The object collective (all_gather_object, broadcast_object_list, ...) this thread is inside,
    if any: its tensor ops carry pickled objects."""

    name: str | None = None


object_collective = _ObjectCollective()
