"""The report's op map: one cell per op until a rank outgrows COLUMNS, then neighbours merge keeping
the worse status, and a divergent op takes its class's colour once the comparison knows it."""

from nccl_migrate.ab import op_map
from nccl_migrate.ab.op_map import OpMap


def _fed(statuses, rank=0, observer=None):
    observer = observer or OpMap()
    for seq, status in enumerate(statuses):
        observer.paired((rank, "0", seq), status)
    return observer


def test_each_op_has_its_own_cell_up_to_the_limit(monkeypatch):
    monkeypatch.setattr(op_map, "COLUMNS", 4)
    observer = _fed(["identical", "missing_in_a", "within_tolerance", "backend"])
    assert observer.grid() == {0: ["identical", "missing_in_a", "within_tolerance", "backend"]}
    assert observer.steps() == {0: 1} and observer.counts() == {0: 4}


def test_a_rank_past_the_limit_merges_neighbours_keeping_the_worse(monkeypatch):
    monkeypatch.setattr(op_map, "COLUMNS", 4)
    statuses = ["identical", "backend", "identical", "identical", "within_tolerance", "identical", "identical",
                "missing_in_b", "identical", "propagated"]
    observer = _fed(statuses)
    # Ten ops in at most four cells: two merges, four ops a cell, each cell the worst of its ops.
    assert observer.grid() == {0: ["backend", "missing_in_b", "propagated"]}
    assert observer.steps() == {0: 4} and observer.counts() == {0: 10}


def test_a_merged_cell_is_as_bad_as_its_worst_op_wherever_it_stands(monkeypatch):
    monkeypatch.setattr(op_map, "COLUMNS", 2)
    # Five ops: cells of two after the first merge, of four after the second.
    assert _fed(["not_compared", "identical", "identical", "identical", "identical"]).grid() == \
        {0: ["not_compared", "identical"]}
    assert _fed(["identical", "identical", "identical", "job_nondeterminism", "identical"]).grid() == \
        {0: ["job_nondeterminism", "identical"]}
    assert _fed(["identical", "identical", "identical", "identical", "within_tolerance"]).grid() == \
        {0: ["identical", "within_tolerance"]}


def test_severity_orders_every_status_with_a_backend_divergence_worst():
    order = ["identical", "within_tolerance", "propagated", "job_nondeterminism", "not_compared", "missing_in_a",
             "backend_dependent_path", "backend"]
    assert [op_map.SEVERITY[s] for s in order] == sorted(op_map.SEVERITY[s] for s in order)
    assert len({op_map.SEVERITY[s] for s in order}) == len(order)
    assert op_map.SEVERITY["missing_in_a"] == op_map.SEVERITY["missing_in_b"]


def test_a_divergent_op_waits_for_its_class_and_then_takes_its_cell(monkeypatch):
    monkeypatch.setattr(op_map, "COLUMNS", 4)
    observer = _fed(["identical", "divergent", "identical"])
    assert observer.grid() == {0: ["identical", "identical", "identical"]}
    observer.classified((0, "0", 1), 1, "job_nondeterminism")
    assert observer.grid() == {0: ["identical", "job_nondeterminism", "identical"]}
    # A class never makes a cell look better than what it already holds.
    observer.paired((0, "0", 3), "backend")
    observer.classified((0, "0", 3), 3, "propagated")
    assert observer.grid()[0][3] == "backend"


def test_a_class_finds_its_op_after_the_row_has_merged(monkeypatch):
    monkeypatch.setattr(op_map, "COLUMNS", 4)
    observer = _fed(["identical"] * 6 + ["divergent"] + ["identical"] * 3)  # cells of four ops
    observer.classified((0, "0", 6), 6, "backend")
    assert observer.grid() == {0: ["identical", "backend", "identical"]}


def test_ranks_are_listed_in_order_whatever_order_they_were_read_in():
    observer = _fed(["identical"], rank=2)
    _fed(["missing_in_b", "identical"], rank=0, observer=observer)
    assert list(observer.grid()) == [0, 2]
    assert observer.grid() == {0: ["missing_in_b", "identical"], 2: ["identical"]}
    assert observer.counts() == {2: 1, 0: 2} and observer.steps() == {2: 1, 0: 1}


def test_the_legend_gives_every_status_a_colour():
    assert set(op_map.COLOUR) >= set(op_map.SEVERITY)
    assert op_map.COLOUR["missing_in_a"] == op_map.COLOUR["missing_in_b"] == dict(op_map.LEGEND)["missing"]


def test_each_merged_cell_is_the_worse_of_its_own_two_neighbours(monkeypatch):
    monkeypatch.setattr(op_map, "COLUMNS", 4)
    # The worst op sits third: after the merge it is the second cell's, never lost or moved.
    assert _fed(["identical", "identical", "backend", "identical", "identical"]).grid() == \
        {0: ["identical", "backend", "identical"]}


def test_ops_sharing_a_cell_keep_the_more_severe_whatever_its_name(monkeypatch):
    monkeypatch.setattr(op_map, "COLUMNS", 2)
    # Cells of two ops: a backend divergence and then a missing op share the second cell.
    assert _fed(["identical", "identical", "backend", "missing_in_b"]).grid() == {0: ["identical", "backend"]}
    assert _fed(["identical", "identical", "within_tolerance", "not_compared"]).grid() == \
        {0: ["identical", "not_compared"]}
