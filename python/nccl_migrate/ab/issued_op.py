"""An op between its issue and its record, and the Work the job gets back for an async op, which
completes the record before the job can learn that the op is complete."""

from __future__ import annotations

import time

from .op_table import OpView


class IssuedOp:
    """One op between its issue and its record: the job's tensors, the input digest (or the future
    computing it), kept tensors and the op's shadow."""

    def __init__(self, entry: dict, view: OpView, kept, in_future=None):
        self.entry, self.view, self.kept, self.in_future = entry, view, kept, in_future
        self.start = time.perf_counter()
        self.shadow = None
        self.works: list = []
        self.waited = 0
        self.seen_done: set[int] = set()  # works whose future completed (is_completed may lag it)

    def complete(self) -> bool:
        return all(id(w) in self.seen_done or w.is_completed() for w in self.works)


class RecordedWork:
    """Torch's Work, unchanged, except that each way the job can learn the op is complete (wait,
    is_completed, its future) first completes the op's record: until then the job may not touch
    the op's tensors, so they are read unchanged."""

    def __init__(self, work, op: IssuedOp, recorder):
        self._work, self._op, self._recorder = work, op, recorder

    def wait(self, *args, **kwargs):
        result = self._work.wait(*args, **kwargs)
        self._recorder.waited(self._op)
        return result

    def is_completed(self) -> bool:
        done = self._work.is_completed()
        if done:
            self._recorder.observed(self._op, self._work)
        return done

    def get_future(self):
        def recorded(future):
            self._recorder.observed(self._op, self._work)
            return future.value()

        # The job's callbacks chain on this future, so they run after the record is complete.
        return self._work.get_future().then(recorded)

    def __getattr__(self, name):
        return getattr(self._work, name)
