"""The recorder of one rank, in-process and never installed, continued: what its group hooks hand a
shadow and how their works are waited on (torch's hook arguments stood in for where a world of
one cannot make them: a failed work, a send), the files it writes when a disk fails, how long a
rank ended by a signal may take, and what the environment asks install() for (install() itself
stood in for: it would patch torch.distributed for the whole process)."""

import json
import os
import signal
import threading
import time
import types

import pytest
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from nccl_migrate.ab import (
    KEEP_VARIABLE,
    PERTURB_VARIABLE,
    RECORD_VARIABLE,
    SHADOW_PERTURB_VARIABLE,
    SHADOW_VARIABLE,
    active,
    dispatcher_calls,
    recorder_threads,
)
from nccl_migrate.ab import (
    recorder as recorder_module,
)
from nccl_migrate.ab.digest import PendingDigest, digest_of
from nccl_migrate.ab.op_table import BY_FUNCTION, BY_NAME, OpView
from nccl_migrate.ab.recorder import install_from_environment
from nccl_migrate.ab.wrappers import wrap_op
from torch_support import requires_torch


@pytest.fixture
def rec(world_of_one, make):
    r = make()
    r.initialised(0.0)
    return r


@pytest.fixture
def noting():
    """torch's dispatcher noting each reducing call's reduce op, as a shadow run installs it."""
    dispatcher_calls.install()
    try:
        yield
    finally:
        dispatcher_calls._library._destroy()
        dispatcher_calls._library = None
        dispatcher_calls.forget()


def records(rec) -> list[dict]:
    with open(os.path.join(rec.directory, f"rank{rec.rank}.jsonl")) as f:
        return [json.loads(line) for line in f]


def meta(rec) -> dict:
    with open(os.path.join(rec.directory, f"rank{rec.rank}.meta.json")) as f:
        return json.load(f)


def _view(*tensors, peer=None):
    return OpView(c10d._get_default_group(), list(tensors), list(tensors), None, peer)


class _ShadowOp:
    def __init__(self, calls):
        self.calls = calls

    def issue(self):
        self.calls.append(("issue", active.inside.active))

    def judge(self, outputs, out_digest):
        self.calls.append(("judge", outputs, out_digest))
        return {"ms": 1.5, "out": out_digest}


class _Shadow:
    """Stands in for shadow.Shadow: what the hooks hand it, and a shadow op or a reason."""

    backend = "gloo"

    def __init__(self, skip=None):
        self.calls, self.skip = [], skip

    def prepare_hooked(self, spec, tensors, outputs, root, group, rank, group_name, seq, reduce_op):
        self.calls.append(("prepare_hooked", spec.name, tensors, outputs, root, group, rank, group_name, seq,
                           reduce_op))
        return (None, self.skip) if self.skip else (_ShadowOp(self.calls), None)


# --- what the meta says from the start ----------------------------------------------------------

def test_the_meta_names_the_process_and_its_world(rec):
    rec.close()
    m = meta(rec)
    assert m["host"] == os.uname().nodename and m["world_size"] == 1 and m["backend"] == "gloo"
    assert m["init_seconds"] == 0.0 and m["backend_class"] == "ProcessGroupGloo (gloo)"
    assert 0 < time.time() - m["started_at"] < 600 and 0 <= m["wall_seconds"] < 600
    assert rec.exiting() is True
    assert set(m) == {"rank", "pid", "host", "world_size", "started_at", "init_seconds", "backend", "backend_class",
                      "groups", "shadow_backend", "ops", "wall_seconds", "peak_rss_kib", "memory"}


def test_a_new_recorder_is_not_closing_and_keeps_no_tensors(world_of_one, make):
    rec = make()
    assert rec.exiting() is False
    rec.initialised(0.0)
    op = rec.begin(BY_FUNCTION["barrier"], OpView(c10d._get_default_group()))  # no tensors: 0 bytes
    assert op.kept is None
    rec.finish(op)
    rec.close()
    assert not os.path.exists(os.path.join(rec.directory, "tensors"))


def test_the_meta_is_written_for_people_to_read(rec):
    path = os.path.join(rec.directory, "rank0.meta.json")
    rec.close()
    with open(path) as f:
        text = f.read()
    assert text == json.dumps(json.loads(text), indent=1)


def test_a_meta_another_process_wrote_first_is_left_and_the_second_is_marked(rec):
    os.makedirs(rec.directory)
    path = os.path.join(rec.directory, "rank0.meta.json")
    with open(path, "w") as f:
        f.write('{"first": true}')
    rec.close()
    with open(path) as f:
        assert json.load(f) == {"first": True}
    markers = [n for n in os.listdir(rec.directory) if n.startswith("rank0.meta.json") and n != "rank0.meta.json"]
    assert len(markers) == 1
    with open(os.path.join(rec.directory, markers[0])) as f:
        marker = json.load(f)
    assert (marker["rank"], marker["path"]) == (0, "rank0.meta.json")


# --- ops' records -----------------------------------------------------------------------------------

def test_a_send_is_numbered_in_its_direction_and_typed_by_its_tensor(rec):
    op = rec.begin(BY_NAME["send"], OpView(c10d._get_default_group(), [torch.ones(2, dtype=torch.int64)], [], None, 1))
    assert (op.entry["group"], op.entry["peer"], op.entry["dtype"]) == ("0/p2p 0>1", 1, "int64")


def test_an_ops_time_is_in_milliseconds(rec):
    op = rec.begin(BY_FUNCTION["all_reduce"], _view(torch.ones(1)))
    time.sleep(0.02)
    rec.finish(op)
    rec.close()
    assert 20 <= records(rec)[0]["ms"] < 5000


def test_a_shadowed_op_is_judged_against_its_final_output_unless_it_failed(rec):
    calls = []
    t = torch.ones(2)
    op = rec.begin(BY_FUNCTION["all_reduce"], _view(t))
    op.shadow = _ShadowOp(calls)
    rec.finish(op)
    failed = rec.begin(BY_FUNCTION["all_reduce"], _view(t))
    failed.shadow = _ShadowOp(calls)
    rec.finish(failed, error="RuntimeError: x")
    rec.close()
    judged, not_judged = records(rec)
    assert judged["shadow"] == {"ms": 1.5, "out": digest_of([t])} and judged["out"] == digest_of([t])
    assert set(judged) == {"rank", "group", "seq", "op", "dtype", "in_shapes", "out_shapes", "reduce_op", "peer", "t",
                           "in", "ms", "out", "shadow"}
    assert calls == [("judge", [t], digest_of([t]))]
    assert "shadow" not in not_judged


def test_several_kept_ops_share_the_tensors_directory(world_of_one, make):
    rec = make(keep_bytes=1 << 10)
    rec.initialised(0.0)
    for _ in range(2):
        op = rec.begin(BY_FUNCTION["all_reduce"], _view(torch.ones(1)))
        rec.finish(op)
    assert sorted(os.listdir(os.path.join(rec.directory, "tensors"))) == ["r0-g0-s0.pt", "r0-g0-s1.pt"]


def test_an_unfinished_kept_op_is_recorded_without_tensors_at_close(world_of_one, make):
    rec = make(keep_bytes=1 << 10)
    rec.initialised(0.0)
    hooked = rec.begin(BY_FUNCTION["all_reduce"], _view(torch.ones(1)))
    rec.hooked[(1, 1)] = hooked
    rec.close()
    (entry,) = records(rec)
    assert entry["unfinished"] is True and entry["out"] is None and "kept" in entry
    saved = torch.load(os.path.join(rec.directory, "tensors", entry["kept"]))
    assert saved["out"] == [] and torch.equal(saved["in"][0], torch.ones(1))


def test_an_op_waited_for_once_per_work_is_recorded_at_the_last_wait(rec):
    class Work:
        def is_completed(self):
            return False

    op = rec.begin(BY_FUNCTION["all_reduce"], _view(torch.ones(1)))
    rec.defer(op, [Work(), Work()])
    rec.waited(op)
    assert rec.count == 0 and op.waited == 1
    rec.waited(op)
    assert rec.count == 1 and op.waited == 2 and rec.pending == []


def test_an_op_whose_works_completed_is_recorded_at_its_first_wait(rec):
    class Work:
        def is_completed(self):
            return True

    op = rec.begin(BY_FUNCTION["all_reduce"], _view(torch.ones(1)))
    rec.defer(op, [Work(), Work()])
    rec.waited(op)
    assert rec.count == 1


# --- the groups' hooks ------------------------------------------------------------------------------

@requires_torch("process_group_hooks")
def test_a_group_is_watched_once_and_never_a_group_this_rank_is_not_in(rec):
    rec.watch(None)
    rec.watch(c10d.GroupMember.NON_GROUP_MEMBER)
    assert id(None) not in rec.watched and id(c10d.GroupMember.NON_GROUP_MEMBER) not in rec.watched
    group = c10d.new_group(ranks=[0], backend="gloo")
    rec.watch(group)
    rec.watch(group)
    c10d.all_reduce(torch.ones(1), group=group)
    rec.close()
    assert len(records(rec)) == 1


@requires_torch("process_group_hooks")
def test_a_hooked_reduction_knows_its_reduce_op_from_the_dispatcher(rec, noting):
    t = torch.ones(2)
    c10d.all_reduce(t, op=dist.ReduceOp.MAX)
    c10d.reduce(t, dst=0, op=dist.ReduceOp.MIN)
    rec.close()
    reduced, to_root = records(rec)
    assert (reduced["reduce_op"], reduced["via"]) == ("MAX", "hook")
    assert (to_root["op"], to_root["reduce_op"], to_root["peer"]) == ("reduce", "MIN", 0)
    # The root of a reduce gets the result in its own tensor.
    assert to_root["out_shapes"] == [[2]] and to_root["out"] == digest_of([t])


@requires_torch("process_group_hooks")
def test_a_hooked_broadcast_from_this_rank_contributes_its_tensor(rec):
    t = torch.arange(3.0)
    c10d.broadcast(t, src=0)
    rec.close()
    (entry,) = records(rec)
    assert entry["in_shapes"] == [[3]] and entry["in"] == digest_of([torch.arange(3.0)])


@requires_torch("process_group_hooks")
def test_a_hooked_all_gather_keeps_its_outputs_apart_from_its_input(rec):
    outputs = [torch.zeros(2)]
    c10d.all_gather(outputs, torch.ones(2))
    rec.close()
    (entry,) = records(rec)
    assert (entry["op"], entry["in_shapes"], entry["out_shapes"]) == ("all_gather", [[2]], [[2]])
    assert entry["out"] == digest_of([torch.ones(2)]) and entry["in"] == digest_of([torch.ones(2)])


@requires_torch("process_group_hooks")
def test_the_hooks_hand_a_shadow_the_ops_tensors_root_group_and_reduce_op(rec, noting):
    rec.shadow = _Shadow()
    t = torch.ones(2)
    c10d.all_reduce(t, op=dist.ReduceOp.MAX)
    world = c10d._get_default_group()
    ((kind, spec, tensors, outputs, root, group, rank, group_name, seq, reduce_op), *issued) = rec.shadow.calls
    assert (kind, spec, root, group, rank, group_name, seq, reduce_op) == \
        ("prepare_hooked", "all_reduce", None, world, 0, "0", 0, dist.ReduceOp.MAX)
    assert tensors == [t] and outputs == [t]
    assert issued == [("issue", True), ("judge", [t], digest_of([t]))]
    c10d.broadcast(t, src=0)
    assert rec.shadow.calls[3][1] == "broadcast" and rec.shadow.calls[3][4] == 0  # its root
    assert rec.shadow.calls[3][9] is None  # not a reduction: no reduce op asked for
    rec.close()
    assert records(rec)[0]["shadow"] == {"ms": 1.5, "out": digest_of([t])}


@requires_torch("process_group_hooks")
def test_an_op_the_shadow_skips_says_why_in_its_record(rec):
    rec.shadow = _Shadow(skip="an op issued from C++ whose reduce op is not known (all_reduce)")
    c10d.all_reduce(torch.ones(2))
    rec.close()
    assert records(rec)[0]["shadow"] == {"skipped": "an op issued from C++ whose reduce op is not known (all_reduce)"}


def _hook_args(op_id, work):
    return types.SimpleNamespace(op_id=op_id, work=work)


class _Work:
    def __init__(self, fails=None):
        self.waits, self.fails = 0, fails

    def wait(self):
        self.waits += 1
        if self.fails:
            raise RuntimeError(self.fails)


def test_the_post_hook_waits_for_the_work_before_reading_the_output(rec):
    group = c10d._get_default_group()
    op = rec.begin(BY_FUNCTION["all_reduce"], _view(torch.ones(2)), via="hook")
    op.shadow = _ShadowOp(calls := [])
    rec.hooked[(id(group), 7)] = op
    work = _Work()
    rec._post_hook(group, _hook_args(7, work))
    assert work.waits == 1 and rec.hooked == {} and calls[0] == ("issue", True)
    rec._post_hook(group, _hook_args(7, _Work()))  # not this recorder's op (any more): nothing
    rec.close()
    (entry,) = records(rec)
    assert entry["out"] == digest_of([torch.ones(2)]) and "error" not in entry and "out_unobservable" not in entry


def test_a_work_that_fails_in_the_post_hook_is_the_ops_error_and_no_shadow_runs(rec):
    group = c10d._get_default_group()
    op = rec.begin(BY_FUNCTION["all_reduce"], _view(torch.ones(2)), via="hook")
    op.shadow = _ShadowOp(calls := [])
    rec.hooked[(id(group), 3)] = op
    rec._post_hook(group, _hook_args(3, _Work(fails="NCCL error: unhandled system error")))
    rec.close()
    (entry,) = records(rec)
    assert entry["error"] == "RuntimeError: NCCL error: unhandled system error" and entry["out"] is None
    assert calls == []


def test_a_hooked_send_or_recv_is_not_waited_for_and_its_output_unobservable(rec):
    group = c10d._get_default_group()
    for seq, kind in enumerate(("send", "recv")):
        op = rec.begin(BY_NAME[kind], OpView(group, [torch.ones(1)], [torch.ones(1)], None, 1), via="hook")
        rec.hooked[(id(group), seq)] = op
        work = _Work()
        rec._post_hook(group, _hook_args(seq, work))
        assert work.waits == 0 and op.view.outputs == []
    sync = rec.begin(BY_NAME["send"], OpView(group, [torch.ones(1)], [torch.ones(1)], None, 1), via="hook")
    rec.hooked[(id(group), 9)] = sync
    rec._post_hook(group, _hook_args(9, None))  # no work to wait on: the output is as the op left it
    rec.close()
    sent, received, without_work = records(rec)
    assert sent["out_unobservable"] is True and received["out_unobservable"] is True
    assert sent["out"] is None and received["out_shapes"] == [[1]]
    assert "error" not in sent and "error" not in received
    assert "out_unobservable" not in without_work and without_work["out"] == digest_of([torch.ones(1)])


# --- files that cannot be written ---------------------------------------------------------------------

def test_a_record_file_that_cannot_be_created_leaves_a_meta_counting_the_dropped(rec, monkeypatch, capsys):
    def full(path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(recorder_module, "claim", full)
    all_reduce = wrap_op("all_reduce", c10d.all_reduce)
    all_reduce(torch.ones(1))
    all_reduce(torch.ones(1))
    rec.close()
    assert meta(rec)["incomplete"] == {"error": f"creating {rec.directory}/rank0.jsonl failed: No space left on device",
                                       "records_written": 0, "records_dropped": 2}


def test_a_second_writers_marker_names_its_rank(rec):
    os.makedirs(rec.directory)
    open(os.path.join(rec.directory, "rank0.jsonl"), "w").close()
    wrap_op("all_reduce", c10d.all_reduce)(torch.ones(1))
    (marker,) = [n for n in os.listdir(rec.directory) if n.startswith("rank0.jsonl") and n != "rank0.jsonl"]
    with open(os.path.join(rec.directory, marker)) as f:
        assert json.load(f)["rank"] == 0


def test_a_failed_write_of_a_record_names_the_file(rec, monkeypatch):
    def full(fd, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(recorder_threads, "write_line", full)
    wrap_op("all_reduce", c10d.all_reduce)(torch.ones(1))
    rec.close()
    assert meta(rec)["incomplete"]["error"] == \
        f"writing {rec.directory}/rank0.jsonl failed after 0 record(s): No space left on device (ENOSPC)"


# --- a rank ended by a signal, bounded ----------------------------------------------------------------

class _NeverArrives(PendingDigest):
    def __init__(self):
        pass

    def ready(self):
        return False

    def value(self):
        raise AssertionError("never ready")


def test_a_rank_ended_by_a_signal_waits_for_a_gpu_digest_its_patience_only(rec, monkeypatch):
    monkeypatch.setattr(recorder_module, "ENDED_DIGEST_PATIENCE", 0.05)
    wrap_op("all_reduce", c10d.all_reduce)(torch.ones(1))
    rec.out.put({"seq": 99, "out": _NeverArrives()})
    started = time.monotonic()
    rec.end_by_signal(signal.SIGTERM)
    assert time.monotonic() - started < 3  # not the 10 s a running job's records get
    assert meta(rec)["ended_by"]["records_flushed"] is True
    assert records(rec)[-1]["digests_unfinished"] == ["out"]


def test_a_rank_ended_by_a_signal_gives_up_on_a_writer_stuck_on_its_disk(rec, monkeypatch):
    monkeypatch.setattr(recorder_module, "ENDED_WRITER_TIMEOUT", 0.05)
    monkeypatch.setattr(recorder_threads, "WRITE_INTERVAL", 0.005)
    stuck, release = threading.Event(), threading.Event()

    def write_line(fd, text):
        stuck.set()
        release.wait(30)

    monkeypatch.setattr(recorder_threads, "write_line", write_line)
    wrap_op("all_reduce", c10d.all_reduce)(torch.ones(1))
    assert stuck.wait(10)
    started = time.monotonic()
    rec.end_by_signal(signal.SIGTERM)
    elapsed = time.monotonic() - started
    release.set()
    rec.out.join(10)
    assert elapsed < 3 and meta(rec)["ended_by"]["records_flushed"] is False


# --- what the environment asks for ------------------------------------------------------------------

@pytest.fixture
def installs(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(recorder_module, "install", lambda *args: calls.append(args) or "installed")
    monkeypatch.setattr(recorder_module, "attempt_directory", lambda d: f"{d}/attempt")
    for name in (KEEP_VARIABLE, PERTURB_VARIABLE, SHADOW_VARIABLE, SHADOW_PERTURB_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(RECORD_VARIABLE, str(tmp_path))
    return calls


def test_the_environment_asks_for_a_recorder_in_the_attempts_directory(installs, tmp_path):
    assert install_from_environment() == "installed"
    assert installs == [(f"{tmp_path}/attempt", 0, None, None)]


def test_the_environment_asks_for_kept_tensors_a_perturbation_and_a_shadow(installs, monkeypatch, tmp_path):
    monkeypatch.setenv(KEEP_VARIABLE, "4096")
    monkeypatch.setenv(PERTURB_VARIABLE, "rank=1,group=0,seq=5")
    monkeypatch.setenv(SHADOW_VARIABLE, '{"TORCH_DIST_USE_NCCL2": "1"}')
    monkeypatch.setenv(SHADOW_PERTURB_VARIABLE, "rank=0,group=0,seq=2")
    install_from_environment()
    ((directory, keep, perturb, shadow),) = installs
    assert (directory, keep) == (f"{tmp_path}/attempt", 4096)
    assert perturb.applies(1, "0", 5) and not perturb.applies(0, "0", 5)
    assert shadow.env == {"TORCH_DIST_USE_NCCL2": "1"}
    assert shadow.perturb.applies(0, "0", 2) and not shadow.perturb.applies(1, "0", 5)


def test_an_empty_shadow_variable_asks_for_no_shadow(installs, monkeypatch):
    monkeypatch.setenv(SHADOW_VARIABLE, "")
    install_from_environment()
    assert installs[0][3] is None
