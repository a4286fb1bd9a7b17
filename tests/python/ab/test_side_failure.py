"""How a failed side failed, in the report's words (side_failure.py), from what a launcher saw and
files written here as ranks leave them: which rank died by which signal after which op, which were
still running at a deadline and where, ranks that vanished without their meta, and what the
comparison of a failed side leaves out. End-to-end runs of real faults are in test_ab_faults.py."""

import json
import os

from nccl_migrate.ab import side_failure
from nccl_migrate.ab.runner import SideRun
from nccl_migrate.ab.spec import Side


def _record(rank=0, seq=0, op="all_reduce", group="0", **more) -> dict:
    return dict({"rank": rank, "group": group, "seq": seq, "op": op, "t": 1.0 + seq}, **more)


def _records(directory, rank, *entries, tail=""):
    with open(os.path.join(directory, f"rank{rank}.jsonl"), "w") as f:
        f.write("".join(json.dumps(e) + "\n" for e in entries) + tail)


def _meta(directory, rank, **more):
    with open(os.path.join(directory, f"rank{rank}.meta.json"), "w") as f:
        json.dump(dict({"rank": rank, "pid": 1000 + rank}, **more), f)


def _run(directory, failure="side b failed", **facts) -> SideRun:
    return SideRun(Side("b", "rewritten"), str(directory), None, failure, 1.0, **facts)


# --- one rank's last record --------------------------------------------------------------------------

def test_the_last_record_is_the_last_finished_op_and_the_failed_one_after_it(tmp_path):
    path = tmp_path / "rank0.jsonl"
    _records(tmp_path, 0, _record(seq=0), _record(seq=1), _record(seq=2, error="peer died"),
             _record(seq=3, unfinished=True))
    done, failed, cut = side_failure.last_record(str(path))
    assert done == _record(seq=1) and failed == _record(seq=3, unfinished=True) and cut is False
    _records(tmp_path, 0, _record(seq=0), _record(seq=1, error="x"), tail='{"rank": 0, "se')
    done, failed, cut = side_failure.last_record(str(path))
    assert done == _record(seq=0) and failed == _record(seq=1, error="x") and cut is True


def test_lines_that_are_not_op_records_are_passed_over(tmp_path):
    path = tmp_path / "rank0.jsonl"
    _records(tmp_path, 0, _record(seq=0), {"op": "x", "seq": 1}, [1, 2], tail="garbage\n")
    assert side_failure.last_record(str(path)) == (_record(seq=0), None, False)
    _records(tmp_path, 0, _record(seq=0, unfinished=False))
    assert side_failure.last_record(str(path)) == (_record(seq=0, unfinished=False), None, False)


def test_a_rank_without_a_finished_op_or_a_file_has_no_last_record(tmp_path):
    path = tmp_path / "rank0.jsonl"
    _records(tmp_path, 0, _record(seq=0, error="boom"))
    assert side_failure.last_record(str(path)) == (None, _record(seq=0, error="boom"), False)
    _records(tmp_path, 0)
    assert side_failure.last_record(str(path)) == (None, None, False)
    assert side_failure.last_record(str(tmp_path / "nope.jsonl")) == (None, None, False)


def test_a_long_file_is_read_from_its_end_a_chunk_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(side_failure, "TAIL_BYTES", 64)
    path = tmp_path / "rank0.jsonl"
    pad = "p" * 40
    _records(tmp_path, 0, _record(seq=0, pad=pad), *[_record(seq=n, error=pad) for n in range(1, 30)])
    done, failed, cut = side_failure.last_record(str(path))
    assert done == _record(seq=0, pad=pad) and failed == _record(seq=29, error=pad) and not cut
    # The chunk's first line, cut by the chunk's start, is never taken for a record.
    _records(tmp_path, 0, _record(seq=0), _record(seq=1, op="x" * 200), _record(seq=2, error="e"))
    monkeypatch.setattr(side_failure, "TAIL_BYTES", 150)
    assert side_failure.last_record(str(path))[0]["seq"] == 1


def test_cut_by_failure_is_an_error_or_an_unfinished_op():
    assert side_failure.cut_by_failure({"error": None})
    assert side_failure.cut_by_failure({"unfinished": 1})
    assert not side_failure.cut_by_failure({"unfinished": 0}) and not side_failure.cut_by_failure({})


# --- a rank that died ----------------------------------------------------------------------------------

def test_a_rank_killed_after_an_op_is_named_with_its_signal_and_the_others_after_it(tmp_path):
    _records(tmp_path, 2, _record(2, seq=6), _record(2, seq=7, error="x" * 400))
    run = _run(tmp_path, ranks=[{"rank": 2, "returncode": -9}, {"rank": 1, "returncode": 1},
                                {"rank": 3, "returncode": None}, {"rank": 0, "returncode": None},
                                {"rank": 4, "returncode": -6}])
    fault = side_failure.explain(run)
    assert fault == {
        "kind": "died", "rank": 2, "exit_code": -9, "signal": "SIGKILL", "ended_by_launcher": [0, 3],
        "last_record": {"group": "0", "seq": 6, "op": "all_reduce"},
        "failed_op": {"group": "0", "seq": 7, "op": "all_reduce", "error": "x" * 300},
        "text": "side b: rank 2 died by SIGKILL after all_reduce #6 of group 0 (its last record); its all_reduce #7 "
                f"of group 0 failed: {'x' * 200}; then rank 1 exited with status 1, rank 4 died by SIGABRT; ranks 0, 3 were ended by the "
                "launcher",
        "own_output": {"rank": 2, "shows": "nothing", "lines": [], "logs": []}}


def test_a_rank_that_exited_before_recording_is_said_so(tmp_path):
    run = _run(tmp_path, ranks=[{"rank": 0, "returncode": 3}, {"rank": 1, "returncode": None}])
    fault = side_failure.explain(run, name_side=False)
    assert fault == {"kind": "exited", "rank": 0, "exit_code": 3, "signal": None, "ended_by_launcher": [1],
                     "last_record": None,
                     "text": "rank 0 exited with status 3 before recording any op; rank 1 was ended by the launcher",
                     "own_output": {"rank": 0, "shows": "nothing", "lines": [], "logs": []}}


def test_a_last_record_cut_short_is_named_and_an_unknown_signal_by_its_number(tmp_path):
    _records(tmp_path, 0, _record(seq=4), tail='{"ra')
    fault = side_failure.explain(_run(tmp_path, ranks=[{"rank": 0, "returncode": -77}]))
    assert fault["signal"] == "signal 77" and fault["cut_short"] is True
    assert fault["text"] == ("side b: rank 0 died by signal 77 after all_reduce #4 of group 0 (its last record; the "
                             "one after it was cut short, the process killed while writing it)")
    assert fault["ended_by_launcher"] == []


def test_an_unfinished_last_op_is_not_called_failed(tmp_path):
    _records(tmp_path, 0, _record(seq=4), _record(seq=5, unfinished=True))
    fault = side_failure.explain(_run(tmp_path, ranks=[{"rank": 0, "returncode": -15}]))
    assert "failed_op" not in fault and "cut_short" not in fault
    assert fault["text"] == "side b: rank 0 died by SIGTERM after all_reduce #4 of group 0 (its last record)"


def test_the_last_restarts_records_are_read(tmp_path):
    _records(tmp_path, 0, _record(seq=1))
    os.makedirs(tmp_path / "attempt1")
    _records(tmp_path / "attempt1", 0, _record(seq=9))
    fault = side_failure.explain(_run(tmp_path, ranks=[{"rank": 0, "returncode": 1}]))
    assert fault["last_record"]["seq"] == 9


# --- the failed rank's own words ------------------------------------------------------------------------

def _log(path, *lines):
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


OWN_TRACEBACK = ["Traceback (most recent call last):", '  File "job.py", line 9, in <module>',
                 "    raise RuntimeError('boom')", "RuntimeError: boom"]
PEER_ERROR = ["[rank0]: Traceback (most recent call last):", '[rank0]:   File "job.py", line 11, in <module>',
              "[rank0]:     dist.all_reduce(t)",
              "[rank0]: torch.distributed.DistBackendError: all_reduce failed: Connection closed by peer"]


def test_the_failed_rank_is_quoted_by_its_own_traceback_not_its_peers_later_errors(tmp_path):
    log = _log(tmp_path / "job.log", "[rank1] rank 1 step 0", "[rank0] rank 0 step 0",
               *(f"[rank1] [rank1]: {line}" for line in OWN_TRACEBACK),
               "[rank1] [rank1]:[W1207 07:54:08.1 ProcessGroup.cpp:1] destroy_process_group() was not called",
               *(f"[rank0] {line}" for line in PEER_ERROR), "W1207 07:54:08.2 api.py:1028] Sending process 9 SIGTERM")
    run = SideRun(Side("b", "rewritten"), str(tmp_path), log, "side b failed", 1.0,
                  [{"rank": 1, "returncode": 1}, {"rank": 0, "returncode": None}])
    fault = side_failure.explain(run)
    assert fault["own_output"] == {"rank": 1, "shows": "traceback", "lines": OWN_TRACEBACK, "logs": [log]}


def test_a_traceback_with_its_causes_is_quoted_whole_and_the_one_that_ended_the_rank_is_chosen(tmp_path):
    caught = ["Traceback (most recent call last):", "  File 'a.py', line 1", "ValueError: handled, printed"]
    chained = ["Traceback (most recent call last):", "  File 'b.py', line 2", "KeyError: 'x'", "",
               "During handling of the above exception, another exception occurred:", "",
               "Traceback (most recent call last):", "  File 'b.py', line 4", "RuntimeError: the end",
               "  with a second line of its message"]
    # torch 2.11's torchrun prefixes its local rank ([default1]:); torch's excepthook names the rank.
    log = _log(tmp_path / "job.host.1.log", *(f"[default1]:{line}" for line in caught),
               *(f"[default1]:[rank1]: {line}" if line else "[default1]:" for line in chained),
               "[default1]:[rank1]:[E1207 12:00:00.0 x.cc:1] a C++ log line after it")
    run = SideRun(Side("b", "rewritten"), str(tmp_path), None, "side b failed", 1.0, [{"rank": 1, "returncode": 1}])
    own = side_failure.explain(run)["own_output"]
    assert own["shows"] == "traceback" and own["logs"] == [log]
    assert own["lines"] == chained  # the uncaught one, not a traceback the job printed and went on


def test_without_torchs_excepthook_the_last_traceback_is_the_one_that_ended_it(tmp_path):
    first = ["Traceback (most recent call last):", "  File 'a.py', line 1", "ValueError: printed and handled"]
    log = _log(tmp_path / "job.log", *(f"[rank3] {line}" for line in first + OWN_TRACEBACK), "[rank2] unrelated")
    assert side_failure.own_output(_run(tmp_path), 3, by_signal=False) == \
        {"rank": 3, "shows": "traceback", "lines": OWN_TRACEBACK, "logs": [log]}


def test_a_rank_killed_by_a_signal_is_quoted_by_its_last_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(side_failure, "OWN_LINES", 3)
    log = _log(tmp_path / "job.log", *(f"[rank1] line {i}" for i in range(6)), "[rank0] a peer's error",
               *OWN_TRACEBACK)  # lines of no rank are nobody's
    fault = side_failure.explain(_run(tmp_path, ranks=[{"rank": 1, "returncode": -9}]))
    assert fault["own_output"] == {"rank": 1, "shows": "last lines", "lines": ["line 3", "line 4", "line 5"],
                                   "logs": [log]}


def test_a_long_traceback_keeps_its_start_and_its_end(tmp_path, monkeypatch):
    monkeypatch.setattr(side_failure, "TRACEBACK_LINES", 10)
    frames = [f"  File 'deep.py', line {i}" for i in range(20)]
    _log(tmp_path / "job.log", *(f"[rank0] [rank0]: {line}" for line in
                                 ["Traceback (most recent call last):", *frames, "RecursionError: too deep"]))
    lines = side_failure.own_output(_run(tmp_path), 0, by_signal=False)["lines"]
    assert lines == ["Traceback (most recent call last):", *frames[:4], "... (13 lines left out)", *frames[-3:],
                     "RecursionError: too deep"]


# --- a side that hung ------------------------------------------------------------------------------------

def test_a_hung_side_names_each_rank_running_at_the_deadline_and_where(tmp_path):
    _records(tmp_path, 0, _record(seq=3))
    _records(tmp_path, 1, _record(1, seq=2))
    _meta(tmp_path, 0, pid=500, ended_by={"signal": "SIGTERM", "inside": [_record(seq=4), _record(seq=5, op="b")]})
    _meta(tmp_path, 1, pid=501, ended_by={"signal": "SIGTERM", "inside": [_record(1, seq=3)]})
    _meta(tmp_path, 2, pid=502)
    run = _run(tmp_path, timed_out=True, timeout=30.0,
               running_at_deadline=[{"pid": 501, "rank": 7, "stopped": True}, {"pid": 500, "rank": None},
                                    {"pid": 999, "rank": None, "stopped": False}])
    fault = side_failure.explain(run)
    assert fault["kind"] == "hung" and fault["timeout"] == 30.0
    assert fault["text"] == (
        "side b hung: the job ran past its timeout (30 s) and was ended; still running at the deadline: rank 0 inside "
        "all_reduce #4 of group 0 and 1 more op(s) after all_reduce #3 of group 0 (its last record), rank 1 stopped "
        "(by SIGSTOP or a debugger: it could not answer) inside all_reduce #3 of group 0 after all_reduce #2 of group "
        "0 (its last record), pid 999 (no rank known)")
    assert fault["running"] == [
        {"rank": 0, "pid": 500, "stopped": False, "inside": [_record(seq=4), _record(seq=5, op="b")],
         "last_record": {"group": "0", "seq": 3, "op": "all_reduce"}},
        {"rank": 1, "pid": 501, "stopped": True, "inside": [_record(1, seq=3)],
         "last_record": {"group": "0", "seq": 2, "op": "all_reduce"}},
        {"rank": None, "pid": 999, "stopped": False}]


def test_without_the_launchers_list_the_ranks_metas_say_who_was_running(tmp_path):
    _meta(tmp_path, 1, ended_by={"signal": "SIGTERM", "inside": []})
    _meta(tmp_path, 0, ended_by="not a dict")
    run = _run(tmp_path, timed_out=True, timeout=None,
               running_at_deadline=[{"pid": 77, "rank": 3}])
    fault = side_failure.explain(run, name_side=False)
    assert fault["text"] == ("the side hung: the job ran past its timeout (its limit) and was ended; still running at "
                             "the deadline: rank 1 before recording any op, rank 3 before recording any op")
    assert [(r["rank"], r["pid"]) for r in fault["running"]] == [(1, 1001), (3, 77)]


def test_processes_of_no_known_rank_are_named_by_pid_in_order(tmp_path):
    run = _run(tmp_path, timed_out=True, timeout=1.0,
               running_at_deadline=[{"pid": 999, "rank": None}, {"pid": 5, "rank": None}])
    fault = side_failure.explain(run)
    assert [r["pid"] for r in fault["running"]] == [5, 999]


def test_a_side_that_timed_out_before_any_rank_recorded_did_not_hang(tmp_path):
    fault = side_failure.explain(_run(tmp_path, timed_out=True, timeout=5.0))
    assert fault == {"kind": "hung", "timeout": 5.0, "running": [],
                     "text": "side b: the job ran past its timeout (5 s) and was ended before any rank recorded an op "
                             "(did the rendezvous wait for a node that never came?)"}
    _records(tmp_path, 0, _record())
    assert side_failure.explain(_run(tmp_path, timed_out=True, timeout=2.5), name_side=False)["text"] == \
        "the job ran past its timeout (2.5 s) and was ended"


# --- ranks that vanished, with no launcher's word ------------------------------------------------------

def test_ranks_without_a_launchers_word_are_told_by_their_files(tmp_path):
    _records(tmp_path, 0, _record(seq=1))
    _records(tmp_path, 1, _record(1, seq=2))
    _records(tmp_path, 2, _record(2, seq=3))
    _meta(tmp_path, 1, ended_by={"signal": "SIGTERM", "inside": [_record(1, seq=3, op="broadcast")]})
    _meta(tmp_path, 2, ended_by={"signal": "SIGINT"})
    fault = side_failure.explain(_run(tmp_path, failure="launcher failed"))
    assert fault == {
        "kind": "died", "ranks_without_meta": [0], "ended_by_signal": [1, 2],
        "text": "side b: rank 0 ended without writing its meta (killed by a signal it could not handle, such as "
                "SIGKILL, or crashed) after all_reduce #1 of group 0 (its last record); rank 1 was ended by SIGTERM "
                "inside broadcast #3 of group 0 after all_reduce #2 of group 0 (its last record); rank 2 was ended "
                "by SIGINT after all_reduce #3 of group 0 (its last record)"}


def test_a_side_that_did_not_fail_has_ranks_without_meta_but_no_fault(tmp_path):
    _records(tmp_path, 0, _record())
    assert side_failure.explain(_run(tmp_path, failure=None)) is None
    _meta(tmp_path, 0, ended_by={"signal": "SIGTERM"})
    fault = side_failure.explain(_run(tmp_path, failure=None))
    assert fault["kind"] == "ended" and fault["ranks_without_meta"] == [] and fault["ended_by_signal"] == [0]
    assert fault["text"] == "side b: rank 0 was ended by SIGTERM after all_reduce #0 of group 0 (its last record)"


def test_a_failure_with_nothing_to_say_about_ranks_is_the_launchers_word(tmp_path):
    (tmp_path / "rank0.meta.json").write_text("{")  # a damaged meta: reading the side names it
    (tmp_path / "rankx.jsonl").write_text("")
    assert side_failure.explain(_run(tmp_path, failure="side b: torchrun rejected --nnodes")) == \
        {"kind": "failed", "text": "side b: torchrun rejected --nnodes"}
    # Ranks that ended without a return code (the launcher ended them) are not the cause.
    assert side_failure.explain(_run(tmp_path, failure="x", ranks=[{"rank": 0, "returncode": None}])) == \
        {"kind": "failed", "text": "x"}
    assert side_failure.explain(_run(str(tmp_path / "never-made"), failure=None)) is None


# --- what the comparison of a failed side leaves out ------------------------------------------------

class _Recorded:
    def __init__(self, transform=None):
        self.transform, self.accept_cut_end = transform, False


def test_a_failed_sides_cut_ops_are_left_out_and_counted():
    data = _Recorded()
    left_out = side_failure.compare_up_to_failure(data)
    assert data.accept_cut_end is True and left_out == {"count": 0}
    assert data.transform(_record()) == _record()
    assert data.transform(_record(error="e")) is None and data.transform(_record(unfinished=True)) is None
    assert left_out == {"count": 2}


def test_a_transform_already_there_still_applies_to_what_is_kept():
    data = _Recorded(transform=lambda e: dict(e, mirrored=True))
    left_out = side_failure.compare_up_to_failure(data)
    assert data.transform(_record()) == _record(mirrored=True)
    assert data.transform(_record(error="e")) is None and left_out["count"] == 1


def test_a_record_of_exactly_the_three_fields_is_a_record(tmp_path):
    (tmp_path / "rank0.jsonl").write_text(json.dumps({"op": "barrier", "seq": 2, "group": "0"}) + "\n")
    assert side_failure.last_record(str(tmp_path / "rank0.jsonl"))[0] == {"op": "barrier", "seq": 2, "group": "0"}


def test_a_chunk_that_is_the_whole_file_reads_its_first_line(tmp_path, monkeypatch):
    path = tmp_path / "rank0.jsonl"
    _records(tmp_path, 0, _record(seq=0), _record(seq=1, error="e"))
    monkeypatch.setattr(side_failure, "TAIL_BYTES", os.path.getsize(path))
    assert side_failure.last_record(str(path))[0] == _record(seq=0)


def test_a_chunk_starting_inside_a_line_never_reads_that_lines_tail(tmp_path, monkeypatch):
    # The tail of the second line is itself a record; read from its start, the line is garbage.
    path = tmp_path / "rank0.jsonl"
    tail = json.dumps(_record(seq=9))
    _records(tmp_path, 0, _record(seq=0), tail="garbage " + tail + "\n" + json.dumps(_record(seq=10, error="e")) + "\n")
    monkeypatch.setattr(side_failure, "TAIL_BYTES", os.path.getsize(path) - path.read_text().index(tail))
    assert side_failure.last_record(str(path))[0] == _record(seq=0)


def test_every_readable_meta_is_read_past_a_damaged_one(tmp_path):
    (tmp_path / "rank0.meta.json").write_text("{")
    for rank in range(1, 6):
        _meta(tmp_path, rank)
    assert sorted(side_failure._metas(str(tmp_path))) == [1, 2, 3, 4, 5]
