"""The recorder of one rank, in-process and never installed: a Recorder over a world of one on
Gloo, its ops issued through a wrapper made around torch's function (not patched into
torch.distributed) or straight from torch (seen by the group's hooks), its records and meta read
back from the files it writes. termination.install is stood in for: it would take this process's
SIGTERM."""

import json
import os
import signal
import time

import pytest
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
from nccl_migrate.ab import (
    KEEP_VARIABLE,
    RECORD_VARIABLE,
    SHADOW_VARIABLE,
    active,
    dispatcher_calls,
    recorder_threads,
)
from nccl_migrate.ab import (
    recorder as recorder_module,
)
from nccl_migrate.ab.digest import digest_of
from nccl_migrate.ab.op_table import BY_FUNCTION, OpView
from nccl_migrate.ab.perturb import Perturbation
from nccl_migrate.ab.recorder import Recorder, install_from_environment
from nccl_migrate.ab.wrappers import wrap_op
from torch_support import requires_torch


@pytest.fixture
def rec(world_of_one, make):
    r = make()
    r.initialised(0.25)
    return r


def records(rec) -> list[dict]:
    with open(os.path.join(rec.directory, f"rank{rec.rank}.jsonl")) as f:
        return [json.loads(line) for line in f]


def meta(rec) -> dict:
    with open(os.path.join(rec.directory, f"rank{rec.rank}.meta.json")) as f:
        return json.load(f)


all_reduce = wrap_op("all_reduce", c10d.all_reduce)
broadcast = wrap_op("broadcast", c10d.broadcast)


# --- joining the world ---------------------------------------------------------------------------

def test_a_recorder_knows_its_rank_and_backend_once_the_world_exists(world_of_one, make, terminations):
    rec = make()
    assert rec.rank is None and rec.meta["rank"] is None and not terminations
    rec.initialised(0.25)
    assert (rec.rank, rec.meta["rank"], rec.meta["world_size"]) == (0, 0, 1)
    assert rec.meta["init_seconds"] == 0.25 and rec.meta["backend"] == "gloo"
    assert rec.meta["backend_class"] == "ProcessGroupGloo (gloo)"
    assert terminations == [rec]  # its SIGTERM now writes the records
    assert id(c10d._get_default_group()) in rec.watched


def test_an_op_before_the_wrapper_saw_the_world_joins_it_first(world_of_one, make, terminations):
    rec = make()
    all_reduce(torch.ones(2))
    assert rec.rank == 0 and terminations == [rec] and rec.meta["world_size"] == 1
    rec.close()
    assert [r["seq"] for r in records(rec)] == [0]


# --- what an op's record holds ----------------------------------------------------------------------

def test_a_python_op_is_recorded_with_its_call_and_its_digests(rec):
    t = torch.arange(4.0)
    all_reduce(t, op=dist.ReduceOp.MAX)
    all_reduce(t)
    rec.close()
    first, second = records(rec)
    assert {k: first[k] for k in ("rank", "group", "seq", "op", "dtype", "in_shapes", "out_shapes", "reduce_op",
                                   "peer")} == {"rank": 0, "group": "0", "seq": 0, "op": "all_reduce",
                                                "dtype": "float32", "in_shapes": [[4]], "out_shapes": [[4]],
                                                "reduce_op": "MAX", "peer": None}
    assert first["in"] == digest_of([torch.arange(4.0)]) and first["out"] == digest_of([torch.arange(4.0)])
    assert first["ms"] >= 0 and first["t"] <= second["t"]
    assert "via" not in first and "error" not in first and "kept" not in first and "perturbed" not in first
    assert (second["seq"], second["reduce_op"]) == (1, "SUM")
    assert meta(rec)["ops"] == 2 and meta(rec)["groups"] == {"0": [0]}


@requires_torch("process_group_hooks")
def test_an_op_issued_below_python_is_recorded_by_the_groups_hooks(rec):
    t = torch.ones(3)
    c10d.all_reduce(t)  # not through a wrapper: as DDP's reducer issues it
    c10d.broadcast(t, src=0)
    rec.close()
    reduced, broadcasted = records(rec)
    assert (reduced["op"], reduced["via"], reduced["seq"], reduced["reduce_op"]) == ("all_reduce", "hook", 0, None)
    assert reduced["in"] == reduced["out"] == digest_of([torch.ones(3)])
    assert (broadcasted["op"], broadcasted["seq"], broadcasted["peer"]) == ("broadcast", 1, 0)
    assert broadcasted["in"] == digest_of([torch.ones(3)])  # the root contributes its tensor


@requires_torch("process_group_hooks")
def test_a_hook_inside_a_wrapped_call_leaves_the_op_to_the_wrapper(rec):
    all_reduce(torch.ones(2))
    rec.close()
    assert len(records(rec)) == 1 and "via" not in records(rec)[0]


@requires_torch("process_group_hooks")
def test_hooks_of_a_recorder_no_longer_on_record_nothing(rec, make):
    other = make()  # a later recorder took over (a forked child's)
    c10d.all_reduce(torch.ones(2))
    rec.close()
    assert rec.count == 0 and not os.path.exists(os.path.join(rec.directory, "rank0.jsonl"))
    assert other.count == 0


@requires_torch("process_group_hooks")
def test_each_group_numbers_its_own_ops(rec):
    group = c10d.new_group(ranks=[0], backend="gloo")
    all_reduce(torch.ones(2))
    all_reduce(torch.ones(2), group=group)
    all_reduce(torch.ones(2))
    c10d.all_reduce(torch.ones(2), group=group)
    rec.close()
    name = str(group.group_name)
    assert [(r["group"], r["seq"]) for r in records(rec)] == [("0", 0), (name, 0), ("0", 1), (name, 1)]
    assert meta(rec)["groups"] == {"0": [0], name: [0]}
    assert id(group) in rec.watched


def test_each_direction_of_a_batch_is_numbered_with_the_lone_sends_and_recvs(rec):
    with rec.lock:
        assert rec._number_message("send", "0", 1) == ["send", "0/p2p 0>1", 0]
        assert rec._number_message("send", "0", 1) == ["send", "0/p2p 0>1", 1]
        assert rec._number_message("recv", "0", 1) == ["recv", "0/p2p 1>0", 0]
        assert rec._number_message("send", "0", 2) == ["send", "0/p2p 0>2", 0]
    assert rec.sequence == {"0/p2p 0>1": 2, "0/p2p 1>0": 1, "0/p2p 0>2": 1}


def test_a_batch_records_its_messages(rec):
    view = OpView(c10d._get_default_group(), [torch.ones(1)], [torch.ones(1)], messages=[("send", 1), ("recv", 1)])
    op = rec.begin(BY_FUNCTION["batch_isend_irecv"], view)
    assert op.entry["messages"] == [["send", "0/p2p 0>1", 0], ["recv", "0/p2p 1>0", 0]]
    assert op.entry["group"] == "0/batch 0"


def test_an_op_of_an_object_collective_says_so(rec):
    active.object_collective.name = "broadcast_object_list"
    try:
        all_reduce(torch.ones(1))
    finally:
        active.object_collective.name = None
    all_reduce(torch.ones(1))
    rec.close()
    first, second = records(rec)
    assert first["object_collective"] == "broadcast_object_list" and "object_collective" not in second


def test_an_op_without_tensors_has_no_dtype_or_input_digest(rec):
    op = rec.begin(BY_FUNCTION["barrier"], OpView(c10d._get_default_group()))
    assert op.entry["dtype"] is None and op.entry["in"] is None and op.in_future is None
    rec.finish(op)
    rec.close()
    assert records(rec)[0]["out"] is None


def test_a_large_input_on_the_host_is_digested_while_the_op_runs(rec, monkeypatch):
    monkeypatch.setattr(recorder_module, "has_spare_core", lambda: True)
    big = torch.ones(recorder_module.LATER_BYTES // 4)
    world = c10d._get_default_group()
    gather = BY_FUNCTION["all_gather_into_tensor"]
    op = rec.begin(gather, OpView(world, [big], [torch.zeros(4)]))
    assert op.in_future is not None and op.entry["in"] is None
    rec.finish(op)
    rec.close()
    assert records(rec)[0]["in"] == digest_of([big])
    # Below the threshold, or with no core to spare, or where the op writes what it reads, or where
    # the output overlaps the input, or seen by a hook: now.
    small = torch.ones(recorder_module.LATER_BYTES // 4 - 1)
    assert rec.begin(gather, OpView(world, [small], [torch.zeros(4)])).in_future is None
    assert rec.begin(BY_FUNCTION["all_reduce"], OpView(world, [big], [torch.zeros(4)])).in_future is None
    assert rec.begin(gather, OpView(world, [big], [big[:4]])).in_future is None
    assert rec.begin(gather, OpView(world, [big], [torch.zeros(4)]), via="hook").in_future is None
    monkeypatch.setattr(recorder_module, "has_spare_core", lambda: False)
    assert rec.begin(gather, OpView(world, [big], [torch.zeros(4)])).in_future is None
    monkeypatch.setattr(recorder_module, "has_spare_core", lambda: True)
    assert rec.begin(gather, OpView(world, [big], [torch.zeros(4)])).in_future is not None


def test_a_failed_op_is_recorded_with_its_error_and_no_output(rec):
    op = rec.begin(BY_FUNCTION["all_reduce"], OpView(c10d._get_default_group(), [torch.ones(2)], [torch.ones(2)]))
    rec.finish(op, error="RuntimeError: peer gone")
    rec.close()
    (entry,) = records(rec)
    assert entry["error"] == "RuntimeError: peer gone" and entry["out"] is None and entry["in"] is not None


# --- kept tensors and a planted divergence ------------------------------------------------------------

def test_tensors_of_ops_up_to_the_limit_are_kept_whole(world_of_one, make):
    rec = make(keep_bytes=32)
    rec.initialised(0.0)
    t = torch.arange(4.0)  # 16 bytes in, 16 out
    all_reduce(t)
    all_reduce(torch.ones(5))  # 40 bytes: over the limit
    rec.close()
    kept, not_kept = records(rec)
    assert kept["kept"] == "r0-g0-s0.pt" and "kept" not in not_kept
    saved = torch.load(os.path.join(rec.directory, "tensors", "r0-g0-s0.pt"))
    assert torch.equal(saved["in"][0], torch.arange(4.0)) and torch.equal(saved["out"][0], t)
    assert os.listdir(os.path.join(rec.directory, "tensors")) == ["r0-g0-s0.pt"]


def test_the_kept_file_of_a_p2p_channel_has_a_plain_name(world_of_one, make):
    rec = make(keep_bytes=1 << 20)
    rec.initialised(0.0)
    op = rec.begin(BY_FUNCTION["all_reduce"], OpView(c10d._get_default_group(), [torch.ones(1)], [torch.ones(1)]))
    op.entry["group"] = "0/p2p 1>2"
    rec.finish(op)
    assert os.listdir(os.path.join(rec.directory, "tensors")) == ["r0-g0_p2p_1_2-s0.pt"]


def test_kept_tensors_that_cannot_be_written_leave_the_op_to_its_digests(world_of_one, make, capsys, monkeypatch):
    rec = make(keep_bytes=1 << 20)
    rec.initialised(0.0)

    def full(path, save):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(recorder_module, "save_whole", full)
    all_reduce(torch.ones(2))
    rec.close()
    assert "kept" not in records(rec)[0]
    assert meta(rec)["incomplete"]["error"] == \
        "writing the kept tensors tensors/r0-g0-s0.pt failed: No space left on device"
    assert "rank 0: writing the kept tensors tensors/r0-g0-s0.pt failed" in capsys.readouterr().err


def test_a_planted_perturbation_changes_one_ops_output_only(world_of_one, make):
    rec = make(perturb=Perturbation("rank=0,group=0,seq=1"))
    rec.initialised(0.0)
    outputs = [torch.ones(2), torch.ones(2), torch.ones(2)]
    for t in outputs:
        all_reduce(t)
    rec.close()
    entries = records(rec)
    assert [e.get("perturbed") for e in entries] == [None, True, None]
    assert entries[1]["out"] != entries[1]["in"] and entries[0]["out"] == entries[0]["in"]
    assert not torch.equal(outputs[1], torch.ones(2))


# --- async ops ------------------------------------------------------------------------------------------

def test_an_async_op_is_recorded_when_the_job_waits_for_it(rec):
    work = all_reduce(torch.ones(2), async_op=True)
    assert rec.count == 0 and len(rec.pending) == 1
    work.wait()
    assert rec.count == 1 and rec.pending == []


def test_an_async_op_completed_unseen_is_recorded_at_the_next_op(rec):
    work = all_reduce(torch.ones(2), async_op=True)
    work._work.wait()  # complete, but the job never asked
    assert rec.count == 0
    all_reduce(torch.ones(2))
    assert rec.count == 2 and rec.pending == []
    rec.settle()
    assert rec.count == 2


def test_an_async_op_seen_complete_is_recorded_once(rec):
    work = all_reduce(torch.ones(2), async_op=True)
    while not work.is_completed():
        pass
    assert rec.count == 1
    work.wait()
    assert rec.count == 1


def test_an_op_of_several_works_waits_for_each(rec):
    op = rec.begin(BY_FUNCTION["all_reduce"], OpView(c10d._get_default_group(), [torch.ones(1)], [torch.ones(1)]))

    class Work:
        def __init__(self):
            self.done = False

        def is_completed(self):
            return self.done

    first, second = Work(), Work()
    wrapped = rec.defer(op, [first, None, second])
    assert wrapped[1] is None and len(op.works) == 2
    rec.waited(op)
    assert rec.count == 0
    first.done = True
    rec.observed(op, first)
    assert rec.count == 0 and op.seen_done == {id(first)}
    rec.observed(op, second)
    assert rec.count == 1 and rec.pending == []
    rec.waited(op)  # a late wait records nothing twice
    assert rec.count == 1


def test_ops_never_waited_for_are_recorded_unfinished_at_close(rec):
    class Work:
        def is_completed(self):
            return False

    op = rec.begin(BY_FUNCTION["all_reduce"], OpView(c10d._get_default_group(), [torch.ones(1)], [torch.ones(1)]))
    rec.defer(op, Work())
    hooked = rec.begin(BY_FUNCTION["broadcast"], OpView(c10d._get_default_group(), [torch.ones(1)], [torch.ones(1)]))
    rec.hooked[(1, 1)] = hooked
    rec.close()
    entries = records(rec)
    assert [(e["op"], e.get("unfinished"), e["out"]) for e in entries] == [("all_reduce", True, None),
                                                                          ("broadcast", True, None)]
    assert rec.pending == [] and rec.hooked == {}


# --- CUDA graph capture ------------------------------------------------------------------------------------

def test_no_graph_is_captured_on_a_machine_without_cuda_in_use():
    assert Recorder.capturing() is False


@requires_torch("process_group_hooks")
def test_an_op_issued_during_a_capture_is_counted_not_recorded(rec, monkeypatch):
    monkeypatch.setattr(Recorder, "capturing", staticmethod(lambda: True))
    c10d.all_reduce(torch.ones(2))
    c10d.all_reduce(torch.ones(2))
    assert rec.meta["captured_ops_not_recorded"] == 2 and rec.count == 0 and rec.hooked == {}


# --- the record file ---------------------------------------------------------------------------------

def test_records_go_to_a_file_opened_at_the_first_op(rec):
    path = os.path.join(rec.directory, "rank0.jsonl")
    assert not os.path.exists(path) and rec.out is None
    all_reduce(torch.ones(1))
    assert os.path.exists(path) and rec.out is not None and rec.memory.is_alive()


def test_a_second_recorder_of_the_rank_writes_nothing_and_says_why(rec, make, capsys):
    all_reduce(torch.ones(1))
    second = make(rec.directory)
    second.initialised(0.0)
    all_reduce(torch.ones(1))
    all_reduce(torch.ones(1))
    assert second.second_writer and second.count == 0 and second.out is None
    assert "two processes recorded rank 0 (rank0.jsonl)" in capsys.readouterr().err
    assert any(".second-writer" in name or "second" in name for name in os.listdir(rec.directory))
    second.close()
    rec.close()
    assert len(records(rec)) == 1 and meta(rec)["ops"] == 1


def test_a_record_directory_that_cannot_be_made_drops_the_records_and_says_so(world_of_one, make, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    rec = make(tmp_path / "file" / "records")
    rec.initialised(0.0)
    all_reduce(torch.ones(1))
    all_reduce(torch.ones(1))
    assert rec.unwritable and rec.dropped == 2 and rec.count == 0
    err = capsys.readouterr().err
    assert f"nccl-migrate ab: rank 0: creating {rec.directory}/rank0.jsonl failed: Not a directory; the comparison " \
           "will report this rank's records incomplete" in err
    assert err.count("creating") == 1  # said once
    rec.close()
    err = capsys.readouterr().err
    assert f"rank 0: writing {rec.directory}/rank0.meta.json failed: Not a directory; the comparison will find this " \
           "rank's process facts missing" in err


def test_the_meta_names_records_lost_to_a_failed_write(rec, monkeypatch):
    monkeypatch.setattr(recorder_threads, "WRITE_INTERVAL", 0.005)
    all_reduce(torch.ones(1))
    deadline = time.monotonic() + 10
    while rec.out.written < 1 and time.monotonic() < deadline:  # the writer drains every interval
        time.sleep(0.01)
    rec.out.failure = "writing rank0.jsonl failed after 1 record(s): No space left on device (ENOSPC)"
    rec.dropped = 2
    rec.out.dropped = 3
    rec.close()
    assert meta(rec)["incomplete"] == {"error": rec.out.failure, "records_written": 1, "records_dropped": 5}


def test_the_meta_of_a_rank_closed_at_exit(rec):
    all_reduce(torch.ones(1))
    rec.close()
    m = meta(rec)
    assert m["ops"] == 1 and m["wall_seconds"] > 0 and m["peak_rss_kib"] > 0 and m["memory"]
    assert m["pid"] == os.getpid() and m["shadow_backend"] is None and "incomplete" not in m
    assert m["memory"] == rec.memory.samples and not rec.memory.is_alive()
    assert rec.exiting() and rec.wait_closed(0)


def test_the_meta_names_the_shadow_backend(world_of_one, make):
    class Shadow:
        backend = "migrate-nccl2"

    rec = make(shadow=Shadow())
    rec.initialised(0.0)
    rec.close()
    assert meta(rec)["shadow_backend"] == "migrate-nccl2"


def test_a_process_that_never_joined_a_group_writes_no_meta(world_of_one, make, tmp_path):
    rec = make()
    rec.close()
    assert not os.path.exists(tmp_path / "records")
    assert rec.exiting() and rec.wait_closed(0)


def test_close_happens_once_and_only_in_the_process_that_made_the_recorder(rec):
    assert not rec.exiting() and not rec.wait_closed(0)
    rec.meta["pid"] = os.getpid() + 1  # a forked child's copy
    rec.close()
    assert not rec.exiting() and not rec.wait_closed(0)
    rec.meta["pid"] = os.getpid()
    rec.close()
    written = meta(rec)
    os.unlink(os.path.join(rec.directory, "rank0.meta.json"))
    rec.close()
    assert written and not os.path.exists(os.path.join(rec.directory, "rank0.meta.json"))


# --- ended by a signal -------------------------------------------------------------------------------

def test_a_rank_ended_by_a_signal_names_the_ops_it_was_inside(rec):
    all_reduce(torch.ones(1))
    first = rec.begin(BY_FUNCTION["all_reduce"], OpView(c10d._get_default_group(), [torch.ones(1)], [torch.ones(1)]))
    second = rec.begin(BY_FUNCTION["broadcast"], OpView(c10d._get_default_group(), [torch.ones(1)], [torch.ones(1)]))
    second.entry["t"] = first.entry["t"] - 1  # began earlier
    rec.end_by_signal(signal.SIGTERM)
    ended = meta(rec)["ended_by"]
    assert ended == {"signal": "SIGTERM", "inside": [{"group": "0", "seq": 2, "op": "broadcast"},
                                                     {"group": "0", "seq": 1, "op": "all_reduce"}],
                     "records_flushed": True}
    assert len(records(rec)) == 1 and rec.exiting() and rec.wait_closed(0)
    rec.end_by_signal(signal.SIGTERM)
    rec.close()  # nothing more once closed
    assert meta(rec)["ended_by"]["signal"] == "SIGTERM"


def test_a_rank_ended_before_its_first_op_writes_a_meta_without_flushing(rec):
    rec.end_by_signal(signal.SIGINT)
    assert meta(rec)["ended_by"] == {"signal": "SIGINT", "inside": []}


def test_a_signal_to_a_process_outside_the_world_or_a_forked_copy_writes_nothing(world_of_one, make, tmp_path):
    rec = make()
    rec.end_by_signal(signal.SIGTERM)
    assert rec.meta["ended_by"]["signal"] == "SIGTERM" and not os.path.exists(tmp_path / "records")
    assert rec.wait_closed(0)
    copy = make()
    copy.meta["pid"] = os.getpid() + 1
    copy.end_by_signal(signal.SIGTERM)
    assert "ended_by" not in copy.meta and not copy.exiting()


# --- asked for by the environment --------------------------------------------------------------------

def test_no_recorder_is_asked_for_without_the_variable(monkeypatch):
    monkeypatch.delenv(RECORD_VARIABLE, raising=False)
    assert install_from_environment() is None
    monkeypatch.setenv(RECORD_VARIABLE, "")
    assert install_from_environment() is None


def test_a_bad_keep_or_shadow_setting_is_named_before_anything_is_installed(monkeypatch, tmp_path):
    monkeypatch.setattr(active, "recorder", None)
    monkeypatch.setenv(RECORD_VARIABLE, str(tmp_path))
    monkeypatch.setenv(KEEP_VARIABLE, "1k")
    with pytest.raises(ValueError, match=r"^NCCL_MIGRATE_AB_KEEP='1k' is not valid; give a number of bytes "
                                         r"\(0 keeps no tensors\)$"):
        install_from_environment()
    monkeypatch.delenv(KEEP_VARIABLE)
    monkeypatch.setenv(SHADOW_VARIABLE, "{not json")
    with pytest.raises(ValueError, match="NCCL_MIGRATE_AB_SHADOW='{not json' is not valid"):
        install_from_environment()
    assert active.recorder is None


@requires_torch("process_group_hooks")
def test_a_hook_outside_any_recorder_forgets_the_dispatcher_call(rec, monkeypatch):
    forgotten = []
    monkeypatch.setattr(dispatcher_calls, "forget", lambda: forgotten.append(True))
    with active.inside:
        c10d.all_reduce(torch.ones(1))
    assert forgotten == [True] and rec.count == 0 and rec.hooked == {}
