"""Reading one side's records back (sides.py) from files written here as the recorder writes them:
each record checked against the recorder's schema, a damaged file named with its line and how to
go on, the last restart's attempt read, a second writer refused, kept tensors read as data only,
incomplete and missing ranks explained, and a shadow run split into its two sides."""

import json
import os

import pytest
import torch
from nccl_migrate.ab import sides
from nccl_migrate.ab.sides import RecordError


def _record(rank=0, group="0", seq=0, **changes) -> dict:
    entry = {"rank": rank, "group": group, "seq": seq, "op": "all_reduce", "t": 10.0 + (seq if isinstance(seq, int) else 0), "in_shapes": [[4]],
             "out_shapes": [[4]], "in": "i", "out": "o", "dtype": "float32"}
    entry.update(changes)
    return entry


def _write_records(directory, rank, *entries, raw: str = "") -> str:
    path = os.path.join(directory, f"rank{rank}.jsonl")
    with open(path, "w") as f:
        f.write("".join(json.dumps(e) + "\n" for e in entries) + raw)
    return path


def _meta(directory, rank, **changes) -> str:
    meta = {"rank": rank, "world_size": 2, "peak_rss_kib": 100, "memory": [[0.0, 1]]}
    meta.update(changes)
    path = os.path.join(directory, f"rank{rank}.meta.json")
    with open(path, "w") as f:
        json.dump(meta, f)
    return path


def _side(tmp_path, ranks=(0, 1)) -> str:
    directory = str(tmp_path / "side")
    os.makedirs(directory, exist_ok=True)
    for rank in ranks:
        _write_records(directory, rank, _record(rank, seq=0), _record(rank, seq=1))
        _meta(directory, rank)
    return directory


def _records(data, rank):
    return list(data.records(rank))


# --- reading a side --------------------------------------------------------------------------------

def test_a_side_reads_every_ranks_records_in_file_order_and_its_facts(tmp_path):
    directory = _side(tmp_path)
    with open(os.path.join(directory, "report_1.json"), "w") as f:
        json.dump({"communicators_created": [{"key": "cpu", "purpose": "world"}]}, f)
    for ignored in ("rankx.jsonl", "report_x.json", "notes.txt"):
        (tmp_path / "side" / ignored).write_text("{}")
    data = sides.load(directory)
    assert data.ranks() == [0, 1] and data.attempt == 0 and data.directory == directory
    assert _records(data, 1) == [_record(1, seq=0), _record(1, seq=1)]
    assert _records(data, 7) == []
    assert sorted(data.metas) == [0, 1] and data.metas[0]["memory"] == [[0.0, 1]]
    assert data.reports == {1: {"communicators_created": [{"key": "cpu", "purpose": "world"}]}}
    assert sides.missing_ranks(data) == [] and sides.incomplete_records(data) == []


def test_only_the_first_ranks_keep_their_memory_samples(tmp_path):
    directory = _side(tmp_path, ranks=())
    for rank in (sides.MEMORY_RANKS - 1, sides.MEMORY_RANKS):
        _meta(directory, rank, world_size=sides.MEMORY_RANKS + 1)
    data = sides.load(directory)
    assert data.metas[sides.MEMORY_RANKS - 1]["memory"] == [[0.0, 1]]
    assert data.metas[sides.MEMORY_RANKS]["memory"] == []
    assert sides.MEMORY_RANKS == 8


def test_a_restarted_job_is_read_from_its_last_attempt(tmp_path):
    directory = _side(tmp_path)
    later = os.path.join(directory, "attempt2")
    os.makedirs(later)
    os.makedirs(os.path.join(directory, "attempt1"))
    _write_records(later, 0, _record(0, seq=5))
    data = sides.load(directory)
    assert data.attempt == 2 and data.directory == later
    assert data.ranks() == [0] and _records(data, 0) == [_record(0, seq=5)]


def test_a_missing_directory_is_named(tmp_path):
    with pytest.raises(RecordError, match=rf"^{tmp_path}/nope: no such directory of records$"):
        sides.load(str(tmp_path / "nope"))


def test_a_second_writer_is_refused_with_the_fix(tmp_path):
    directory = _side(tmp_path)
    for host, pid in (("node7", 42), ("node8", 43)):
        marker = {"rank": 1, "path": os.path.join(directory, "rank1.jsonl"), "pid": pid, "host": host}
        with open(os.path.join(directory, f"rank1.jsonl.second-writer.{host}.{pid}"), "w") as f:
            json.dump(marker, f)
    with pytest.raises(RecordError) as caught:
        sides.load(directory)
    assert str(caught.value) == (f"{directory}: two processes recorded rank 1 (rank1.jsonl): does the job start its own "
                                 "ranks (mp.spawn, or a launcher inside the script)? use --nproc 1; or the directory "
                                 "held an earlier run's records: use an empty one (pid 42 on node7 found it taken; 2 "
                                 "such file(s))")


@pytest.mark.parametrize("name, content, why", [
    ("rank0.meta.json", "{", ("not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
                             "(char 1)); the file was cut short or garbled")),
    ("rank0.meta.json", "[]", ("not a JSON object; not written by nccl-migrate (or damaged): remove it, or rerun the "
                              "side")),
    ("rank0.meta.json", '{"rank": 0, "world_size": 2}', ("field 'peak_rss_kib' is missing or not a number; not written "
                                                        "by nccl-migrate (or damaged): remove it, or rerun the side")),
    ("rank0.meta.json", '{"rank": true, "world_size": 2, "peak_rss_kib": 1}',
     "field 'rank' is missing or not int; not written by nccl-migrate (or damaged): remove it, or rerun the side"),
    ("report_0.json", '{"communicators_created": {}}', ("field 'communicators_created' is missing or not list; not "
                                                       "written by nccl-migrate (or damaged): remove it, or rerun "
                                                       "the side")),
    ("report_0.json", '{"communicators_created": [{"key": "cpu"}]}',
     ("a communicator without its key or purpose; not written by nccl-migrate (or damaged): remove it, or rerun the "
     "side")),
    ("report_0.json", '{"communicators_created": [{"purpose": "world"}]}',
     ("a communicator without its key or purpose; not written by nccl-migrate (or damaged): remove it, or rerun the "
     "side")),
    ("report_0.json", '{"communicators_created": ["cpu"]}',
     ("a communicator without its key or purpose; not written by nccl-migrate (or damaged): remove it, or rerun the "
     "side")),
], ids=["meta-cut-short", "meta-not-an-object", "meta-without-peak", "meta-rank-a-bool", "report-not-a-list",
        "communicator-without-purpose", "communicator-without-key", "communicator-not-an-object"])
def test_a_damaged_meta_or_report_is_named_with_what_is_wrong(tmp_path, name, content, why):
    directory = _side(tmp_path)
    (tmp_path / "side" / name).write_text(content)
    with pytest.raises(RecordError) as caught:
        sides.load(directory)
    assert str(caught.value) == f"{directory}/{name}: {why}"


def test_a_meta_that_cannot_be_read_is_named(tmp_path):
    directory = _side(tmp_path)
    os.unlink(os.path.join(directory, "rank0.meta.json"))
    os.mkdir(os.path.join(directory, "rank0.meta.json"))
    with pytest.raises(RecordError, match=rf"^{directory}/rank0.meta.json: cannot be read \(Is a directory\)$"):
        sides.load(directory)


DAMAGE = "; the record is damaged (a process killed while writing, or two processes writing one file); rerun the side"


@pytest.mark.parametrize("lines, number, why", [
    ([_record(), "{oops"], 2, ("not a JSON record (Expecting property name enclosed in double quotes: line 1 column 2 "
                              "(char 1))")),
    (["[1]"], 1, "not a JSON object"),
    ([_record(seq="0")], 1, "field 'seq' is missing or not int"),
    ([_record(t=True)], 1, "field 't' is missing or not a number"),
    ([{k: v for k, v in _record().items() if k != "out_shapes"}], 1, "field 'out_shapes' is missing or not list"),
    ([{k: v for k, v in _record().items() if k != "in"}], 1, "field 'in' is missing or not str or null"),
    ([_record(out=3)], 1, "field 'out' is missing or not str or null"),
    ([_record(), _record(rank=1, seq=1)], 2, "a record of rank 1 in rank 0's file"),
    ([_record(), _record(seq=1), _record(seq=1)], 3, "group 0 seq 1 recorded twice (first on line 2)"),
    ([_record(seq=False)], 1, "field 'seq' is missing or not int"),
], ids=["garbled", "not-an-object", "seq-a-string", "t-a-bool", "no-out-shapes", "no-in", "out-a-number",
        "another-ranks", "twice", "seq-false"])
def test_a_damaged_record_is_named_with_its_file_and_line(tmp_path, lines, number, why):
    directory = _side(tmp_path, ranks=())
    path = _write_records(directory, 0, raw="".join((ln if isinstance(ln, str) else json.dumps(ln)) + "\n"
                                                    for ln in lines))
    with pytest.raises(RecordError) as caught:
        _records(sides.load(directory), 0)
    assert str(caught.value) == f"{path}, line {number}: {why}{DAMAGE}"


def test_null_digests_and_blank_lines_are_whole_records(tmp_path):
    directory = _side(tmp_path, ranks=())
    entry = _record(**{"in": None, "out": None, "dtype": None, "t": 3})
    _write_records(directory, 0, entry, raw="\n" + json.dumps(_record(seq=1)) + "\n")
    assert _records(sides.load(directory), 0) == [entry, _record(seq=1)]


def test_a_last_record_cut_short_is_damage_unless_the_side_failed(tmp_path):
    directory = _side(tmp_path, ranks=())
    path = _write_records(directory, 0, _record(), raw='{"rank": 0, "gro')
    with pytest.raises(RecordError, match=rf"^{path}, line 2: the last record is cut short; the record is damaged"):
        _records(sides.load(directory), 0)
    data = sides.load(directory)
    data.accept_cut_end = True
    assert _records(data, 0) == [_record()]
    assert [n for n, _ in sides.read_records(path, accept_cut_end=True)] == [1]
    with pytest.raises(RecordError, match="the last record is cut short"):
        list(sides.read_records(path))  # by default, damage


def test_bytes_that_are_not_utf_8_in_a_record_are_read_not_a_traceback(tmp_path):
    directory = _side(tmp_path, ranks=())
    path = _write_records(directory, 0)
    with open(path, "wb") as f:  # a byte no UTF-8 text holds, inside two records' op names
        f.write(json.dumps(_record(op="allQreduce")).encode().replace(b"Q", b"\xff") + b"\n")
        f.write(json.dumps(_record(seq=1, op="allQreduce")).encode().replace(b"Q", b"\xff") + b"\n")
    records = _records(sides.load(directory), 0)
    assert [r["seq"] for r in records] == [0, 1] and records[1]["op"] == "all\ufffdreduce"
    assert sides.RecordedSide(directory).attempt == 0 and sides.RecordedSide(directory).accept_cut_end is False


def test_a_transform_turns_or_drops_each_record(tmp_path):
    directory = _side(tmp_path)
    data = sides.load(directory)
    data.transform = lambda e: None if e["seq"] == 0 else dict(e, op="x")
    assert _records(data, 0) == [_record(0, seq=1, op="x")]


# --- kept tensors --------------------------------------------------------------------------------

def _kept_side(tmp_path, kept) -> tuple:
    directory = _side(tmp_path, ranks=())
    os.makedirs(os.path.join(directory, "tensors"))
    torch.save(kept, os.path.join(directory, "tensors", "r0-g0-s0.pt"))
    return sides.SideData(directory), _record(kept="r0-g0-s0.pt")


def test_kept_tensors_are_read_back(tmp_path):
    kept = {"in": [torch.ones(2)], "out": [torch.full((2,), 2.0)]}
    data, entry = _kept_side(tmp_path, kept)
    read = data.tensors(entry)
    assert read["in"][0].tolist() == [1.0, 1.0] and read["out"][0].tolist() == [2.0, 2.0]
    assert data.tensors(_record()) is None
    assert sides.RecordedSide.tensors is sides.SideData.tensors


@pytest.mark.parametrize("name", ["../r0.pt", "", ".", "..", "/etc/passwd", 3])
def test_kept_tensors_named_outside_the_sides_folder_are_refused(tmp_path, name):
    data, _ = _kept_side(tmp_path, {"in": [], "out": []})
    with pytest.raises(RecordError) as caught:
        data.tensors(_record(seq=4, group="1", kept=name))
    assert str(caught.value) == (f"{data.directory}: rank 0, group 1, seq 4 names kept tensors {name!r}, not a file in "
                                 "tensors/; the record is damaged or was not written by nccl-migrate ab: rerun the side")


@pytest.mark.parametrize("kept, why", [([torch.ones(1)], "(rank 0, group 0, seq 0)"),
                                       ({"in": [], "out": "x"}, "(rank 0, group 0, seq 0)"),
                                       ({"in": (), "out": []}, "(rank 0, group 0, seq 0)")])
def test_a_kept_file_of_another_shape_is_refused(tmp_path, kept, why):
    data, entry = _kept_side(tmp_path, kept)
    with pytest.raises(RecordError) as caught:
        data.tensors(entry)
    assert str(caught.value) == f"{data.directory}/tensors/r0-g0-s0.pt: not kept tensors of nccl-migrate ab {why}"


class _Runs:
    def __reduce__(self):
        return os.system, ("true",)


def test_a_kept_file_that_would_run_code_or_cannot_be_read_is_named(tmp_path):
    data, entry = _kept_side(tmp_path, {"in": [], "out": []})
    path = os.path.join(data.directory, "tensors", "r0-g0-s0.pt")
    torch.save({"in": [_Runs()], "out": []}, path)
    with pytest.raises(RecordError) as caught:
        data.tensors(entry)
    text = str(caught.value)
    assert text.startswith(f"{path}: cannot be read as kept tensors: torch.load(weights_only=True) refused it (")
    assert "GLOBAL posix.system" in text.split(" (", 1)[1]
    assert text.endswith("and nothing in it was run; it was not written by nccl-migrate ab for rank 0, group 0, seq "
                         "0, or it was damaged or tampered with: rerun the side with --keep-tensors, or without it "
                         "to compare digests alone")
    os.unlink(path)
    with pytest.raises(RecordError) as caught:
        data.tensors(entry)
    assert str(caught.value).startswith(f"{path}: cannot be read (FileNotFoundError: [Errno 2] No such file or "
                                        "directory: ")
    assert str(caught.value).endswith("; it holds the kept tensors of rank 0, group 0, seq 0; rerun the side with "
                                      "--keep-tensors, or without it to compare digests alone")
    torch.save({"in": [], "out": []}, path)
    with open(path, "r+b") as f:  # a zip archive cut short
        f.truncate(40)
    with pytest.raises(RecordError, match=rf"^{path}: cannot be read \(RuntimeError: "):
        data.tensors(entry)


# --- what a side lacks -----------------------------------------------------------------------------

def test_incomplete_records_say_why_and_how_many(tmp_path):
    directory = _side(tmp_path, ranks=())
    _meta(directory, 2, incomplete={"error": "No space left on device", "records_written": 5, "records_dropped": 2})
    _meta(directory, 1, incomplete="disk full")
    _meta(directory, 0)
    data = sides.load(directory)
    assert sides.incomplete_records(data) == [
        (f"rank 1's records are incomplete: disk full (? record(s) written, ? dropped); free space or fix {directory}, "
        "then rerun the side"),
        (f"rank 2's records are incomplete: No space left on device (5 record(s) written, 2 dropped); free space or fix "
        f"{directory}, then rerun the side")]


def test_missing_ranks_are_those_of_the_world_without_their_facts(tmp_path):
    directory = _side(tmp_path, ranks=())
    assert sides.missing_ranks(sides.load(directory)) == [0]  # nothing at all: rank 0 recorded nothing
    _meta(directory, 1, world_size=4)
    _meta(directory, 0, world_size=2)
    _write_records(directory, 5, _record(5))
    data = sides.load(directory)
    assert sides.missing_ranks(data) == [2, 3, 5]
    assert sides.missing_ranks(sides.SideData(directory, metas={0: {"rank": 0}})) == []
    assert sides.unrecorded_message(data, 5) == (
        "rank 5 recorded its ops (rank5.jsonl) but never wrote rank5.meta.json at exit: its process ended without "
        "Python's exit handlers (os._exit, as a child forked without exec by os.fork often ends; or it was killed), so "
        "its last records may be lost too, or it could not write the file (its stderr, in the job's output, says so); "
        "end such a process with sys.exit, or start ranks with multiprocessing (mp.spawn, any start method) instead "
        "of os.fork")
    assert sides.unrecorded_message(data, 2) == ("rank 2 recorded nothing (is nccl_migrate installed in the job's "
                                                 "Python, and TORCH_DEVICE_BACKEND_AUTOLOAD not 0?)")
    assert sides.unrecorded_message(sides.SideData(directory), 5).startswith("rank 5 recorded nothing")


def test_in_memory_side_data_gives_its_ranks_and_records_in_issue_order(tmp_path):
    late, early, other = _record(seq=0, t=5.0), _record(seq=1, t=1.0), _record(rank=3, seq=0)
    data = sides.SideData(str(tmp_path), ops={(0, "0", 0): late, (0, "0", 1): early, (3, "0", 0): other})
    assert data.ranks() == [0, 3]
    assert data.records(0) == [early, late] and data.records(3) == [other]
    tie_a, tie_b = _record(seq=2, t=1.0), _record(seq=1, t=1.0)
    assert sides.SideData(str(tmp_path), ops={(0, "0", 2): tie_a, (0, "0", 1): tie_b}).records(0) == [tie_b, tie_a]


def test_clear_removes_an_earlier_runs_records_and_nothing_else(tmp_path):
    directory = _side(tmp_path)
    keep = tmp_path / "side" / "job.log"
    keep.write_text("log")
    for name in ("report_0.json", "rank0.jsonl.second-writer.h.1", "side.h.1.json"):
        (tmp_path / "side" / name).write_text("{}")
    os.makedirs(os.path.join(directory, "tensors"))
    (tmp_path / "side" / "tensors" / "r0.pt").write_text("")
    (tmp_path / "side" / "tensors" / "notes").write_text("")
    os.makedirs(os.path.join(directory, "attempt1"))
    (tmp_path / "side" / "attempt1" / "rank0.jsonl").write_text("")
    removed = sides.clear(directory)
    assert sorted(os.path.relpath(p, directory) for p in removed) == sorted([
        "rank0.jsonl", "rank1.jsonl", "rank0.meta.json", "rank1.meta.json", "report_0.json",
        "rank0.jsonl.second-writer.h.1", "side.h.1.json", "tensors/r0.pt", "attempt1"])
    assert sorted(os.listdir(directory)) == ["job.log", "tensors"] and os.listdir(os.path.join(directory, "tensors")) \
        == ["notes"]
    assert sides.clear(directory) == []


# --- a shadow run as two sides ---------------------------------------------------------------------

def test_a_shadow_run_splits_into_the_primary_and_its_shadow(tmp_path):
    directory = _side(tmp_path, ranks=())
    shadowed = _record(seq=0, t=4.0, kept="k.pt", perturbed=True, ms=2.0,
                       shadow={"out": "s", "ms": 3.5, "measured": {"max_abs": 0.5}})
    failed = _record(seq=1, t=5.0, shadow={"out": None, "ms": None, "error": "boom"})
    skipped_late = _record(seq=2, t=9.0, shadow={"skipped": "issued from C++"})
    unshadowed_early = _record(seq=3, t=1.0)
    _write_records(directory, 0, shadowed, failed, skipped_late, unshadowed_early)
    _meta(directory, 0, backend="migrate-legacy", shadow_backend="migrate-nccl2", backend_class="X")
    with open(os.path.join(directory, "report_0.json"), "w") as f:
        json.dump({"communicators_created": []}, f)
    a, b, not_shadowed = sides.shadow_sides(sides.load(directory))
    primary = _records(a, 0)
    assert primary == [{k: v for k, v in shadowed.items() if k != "shadow"},
                       {k: v for k, v in failed.items() if k != "shadow"}]
    mirror = _records(b, 0)
    assert mirror == [dict({k: v for k, v in shadowed.items() if k not in ("shadow", "perturbed", "kept")}, out="s",
                           ms=3.5, measured={"max_abs": 0.5}),
                      dict({k: v for k, v in failed.items() if k != "shadow"}, out=None, ms=0.0, error="boom")]
    assert not_shadowed == {"count": 2, "first": {"rank": 0, "group": "0", "seq": 3, "op": "all_reduce",
                                                  "reason": "failed, or never completed, on the primary", "t": 1.0}}
    assert a.ranks() == b.ranks() == [0] and a.reports is b.reports and a.reports[0] == {"communicators_created": []}
    assert a.metas[0]["backend"] == "migrate-legacy"
    assert b.metas[0]["backend"] == "migrate-nccl2" and b.metas[0]["backend_class"] == "shadow groups"
    assert b.metas[0]["memory"] == [] and b.metas[0]["peak_rss_kib"] == 100
    assert a.directory == b.directory == directory


def test_the_first_op_not_shadowed_is_the_earliest_and_says_why(tmp_path):
    directory = _side(tmp_path, ranks=())
    _write_records(directory, 0, _record(seq=0, t=2.0, shadow={"skipped": "a group created before the recorder"}),
                   _record(seq=1, t=2.0, shadow={"skipped": "later in the same instant"}),
                   _record(seq=0, t=2.0, group="1", shadow={"skipped": "the same instant and seq, another group"}),
                   _record(seq=2, t=3.0))
    a, b, not_shadowed = sides.shadow_sides(sides.load(directory))
    assert _records(a, 0) == [] and _records(b, 0) == []
    assert not_shadowed["count"] == 4
    assert not_shadowed["first"]["seq"] == 0 and not_shadowed["first"]["reason"] == "a group created before the recorder"


def test_a_restarted_shadow_run_keeps_its_attempt_on_both_sides(tmp_path):
    directory = _side(tmp_path, ranks=())
    os.makedirs(os.path.join(directory, "attempt1"))
    _write_records(os.path.join(directory, "attempt1"), 0, _record(shadow={"out": "o", "ms": 1.0}))
    a, b, _ = sides.shadow_sides(sides.load(directory))
    assert a.attempt == b.attempt == 1
    assert _records(a, 0) == [_record()]


def test_kept_tensors_are_read_as_data_even_where_torch_is_told_to_load_code(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    data, entry = _kept_side(tmp_path, {"in": [_Runs()], "out": []})
    with pytest.raises(RecordError, match="refused it .*GLOBAL posix.system"):
        data.tensors(entry)


def test_a_kept_file_torch_cannot_parse_names_what_torch_refused(tmp_path):
    data, entry = _kept_side(tmp_path, {"in": [], "out": []})
    with open(os.path.join(data.directory, "tensors", "r0-g0-s0.pt"), "wb") as f:
        f.write(b"x" * 10)  # opcode 'x' (120) is no pickle opcode
    with pytest.raises(RecordError, match=r"torch.load\(weights_only=True\) refused it \(Unsupported operand 120\), "
                                          "and nothing in it was run"):
        data.tensors(entry)
