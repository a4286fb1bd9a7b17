"""Which recorder is on in this process, and whether this thread is inside a wrapped call: the
state the wrappers (wrappers.py) and the recorder's hooks (recorder.py) share."""

from __future__ import annotations

import threading

# The Recorder install() started; while None, every wrapper and hook passes straight through.
recorder = None


class _Inside(threading.local):
    active = False  # set while a wrapped call runs: its own hooks, and torch's nested calls, pass


inside = _Inside()
