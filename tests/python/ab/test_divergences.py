"""The divergent ops' facts on disk, classified once every rank is read: an op whose inputs did not
differ is the backend's; one whose inputs differed after its rank had already differed is
propagated; one whose inputs differed with nothing before is the job's own; values that cannot be
compared are their own class. Listed earliest first, sampled per class, streamed back in full."""

import sqlite3

import pytest

from nccl_migrate.ab import divergences
from nccl_migrate.ab.divergences import CAUSES, Divergences, ScratchError


def _op(seq, rank=0, group="0", **more):
    return dict({"rank": rank, "group": group, "seq": seq, "op": "all_reduce"}, **more)


def _classified(build):
    d = Divergences()
    build(d)
    return d.conclude()


def test_each_class_by_what_differed_going_in():
    def build(d):
        d.add((0, "0", 1), 1.0, 1, _op(1), False)  # nothing differed going in: the backend
        d.input_differed((1, "0", 2), 2.0)  # rank 1's input to seq 2 differed, rank 1 never before
        d.add((1, "0", 2), 2.0, 0, _op(2, rank=1), False)
        d.input_differed((0, "0", 3), 3.0)  # rank 0 differed at 1.0 already
        d.add((0, "0", 3), 3.0, 2, _op(3), False)
        d.add((2, "0", 4), 0.5, 0, _op(4, rank=2), True)  # one side's digest from a device
    result = _classified(build)
    assert result.counts() == {"backend_dependent_path": 0, "backend": 1, "propagated": 1, "job_nondeterminism": 1,
                               "not_compared": 1}
    listed = result.earliest()  # by position, then rank
    assert [(e["seq"], e["class"]) for e in listed] == [(2, "job_nondeterminism"), (4, "not_compared"), (1, "backend"),
                                                         (3, "propagated")]
    assert [e["cause"] for e in listed] == [CAUSES[e["class"]] for e in listed]
    assert [e["inputs_differed_on_ranks"] for e in listed] == [[1], [], [], [0]]
    assert sorted(result.each()) == [((0, "0", 1), 1, "backend"), ((0, "0", 3), 2, "propagated"),
                                     ((1, "0", 2), 0, "job_nondeterminism"), ((2, "0", 4), 0, "not_compared")]


def test_a_difference_within_tolerance_earlier_on_the_rank_makes_later_inputs_propagated():
    def build(d):
        d.differed_before(0, 5.0)
        d.differed_before(0, 1.0)
        d.differed_before(0, 9.0)  # the earliest stays
        d.input_differed((0, "0", 3), 2.0)
        d.add((0, "0", 3), 2.0, 3, _op(3), False)
        d.input_differed((1, "0", 3), 0.5)  # the same op's input on a rank that had not differed
    result = _classified(build)
    assert result.counts()["propagated"] == 1
    assert result.earliest()[0]["inputs_differed_on_ranks"] == [0, 1]


def test_an_input_that_differed_at_the_same_time_as_the_first_difference_is_the_jobs_own():
    def build(d):
        d.input_differed((0, "0", 1), 1.0)
        d.add((0, "0", 1), 1.0, 0, _op(1), False)  # its own first difference, not an earlier one
    assert _classified(build).counts()["job_nondeterminism"] == 1


def test_a_batch_is_judged_by_the_messages_it_received():
    def build(d):
        d.input_differed((1, "0/p2p 1>0", 0), 1.0)  # what rank 1 sent differed, its first difference
        d.add((0, "0/batch 0", 0), 2.0, 0, _op(0, group="0/batch 0"), False, received=[("0/p2p 1>0", 0)])
        d.add((0, "0/batch 0", 1), 3.0, 1, _op(1, group="0/batch 0"), False, received=[("0/p2p 2>0", 0)])
    result = _classified(build)
    listed = result.earliest()
    assert [(e["seq"], e["class"], e["inputs_differed_on_ranks"]) for e in listed] == [
        (0, "job_nondeterminism", [1]), (1, "backend", [])]


def test_the_earliest_are_ordered_by_op_order_then_rank_never_by_time_and_listed_up_to_the_limit(monkeypatch):
    """The ranks that diverge at one op are listed lowest first, however their clocks fell: the
    first divergence is the same on every run."""
    monkeypatch.setattr(divergences, "LISTED", 4)

    def build(d):
        for key, t, position in (((2, "0", 5), 0.1, 5), ((1, "0", 5), 0.2, 5), ((0, "0", 6), 0.0, 6),
                                 ((0, "0", 5), 0.3, 5), ((3, "1", 0), 9.0, 4), ((1, "0", 7), 0.0, 7)):
            d.add(key, t, position, _op(key[2], rank=key[0], group=key[1]), False)
    result = _classified(build)
    assert [(e["rank"], e["group"], e["seq"]) for e in result.earliest()] == [
        (3, "1", 0), (0, "0", 5), (1, "0", 5), (2, "0", 5)]
    assert result.counts()["backend"] == 6


def test_a_sample_per_class_up_to_its_limit_whatever_the_listed_ones(monkeypatch):
    monkeypatch.setattr(divergences, "SAMPLED", 2)

    def build(d):
        for seq in range(4):
            d.add((0, "0", seq), float(seq), seq, _op(seq), False)
        d.add((1, "0", 9), 9.0, 0, _op(9, rank=1), True)
    samples = _classified(build).samples()
    assert list(samples) == ["backend_dependent_path", "backend", "propagated", "job_nondeterminism", "not_compared"]
    assert [e["seq"] for e in samples["backend"]] == [0, 1]
    assert [e["seq"] for e in samples["not_compared"]] == [9]
    assert samples["propagated"] == [] and samples["job_nondeterminism"] == []


def test_object_collectives_are_counted_in_order_of_their_first_divergence():
    def build(d):
        d.add((0, "0", 1), 3.0, 0, _op(1, object_collective="gather_object"), False)
        d.add((0, "0", 2), 1.0, 1, _op(2, object_collective="broadcast_object_list"), False)
        d.add((0, "0", 3), 4.0, 2, _op(3, object_collective="gather_object"), False)
        d.add((0, "0", 4), 5.0, 3, _op(4), False)
    assert list(_classified(build).object_collectives().items()) == [("broadcast_object_list", 1), ("gather_object", 2)]


def test_rows_go_to_disk_in_batches_and_all_are_there_at_the_end(monkeypatch):
    monkeypatch.setattr(divergences, "BUFFERED", 3)
    d = Divergences()
    for seq in range(7):
        d.add((0, "0", seq), float(seq), seq, _op(seq), False, received=[("0/p2p 1>0", seq)])
    on_disk = d.db.execute("SELECT COUNT(*) FROM diverged").fetchone()[0]
    assert on_disk == 6 and len(d.rows["diverged"]) == 1  # two full batches written, one row held
    assert d.db.execute("SELECT COUNT(*) FROM received").fetchone()[0] == 6
    result = d.conclude()
    assert result.counts()["backend"] == 7 and len(result.earliest()) == 7
    assert d.rows == {"diverged": [], "received": [], "differed": []}
    d.close()
    with pytest.raises(sqlite3.ProgrammingError):
        d.db.execute("SELECT 1")


def test_a_scratch_database_that_fails_at_the_end_is_named_with_the_fix(monkeypatch):
    d = Divergences()
    d.add((0, "0", 1), 1.0, 0, _op(1), False)
    d.db.execute("PRAGMA query_only = ON")  # every write fails from now on, as on a full disk
    with pytest.raises(ScratchError) as error:
        d.conclude()
    assert "give TMPDIR a directory with free space" in str(error.value)
    assert "could not be written (attempt to write a readonly database)" in str(error.value)


def test_a_scratch_database_whose_classification_fails_is_named_with_the_fix(monkeypatch):
    d = Divergences()
    monkeypatch.setattr(divergences, "_CLASSIFY", "UPDATE nowhere SET x = 1;")
    with pytest.raises(ScratchError) as error:
        d.conclude()
    assert "TMPDIR" in str(error.value) and "no such table: nowhere" in str(error.value)


def test_a_scratch_database_that_cannot_take_its_schema_is_named_with_sqlites_error(monkeypatch):
    monkeypatch.setattr(divergences, "_SCHEMA", "CREATE TABLE broken (;")
    with pytest.raises(ScratchError) as error:
        Divergences()
    assert str(error.value) == (
        'the comparison\'s scratch database of divergent ops (in the temporary directory) could not be written '
        '(near ";": syntax error); give TMPDIR a directory with free space (a few hundred bytes per divergent op)')
