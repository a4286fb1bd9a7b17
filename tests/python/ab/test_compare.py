"""The comparison on hand-made records: alignment by (rank, group, seq), statuses, tolerance."""

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
    result = compare(a, b)
    assert result.classified == {(1, "0", 0): "backend", (0, "0", 1): "propagated", (1, "0", 1): "propagated",
                                 (0, "1", 0): "job_nondeterminism", (1, "1", 0): "job_nondeterminism"}
    assert result.classes == {"backend": 1, "propagated": 2, "job_nondeterminism": 2, "not_compared": 0} and result.backend_implicated
    assert [(d["rank"], d["group"], d["seq"]) for d in result.divergences] == [
        (0, "1", 0), (1, "1", 0), (1, "0", 0), (0, "0", 1), (1, "0", 1)]  # all listed, earliest first
    assert result.first_divergence["class"] == "job_nondeterminism"


def test_divergences_only_from_the_jobs_own_inputs_do_not_implicate_the_backend():
    a = side(entry(0, 0, "u", "v", 1.0), entry(1, 0, "w", "v", 1.0), entry(0, 1, "i", "o", 2.0))
    b = side(entry(0, 0, "U", "V", 1.0), entry(1, 0, "w", "V", 1.0), entry(0, 1, "i", "o", 2.0))
    result = compare(a, b)
    assert not result.backend_implicated and result.job_nondeterminism_only
    assert result.classes == {"backend": 0, "propagated": 0, "job_nondeterminism": 2, "not_compared": 0}


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
