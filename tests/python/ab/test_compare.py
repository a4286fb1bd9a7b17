"""The comparison on hand-made records: alignment by (rank, group, seq), statuses, tolerance."""

import sqlite3

import torch
from nccl_migrate.ab.compare import compare, errors_between
from nccl_migrate.ab.sides import SideData


def entry(rank, seq, inp, out, t, group="0"):
    return {"rank": rank, "group": group, "seq": seq, "op": "all_reduce", "dtype": "float32", "in_shapes": [[4]],
            "out_shapes": [[4]], "reduce_op": "SUM", "peer": None, "t": t, "in": inp, "out": out, "ms": 1.0}


def side(*entries):
    data = SideData("unused")
    data.ops = {(e["rank"], e["group"], e["seq"]): e for e in entries}
    return data


class Classes:
    """An observer that notes each divergent op's class."""

    def __init__(self):
        self.of = {}

    def seen(self, label, entry):
        pass

    def paired(self, key, status):
        pass

    def classified(self, key, position, cls):
        self.of[key] = cls


def test_alignment_ignores_timing_and_finds_the_earliest_divergence():
    a = side(entry(0, 0, "i", "o", 1.0), entry(1, 0, "j", "o", 1.0), entry(0, 1, "k", "p", 2.0))
    b = side(entry(0, 0, "i", "o", 9.0), entry(1, 0, "j", "o", 9.0), entry(0, 1, "k", "X", 9.5))
    result = compare(a, b)
    assert result.counts["identical"] == 2 and result.counts["divergent"] == 1
    assert (result.first_divergence["rank"], result.first_divergence["seq"]) == (0, 1)
    assert result.first_divergence["cause"].startswith("only outputs differ")


def test_missing_ops_are_counted_per_side():
    result = compare(side(entry(0, 0, "i", "o", 1.0), entry(0, 1, "i", "o", 2.0)), side(entry(0, 0, "i", "o", 1.0)))
    assert result.counts["missing_in_b"] == 1 and not result.identical
    assert result.first_missing["seq"] == 1


def test_errors_are_measured_on_whole_tensors():
    abs_err, rel_err, needed = errors_between([torch.tensor([1.0, 100.0])], [torch.tensor([1.0, 100.5])])
    assert abs_err == 0.5 and abs(rel_err - 0.005) < 1e-12 and abs(needed - 0.005) < 1e-12


def test_digests_from_a_gpu_and_from_the_host_are_told_apart_from_a_data_divergence():
    a = side(entry(0, 0, "gpu:1f", "gpu:2e", 1.0))
    b = side(entry(0, 0, "1f", "2e", 1.0))  # the same op, its tensors in host memory on side b
    result = compare(a, b)
    assert result.counts["divergent"] == 1
    assert "on a CUDA device on one side and in host memory on the other" in result.first_divergence["reason"]
    same_place = compare(side(entry(0, 0, "gpu:1f", "gpu:2e", 1.0)), side(entry(0, 0, "gpu:1f", "gpu:3d", 1.0)))
    assert same_place.first_divergence["reason"].startswith("digests differ")


def test_a_gpu_digest_never_computed_is_not_taken_for_a_match():
    a, b = entry(0, 0, "gpu:1f", None, 1.0), entry(0, 0, "gpu:1f", None, 1.0)
    b["digests_unfinished"] = ["out"]  # side b's stream never got to the digest
    result = compare(side(a), side(b))
    assert result.counts["divergent"] == 1 and "side b lacks ['out']" in result.first_divergence["reason"]


def test_divergences_are_classified_by_what_differed_going_in():
    # seq 0: identical inputs everywhere, rank 1's output differs: the backend.
    # seq 1: rank 1's input differs after its divergence at seq 0: propagated.
    # group "1" seq 0: rank 0's input differs with nothing before it on rank 0: the job's own.
    a = side(entry(0, 0, "i", "o", 1.0), entry(1, 0, "i", "o", 1.0), entry(0, 1, "k", "p", 2.0),
             entry(1, 1, "k", "p", 2.0), entry(0, 0, "u", "v", 0.5, group="1"), entry(1, 0, "w", "v", 0.5, group="1"))
    b = side(entry(0, 0, "i", "o", 1.0), entry(1, 0, "i", "X", 1.0), entry(0, 1, "k", "Y", 2.0),
             entry(1, 1, "K", "Y", 2.0), entry(0, 0, "U", "V", 0.5, group="1"), entry(1, 0, "w", "V", 0.5, group="1"))
    classes = Classes()
    result = compare(a, b, observers=[classes])
    assert classes.of == {(1, "0", 0): "backend", (0, "0", 1): "propagated", (1, "0", 1): "propagated",
                                 (0, "1", 0): "job_nondeterminism", (1, "1", 0): "job_nondeterminism"}
    assert result.classes == {"backend_dependent_path": 0, "backend": 1, "propagated": 2, "job_nondeterminism": 2,
                              "not_compared": 0} and result.backend_implicated
    assert [(d["rank"], d["group"], d["seq"]) for d in result.divergences] == [
        (0, "1", 0), (1, "1", 0), (1, "0", 0), (0, "0", 1), (1, "0", 1)]  # all listed, earliest first
    assert result.first_divergence["class"] == "job_nondeterminism"


def test_divergences_only_from_the_jobs_own_inputs_do_not_implicate_the_backend():
    a = side(entry(0, 0, "u", "v", 1.0), entry(1, 0, "w", "v", 1.0), entry(0, 1, "i", "o", 2.0))
    b = side(entry(0, 0, "U", "V", 1.0), entry(1, 0, "w", "V", 1.0), entry(0, 1, "i", "o", 2.0))
    result = compare(a, b)
    assert not result.backend_implicated and result.job_nondeterminism_only
    assert result.classes == {"backend_dependent_path": 0, "backend": 0, "propagated": 0, "job_nondeterminism": 2,
                              "not_compared": 0}


def test_records_are_paired_as_they_stream_holding_only_the_ops_in_between():
    from nccl_migrate.ab.compare import pairs

    held = []

    def stream(entries):
        for e in entries:
            held.append(e["seq"])
            yield e

    a = [entry(0, s, "i", "o", s) for s in range(1000)]
    b = [entry(0, s ^ 1, "i", "o", s) for s in range(1000)]  # neighbours swapped: a window of one
    paired = 0
    for key, ea, eb in pairs(stream(a), stream(b)):
        assert ea is not None and eb is not None and ea["seq"] == eb["seq"] == key[2]
        paired += 1
        assert len(held) - 2 * paired <= 2, "records read ahead of what was paired are the window only"
    assert paired == 1000


def test_digests_that_cannot_be_compared_never_make_a_verdict_of_job_nondeterminism():
    from nccl_migrate.ab.command import EXIT_FAILED, judge

    a = side(entry(0, 0, "gpu:1f", "gpu:2e", 1.0), entry(1, 0, "gpu:1f", "gpu:2e", 1.0))
    b = side(entry(0, 0, "1f", "2e", 1.0), entry(1, 0, "1f", "2e", 1.0))  # host memory on side b
    result = compare(a, b)
    assert result.classes["job_nondeterminism"] == 0 and result.classes["not_compared"] == 2
    status, verdict = judge(result, allow_job_nondeterminism=True)
    assert status == EXIT_FAILED and verdict.startswith("values not compared") and "--keep-tensors" in verdict


def test_an_op_within_tolerance_counts_as_an_earlier_difference():
    # rank 0's seq 0 differs within tolerance (measured on kept tensors, here given as measured),
    # so its seq 1 input differing follows from it: propagated, not the job's own.
    first_a, first_b = entry(0, 0, "i", "o", 1.0), entry(0, 0, "i", "O", 1.0)
    first_b["measured"] = {"max_abs_error": 1e-7, "max_rel_error": 1e-7, "needed": 1e-7}
    a = side(first_a, entry(0, 1, "k", "p", 2.0))
    b = side(first_b, entry(0, 1, "K", "P", 2.0))
    result = compare(a, b, tolerance=1e-6)
    assert result.counts["within_tolerance"] == 1 and result.classes == {**result.classes, "propagated": 1}
    assert result.classes["job_nondeterminism"] == 0


def test_nothing_compared_is_never_called_identical():
    from nccl_migrate.ab.command import EXIT_FAILED, judge

    status, verdict = judge(compare(side(), side()), allow_job_nondeterminism=True)
    assert status == EXIT_FAILED and verdict.startswith("nothing compared")


def _one_rank(directory, ops, output):
    """One rank's records; ``output(seq)`` names each op's output digest."""
    import json

    directory.mkdir(parents=True)
    (directory / "rank0.meta.json").write_text(json.dumps({"rank": 0, "world_size": 1, "peak_rss_kib": 1}))
    with open(directory / "rank0.jsonl", "w") as out:
        out.writelines(json.dumps(dict(entry(0, seq, f"i{seq}", output(seq), 1.0 + seq), group=str(seq % 7))) + "\n"
                       for seq in range(ops))


def _peak_python_memory(tmp_path, name, ops, output_b):
    import tracemalloc

    from nccl_migrate.ab.op_map import OpMap
    from nccl_migrate.ab.sides import load

    _one_rank(tmp_path / name / "a", ops, lambda seq: f"o{seq}")
    _one_rank(tmp_path / name / "b", ops, output_b)
    tracemalloc.start()
    try:
        result = compare(load(str(tmp_path / name / "a")), load(str(tmp_path / name / "b")), observers=[OpMap()])
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def test_memory_stays_bounded_however_many_ops_diverge(tmp_path):
    """Every one of 40,000 ops diverges: the comparison's peak Python memory is that of comparing
    the same ops all identical (one rank's keys, the window), not 40,000 divergences more (their
    facts go to disk)."""
    ops = 40_000
    identical, result = _peak_python_memory(tmp_path, "identical", ops, lambda seq: f"o{seq}")
    assert result.counts["identical"] == ops
    divergent, result = _peak_python_memory(tmp_path, "divergent", ops, lambda seq: f"X{seq}")
    assert result.counts["divergent"] == result.classes["backend"] == ops
    assert divergent < identical + (2 << 20), (identical, divergent)  # a bounded buffer, whatever the count
    assert len(result.divergences) == 100 and len(result.samples["backend"]) == 10


def test_a_rarer_class_is_sampled_even_when_the_earliest_listed_are_of_another(monkeypatch):
    from nccl_migrate.ab import divergences

    monkeypatch.setattr(divergences, "LISTED", 2)
    # Rank 0's input differs from seq 0 on (job nondeterminism, then propagated); rank 1's seq 5 alone
    # differs from identical inputs (backend), later in its rank's ops than the listed ones.
    same = [entry(1, s, "j", "p", 0.5 + s, group="8") for s in range(6)]
    a = side(*[entry(0, s, f"i{s}", f"o{s}", 1.0 + s) for s in range(6)], *same, entry(1, 5, "j", "p", 6.5, group="9"))
    b = side(*[entry(0, s, f"I{s}", f"O{s}", 1.0 + s) for s in range(6)], *same, entry(1, 5, "j", "X", 6.5, group="9"))
    result = compare(a, b)
    assert [d["class"] for d in result.divergences] == ["job_nondeterminism", "propagated"]
    assert [(d["rank"], d["seq"]) for d in result.samples["backend"]] == [(1, 5)]
    assert result.classes == {"backend_dependent_path": 0, "backend": 1, "propagated": 5, "job_nondeterminism": 1,
                              "not_compared": 0}


def test_the_text_report_names_the_first_of_a_class_the_listed_ones_hide(monkeypatch):
    from nccl_migrate.ab import divergences
    from nccl_migrate.ab.report import render_text

    monkeypatch.setattr(divergences, "LISTED", 1)
    a = side(entry(0, 0, "i", "o", 1.0), entry(0, 1, "k", "p", 2.0), entry(1, 5, "j", "p", 6.5, group="9"))
    b = side(entry(0, 0, "I", "O", 1.0), entry(0, 1, "K", "P", 2.0), entry(1, 5, "j", "X", 6.5, group="9"))
    result = compare(a, b)
    sides = {label: {"spec": label, "failure": None} for label in "ab"}
    text = render_text({"verdict": "v", "ops_compared": 3, "identical": 0, "within_tolerance": 0, "divergent": 3,
                        "missing_in_a": 0, "missing_in_b": 0, "first_divergence": result.first_divergence,
                        "divergence_classes": result.classes, "divergence_samples": result.samples, "sides": sides})
    assert "first divergence: rank 0, group 0, seq 0" in text
    assert "first backend divergence: rank 1, group 9, seq 5: all_reduce" in text
    assert "first propagated divergence: rank 0, group 0, seq 1" in text


def test_the_first_of_a_class_is_its_earliest_op_not_its_last(monkeypatch):
    """Two hidden propagated divergences: the line names the earlier one."""
    from nccl_migrate.ab import divergences
    from nccl_migrate.ab.report import render_text

    monkeypatch.setattr(divergences, "LISTED", 1)
    a = side(entry(0, 0, "i", "o", 1.0), entry(0, 1, "k", "p", 2.0), entry(0, 2, "m", "q", 3.0))
    b = side(entry(0, 0, "I", "O", 1.0), entry(0, 1, "K", "P", 2.0), entry(0, 2, "M", "Q", 3.0))
    result = compare(a, b)
    sides = {label: {"spec": label, "failure": None} for label in "ab"}
    text = render_text({"verdict": "v", "ops_compared": 3, "identical": 0, "within_tolerance": 0, "divergent": 3,
                        "missing_in_a": 0, "missing_in_b": 0, "first_divergence": result.first_divergence,
                        "divergence_classes": result.classes, "divergence_samples": result.samples, "sides": sides})
    line = next(line for line in text.splitlines() if "first propagated divergence" in line)
    assert "rank 0, group 0, seq 1:" in line and "seq 2" not in line, line


# A scratch database that fills up after its schema is written (the temporary directory runs
# out of space mid-compare): every write goes to disk at once (BUFFERED = 1), and the database may
# not grow past the pages it has.
FULL_AFTER_SCHEMA = """
import sqlite3
from nccl_migrate.ab import divergences
connect = sqlite3.connect
def full_after_schema(*args, **kwargs):
    db = connect(*args, **kwargs)
    class Full:
        def __getattr__(self, name):
            return getattr(db, name)
        def executescript(self, script):
            done = db.executescript(script)
            if script is divergences._SCHEMA:
                db.execute("PRAGMA max_page_count = 1")
            return done
    return Full()
"""
PATCH_FULL_AFTER_SCHEMA = "divergences.BUFFERED = 1\nsqlite3.connect = full_after_schema\n"


def test_a_scratch_database_that_fills_up_mid_compare_is_a_clear_error(monkeypatch):
    import pytest
    from nccl_migrate.ab import divergences

    helpers = {}
    exec(FULL_AFTER_SCHEMA, helpers)
    monkeypatch.setattr(sqlite3, "connect", helpers["full_after_schema"])
    monkeypatch.setattr(divergences, "BUFFERED", 1)
    a = side(*(entry(0, s, "i", "o", float(s)) for s in range(300)))
    b = side(*(entry(0, s, "i", "X", float(s)) for s in range(300)))
    with pytest.raises(divergences.ScratchError, match="give TMPDIR a directory with free space"):
        compare(a, b)


def test_ab_compare_with_a_full_scratch_database_exits_2_naming_tmpdir(tmp_path):
    import json
    import subprocess
    import sys

    from test_record_integrity import _side

    a, b = _side(tmp_path / "a", ops_per_rank=300), _side(tmp_path / "b", ops_per_rank=300)
    for rank in range(2):
        records = b / f"rank{rank}.jsonl"
        records.write_text("".join(json.dumps(dict(json.loads(line), out="X")) + "\n"
                                   for line in records.read_text().splitlines()))
    script = FULL_AFTER_SCHEMA + PATCH_FULL_AFTER_SCHEMA + "import sys\nfrom nccl_migrate.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    done = subprocess.run([sys.executable, "-c", script, "ab", "compare", str(a), str(b)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "TMPDIR" in done.stdout + done.stderr and "Traceback" not in done.stderr, done.stdout + done.stderr


def test_a_scratch_database_that_cannot_be_written_is_a_clear_error(tmp_path, monkeypatch):
    """The temporary directory full or read-only: the comparison says so and how to go on."""
    import sqlite3

    import pytest
    from nccl_migrate.ab import divergences

    read_only = tmp_path / "scratch.db"
    read_only.touch()
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda _: connect(f"file:{read_only}?mode=ro", uri=True))
    with pytest.raises(divergences.ScratchError, match="give TMPDIR a directory with free space"):
        compare(side(entry(0, 0, "i", "o", 1.0)), side(entry(0, 0, "i", "X", 1.0)))
