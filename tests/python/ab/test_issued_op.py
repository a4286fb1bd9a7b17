"""An op between its issue and its record (issued_op.py) and the per-thread state the wrappers and
hooks share (active.py): the Work a job gets back completes the op's record before the job can
learn the op is complete, whichever way it asks, and is torch's Work in every other respect."""

import threading

import torch
from nccl_migrate.ab import active
from nccl_migrate.ab.issued_op import IssuedOp, RecordedWork


class _Work:
    """What the job would otherwise get from torch: wait, is_completed, get_future and more."""

    def __init__(self, done=False):
        self.done, self.future, self.waits = done, torch.futures.Future(), []

    def wait(self, *args, **kwargs):
        self.waits.append((args, kwargs))
        return "waited"

    def is_completed(self):
        return self.done

    def get_future(self):
        return self.future

    def source_rank(self):
        return 3


class _Recorder:
    def __init__(self):
        self.calls = []

    def waited(self, op):
        self.calls.append(("waited", op))

    def observed(self, op, work):
        self.calls.append(("observed", op, work))


def test_an_issued_op_is_complete_when_each_of_its_works_is():
    import time

    before = time.perf_counter()
    op = IssuedOp({"seq": 1}, "view", "kept", "future")
    assert before <= op.start <= time.perf_counter()  # its latency counts from its issue
    assert (op.entry, op.view, op.kept, op.in_future, op.shadow, op.works, op.waited, op.seen_done) == \
        ({"seq": 1}, "view", "kept", "future", None, [], 0, set())
    assert op.complete()  # nothing issued on it yet
    first, second = _Work(done=True), _Work()
    op.works = [first, second]
    assert not op.complete()
    op.seen_done.add(id(second))  # its future completed: is_completed may lag it
    assert op.complete()
    op.seen_done.clear()
    second.done = True
    assert op.complete()
    assert IssuedOp({}, None, None).in_future is None


def test_waiting_records_the_op_after_torchs_wait_returns():
    work, recorder = _Work(), _Recorder()
    op = IssuedOp({}, None, None)
    recorded = RecordedWork(work, op, recorder)
    assert recorded.wait(5, timeout=2) == "waited"
    assert work.waits == [((5,), {"timeout": 2})] and recorder.calls == [("waited", op)]


def test_is_completed_records_the_op_only_once_it_is_complete():
    work, recorder = _Work(), _Recorder()
    op = IssuedOp({}, None, None)
    recorded = RecordedWork(work, op, recorder)
    assert recorded.is_completed() is False and recorder.calls == []
    work.done = True
    assert recorded.is_completed() is True and recorder.calls == [("observed", op, work)]


def test_the_jobs_callbacks_on_the_future_run_after_the_record():
    work, recorder = _Work(), _Recorder()
    op = IssuedOp({}, None, None)
    seen = []
    future = RecordedWork(work, op, recorder).get_future()
    chained = future.then(lambda f: seen.append((f.value(), list(recorder.calls))))
    assert recorder.calls == []
    work.future.set_result([torch.ones(1)])
    chained.wait()
    [(value, calls_then)] = seen
    assert value[0].tolist() == [1.0] and calls_then == [("observed", op, work)]


def test_everything_else_is_torchs_work():
    assert RecordedWork(_Work(), IssuedOp({}, None, None), _Recorder()).source_rank() == 3


def test_inside_and_the_object_collective_are_per_thread():
    assert active.recorder is None and active.inside.active is False and active.object_collective.name is None
    seen = []
    with active.inside:
        active.object_collective.name = "all_gather_object"
        thread = threading.Thread(target=lambda: seen.append((active.inside.active, active.object_collective.name)))
        thread.start(), thread.join()
        assert active.inside.active is True
    assert active.inside.active is False and seen == [(False, None)]
    active.object_collective.name = None
