"""The HTML report's parts, in-process: tables and escaping, the axes' ticks, and where each plot
puts its bars, cells and lines (SVG coordinates read back and checked against the data)."""

from html.parser import HTMLParser

import pytest
from nccl_migrate.ab import html as report_html
from nccl_migrate.ab.html import (
    COLOURS,
    PLOT_WIDTH,
    _axes,
    _e,
    _fault_rows,
    _legend,
    _op_rows,
    _table,
    _ticks,
    latency_bars,
    latency_by_issue,
    memory_over_time,
    op_map,
    render_html,
)
from nccl_migrate.ab.op_map import COLOUR
from nccl_migrate.ab.sides import SideData


class _Elements(HTMLParser):
    """Every element in document order: its tag, attributes, own text and, for an SVG shape, the
    text of the <title> inside it."""

    def __init__(self, text: str):
        super().__init__()
        self.elements: list[dict] = []
        self.open: list[dict] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, "attrs": dict(attrs), "text": "", "title": None}
        self.elements.append(element)
        if tag != "meta":  # the one void element the page writes without "/>"
            self.open.append(element)

    def handle_startendtag(self, tag, attrs):
        self.elements.append({"tag": tag, "attrs": dict(attrs), "text": "", "title": None})

    def handle_endtag(self, tag):
        while self.open:
            element = self.open.pop()
            if element["tag"] == tag:
                break

    def handle_data(self, data):
        if not self.open:
            return
        self.open[-1]["text"] += data
        if self.open[-1]["tag"] == "title" and len(self.open) > 1:
            self.open[-2]["title"] = (self.open[-2]["title"] or "") + data


def stray_text(text: str) -> list[str]:
    """Text standing directly in the page's body or in a plot, outside any element of its own:
    none is meant to be there."""
    parser = _Elements.__new__(_Elements)
    HTMLParser.__init__(parser)
    parser.elements, parser.open, found = [], [], []

    def handle_data(data):
        if parser.open and parser.open[-1]["tag"] in ("body", "svg", "html", "head") and data.strip():
            found.append(data)
        _Elements.handle_data(parser, data)

    parser.handle_data = handle_data
    parser.feed(text)
    return found


def elements(text: str, tag: str) -> list[dict]:
    return [e for e in _Elements(text).elements if e["tag"] == tag]


def number(element: dict, name: str) -> float:
    return float(element["attrs"][name])


def svg_size(text: str) -> tuple[float, float]:
    (svg,) = elements(text, "svg")
    return number(svg, "width"), number(svg, "height")


# --- text ------------------------------------------------------------------------------------

def test_values_are_escaped_and_none_is_empty():
    assert _e(None) == ""
    assert _e("<a href='x'>&") == "&lt;a href=&#x27;x&#x27;&gt;&amp;"
    assert _e(0) == "0"


def test_a_table_has_a_header_row_only_when_given_one_and_escapes_every_cell():
    text = _table([["<b>", None], [1, 2.5]], ["name", "value & more"])
    assert text == ("<table><tr><th>name</th><th>value &amp; more</th></tr>"
                    "<tr><td>&lt;b&gt;</td><td></td></tr><tr><td>1</td><td>2.5</td></tr></table>")
    assert _table([["x"]]) == "<table><tr><td>x</td></tr></table>"


def test_the_legend_names_each_sides_spec_in_its_colour():
    text = _legend({"sides": {"a": {"spec": "nccl<2.15"}, "b": {"spec": "torch-nccl"}}})
    assert text == (f"<p class='legend'><span style='background:{COLOURS['a']}'></span>a: nccl&lt;2.15"
                    f"<span style='background:{COLOURS['b']}'></span>b: torch-nccl</p>")


# --- ticks and axes ---------------------------------------------------------------------------

@pytest.mark.parametrize("top, ticks", [
    (10, [0, 5, 10]),      # 1 and 2 give more than four steps: 5
    (7, [0, 2, 4, 6]),     # 2 is the first step giving at most four
    (4, [0, 1, 2, 3, 4]),  # four steps of 1 fit
    (100, [0, 50, 100]),
    (250, [0, 100, 200]),  # the last tick stays below the top
    (0.5, [0, 0.2, 0.4]),
    (1e-3, [0, 0.0005, 0.001]),  # steps below 1 are tenths of a power of ten too
])
def test_ticks_are_round_steps_from_zero_up_to_the_top(top, ticks):
    assert _ticks(top) == pytest.approx(ticks)


def test_ticks_of_an_empty_plot_are_zero_alone_and_the_count_is_the_most_steps():
    assert _ticks(0) == [0.0]
    assert _ticks(-3) == [0.0]
    assert _ticks(10, count=2) == [0, 5, 10]
    assert _ticks(10, count=10) == list(range(11))
    assert _ticks(45, count=1) == [0.0]  # a step of 100 is the first that fits once


def test_axes_span_the_plot_and_place_each_tick_by_its_value():
    parts = "".join(_axes(500, 300, 60, 40, 10.0, "MiB <y>", "time"))
    lines = elements(parts, "line")
    x_axis, y_axis, *grid = lines
    assert [number(x_axis, k) for k in ("x1", "y1", "x2", "y2")] == [60, 260, 490, 260]
    assert [number(y_axis, k) for k in ("x1", "y1", "x2", "y2")] == [60, 10, 60, 260]
    # Ticks 0, 5, 10: 0 on the x axis, the top 20 px below the plot's top edge.
    assert [number(g, "y1") for g in grid] == [260.0, 140.0, 20.0]
    assert all(number(g, "x1") == 56 and number(g, "x2") == 490 and g["attrs"]["y1"] == g["attrs"]["y2"]
               for g in grid)
    texts = elements(parts, "text")
    assert [(t["attrs"]["x"], t["attrs"]["y"], t["text"]) for t in texts] == [
        ("60", "296", "time"), ("4", "12", "MiB <y>"),
        ("54", "264.0", "0"), ("54", "144.0", "5"), ("54", "24.0", "10")]
    assert all(t["attrs"].get("text-anchor") == "end" for t in texts[2:])


def test_axes_of_an_empty_plot_put_the_one_tick_on_the_x_axis():
    lines = elements("".join(_axes(500, 300, 60, 40, 0.0, "y", "x")), "line")
    assert [number(line, "y1") for line in lines[2:]] == [260.0]


# --- latency per op type -------------------------------------------------------------------------

def _report(latency_a, latency_b, spec_a="a-spec", spec_b="b-spec"):
    return {"sides": {"a": {"spec": spec_a, "latency_ms": latency_a}, "b": {"spec": spec_b, "latency_ms": latency_b}}}


def test_latency_bars_without_latencies_say_so():
    assert latency_bars(_report({}, None)) == "<p>No op latencies recorded.</p>"


def test_latency_bars_are_proportional_with_the_longest_reaching_the_plots_right_edge():
    text = latency_bars(_report({"all_reduce": {"p50": 1, "p90": 2, "p99": 4}, "broadcast": {"p50": 0.5, "p90": 1, "p99": 2}},
                                {"all_reduce": {"p50": 2, "p90": 3, "p99": 8}}))
    left = 8 + 7 * len("all_reduce")  # the longest label's room
    plot_w = PLOT_WIDTH - left - 70
    rects = elements(text, "rect")
    assert len(rects) == 9  # three quantiles of each side's op types (side b ran no broadcast)
    assert all(number(r, "x") == left for r in rects)
    widths = [number(r, "width") for r in rects]
    expected = [v / 8 * plot_w for v in (1, 2, 4, 2, 3, 8, 0.5, 1, 2)]
    assert widths == pytest.approx(expected, abs=0.051)
    assert [r["attrs"]["fill"] for r in rects] == [COLOURS["a"]] * 3 + [COLOURS["b"]] * 3 + [COLOURS["a"]] * 3
    assert [r["attrs"]["fill-opacity"] for r in rects] == ["0.45", "0.7", "1.0"] * 3
    assert [r["attrs"]["height"] for r in rects] == ["6"] * 9
    assert rects[5]["title"] == "all_reduce side b p99: 8 ms"
    assert rects[6]["title"] == "broadcast side a p50: 0.5 ms"
    # Bars 7 px apart, side b 4 px below side a's three, the next op type a row (54 px) further.
    ys = [number(r, "y") for r in rects]
    assert ys == [24, 31, 38, 49, 56, 63, 78, 85, 92]


def test_latency_bars_label_each_row_and_each_sides_p99_and_grow_with_the_op_types():
    text = latency_bars(_report({"all_reduce": {"p50": 1, "p90": 2, "p99": 4}}, {"all_reduce": {"p50": 2, "p90": 3, "p99": 8}}))
    left = 8 + 7 * len("all_reduce")
    plot_w = PLOT_WIDTH - left - 70
    width, height = svg_size(text)
    assert (width, height) == (PLOT_WIDTH, 24 + 54 + 24)
    texts = elements(text, "text")
    assert texts[0]["text"] == "latency (ms): p50, p90, p99 of side a, then side b"
    assert (texts[0]["attrs"]["x"], texts[0]["attrs"]["y"]) == (str(left), "14")
    label = next(t for t in texts if t["text"] == "all_reduce")
    assert (number(label, "x"), number(label, "y"), label["attrs"]["text-anchor"]) == (left - 6, 24 + 27, "end")
    p99_a, p99_b = (t for t in texts if t["text"] in ("p99 4", "p99 8") and "text-anchor" not in t["attrs"])
    assert number(p99_a, "x") == pytest.approx(left + 4 / 8 * plot_w + 4, abs=0.051)
    assert number(p99_b, "x") == pytest.approx(left + plot_w + 4, abs=0.051)
    assert (number(p99_a, "y"), number(p99_b, "y")) == (24 + 2.5 * 7, 24 + 3 * 7 + 2.5 * 7 + 4)
    # The scale's ticks (0, 2, 4, 6, 8 ms) stand under the bars at their values.
    ticks = [t for t in texts if t["attrs"].get("text-anchor") == "middle"]
    assert [t["text"] for t in ticks] == ["0", "2", "4", "6", "8"]
    assert [number(t, "x") for t in ticks] == pytest.approx([left + v / 8 * plot_w for v in (0, 2, 4, 6, 8)], abs=0.051)
    assert all(number(t, "y") == height - 6 for t in ticks)
    grid = elements(text, "line")
    assert [number(g, "x1") for g in grid] == [number(t, "x") for t in ticks]
    assert all((number(g, "y1"), number(g, "y2")) == (24, height - 20) for g in grid)
    svg = elements(text, "svg")[0]["attrs"]
    assert svg["data-plot"] == "latency-by-op" and svg["viewbox"] == f"0 0 {PLOT_WIDTH} {int(height)}"


def test_latency_bars_have_a_row_for_an_op_type_only_one_side_ran():
    text = latency_bars(_report({}, {"barrier": {"p50": 1, "p90": 1, "p99": 1}}))
    assert [t["text"] for t in elements(text, "text") if t["attrs"].get("text-anchor") == "end"] == ["barrier"]
    assert [r["title"] for r in elements(text, "rect")] == [f"barrier side b {q}: 1 ms" for q in ("p50", "p90", "p99")]


def test_latency_bars_of_all_zero_latencies_are_empty_not_a_division_by_zero():
    text = latency_bars(_report({"barrier": {"p50": 0, "p90": 0, "p99": 0}}, {}))
    assert [number(r, "width") for r in elements(text, "rect")] == [0.0] * 3
    # The scale of an empty plot runs to 1 ms.
    assert [t["text"] for t in elements(text, "text") if t["attrs"].get("text-anchor") == "middle"] == \
        ["0", "0.5", "1"]


def test_a_side_without_latencies_or_an_op_draws_no_bars_for_it_on_the_other_sides_scale():
    report = {"sides": {"a": {"spec": "a", "latency_ms": {"all_reduce": {"p50": 0.1, "p90": 0.2, "p99": 0.4}}},
                        "b": {"spec": "b"}}}
    text = latency_bars(report)
    left = 8 + 7 * len("all_reduce")
    plot_w = PLOT_WIDTH - left - 70
    widths = [number(r, "width") for r in elements(text, "rect")]
    assert widths == pytest.approx([plot_w / 4, plot_w / 2, plot_w], abs=0.051)
    labels = [t for t in elements(text, "text") if "text-anchor" not in t["attrs"]][1:]  # after the chart's title
    assert [(t["text"], number(t, "x")) for t in labels] == [("p99 0.4", pytest.approx(left + plot_w + 4, abs=0.051))]
    assert stray_text(text) == []


def test_latency_bars_draw_only_the_percentiles_an_op_count_gives():
    """A p99 of 6 ops would be their slowest: no bar for it, and the row's label names the highest
    percentile drawn, or that none was."""
    text = latency_bars(_report({"all_reduce": {"count": 6, "p50": 2.0}, "barrier": {"count": 1}},
                                {"all_reduce": {"count": 40, "p50": 1.0, "p90": 4.0}}))
    assert [r["title"] for r in elements(text, "rect")] == [
        "all_reduce side a p50: 2 ms", "all_reduce side b p50: 1 ms", "all_reduce side b p90: 4 ms"]
    labels = [t["text"] for t in elements(text, "text") if "text-anchor" not in t["attrs"]][1:]
    assert labels == ["p50 2", "p90 4", "1 op: too few for a percentile"]
    assert "A percentile is drawn only from enough ops (p50 from 2, p90 from 10, p99 from 100)" in text
    assert stray_text(text) == []


# --- the op map --------------------------------------------------------------------------------------

def _cells(text):
    return [(number(r, "x"), number(r, "y"), number(r, "width"), r["attrs"]["fill"], r["title"])
            for r in elements(text, "rect")]


def same_cells(drawn, expected):
    """Cells equal but for the rounding of coordinates to 0.1 px."""
    assert len(drawn) == len(expected), drawn
    for got, want in zip(drawn, expected):
        assert got[:3] == pytest.approx(want[:3], abs=0.051) and got[3:] == want[3:], (got, want)


def test_an_op_map_without_ops_says_so():
    assert op_map({}, {}, {}) == "<p>No ops compared.</p>"


def test_the_op_map_draws_one_rect_per_run_of_equal_cells_spanning_the_plot():
    plot_w = PLOT_WIDTH - 90
    text = op_map({0: ["identical", "identical", "backend", "identical"], 1: ["identical"] * 4},
                  {0: 1, 1: 1}, {0: 4, 1: 4})
    cells = _cells(text)
    assert cells == [
        (70, 8, plot_w / 2, COLOUR["identical"], "rank 0, ops 0-1: identical"),
        (70 + plot_w / 2, 8, plot_w / 4, COLOUR["backend"], "rank 0, ops 2-2: backend"),
        (70 + 3 * plot_w / 4, 8, plot_w / 4, COLOUR["identical"], "rank 0, ops 3-3: identical"),
        (70, 26, plot_w, COLOUR["identical"], "rank 1, ops 0-3: identical"),
    ]
    assert all(r["attrs"]["height"] == "17" for r in elements(text, "rect"))
    width, height = svg_size(text)
    assert (width, height) == (PLOT_WIDTH, 8 + 18 * 2 + 30)
    labels = [t for t in elements(text, "text") if t["attrs"].get("text-anchor") == "end"]
    assert [(t["text"], number(t, "x"), number(t, "y")) for t in labels] == [("rank 0", 64, 25), ("rank 1", 64, 43)]
    footer = elements(text, "text")[-1]
    assert footer["text"] == "each rank's ops in issue order (0 .. 3)"
    assert (number(footer, "x"), number(footer, "y")) == (70, height - 8)
    legend = [(s["attrs"]["style"], s_next) for s, s_next in zip(elements(text, "span"), [
        "identical", "within tolerance", "propagated", "job nondeterminism", "not compared", "missing",
        "backend dependent path", "backend"])]
    assert text.startswith("<p class='legend'>" + "".join(f"<span style='{style}'></span>{name}"
                                                          for style, name in legend) + "</p><svg")
    assert [style for style, _ in legend][:2] == [f"background:{COLOUR['identical']}",
                                                 f"background:{COLOUR['within_tolerance']}"]
    assert stray_text(text) == []
    assert elements(text, "svg")[0]["attrs"]["viewbox"] == f"0 0 {PLOT_WIDTH} {int(height)}"


def test_a_rank_with_fewer_ops_fills_only_its_share_and_cells_of_several_ops_span_them():
    plot_w = PLOT_WIDTH - 90
    # Rank 0: 8 ops in cells of 2; rank 1: 2 ops. Eight columns, one op each.
    text = op_map({0: ["identical", "within_tolerance", "identical", "missing_in_b"], 1: ["propagated", "identical"]},
                  {0: 2, 1: 1}, {0: 8, 1: 2})
    same_cells(_cells(text), [
        (70, 8, plot_w / 4, COLOUR["identical"], "rank 0, ops 0-1: identical"),
        (70 + plot_w / 4, 8, plot_w / 4, COLOUR["within_tolerance"], "rank 0, ops 2-3: within tolerance"),
        (70 + plot_w / 2, 8, plot_w / 4, COLOUR["identical"], "rank 0, ops 4-5: identical"),
        (70 + 3 * plot_w / 4, 8, plot_w / 4, COLOUR["missing_in_b"], "rank 0, ops 6-7: missing in b"),
        (70, 26, plot_w / 8, COLOUR["propagated"], "rank 1, ops 0-0: propagated"),
        (70 + plot_w / 8, 26, plot_w / 8, COLOUR["identical"], "rank 1, ops 1-1: identical"),
    ])


def test_a_last_cell_reaching_past_the_ranks_last_op_stays_on_the_plot():
    plot_w = PLOT_WIDTH - 90
    # Seven ops in cells of two: the last cell holds op 6 alone but spans ops 6-7.
    text = op_map({0: ["identical", "identical", "identical", "backend"]}, {0: 2}, {0: 7})
    same_cells(_cells(text), [(70, 8, plot_w * 6 / 7, COLOUR["identical"], "rank 0, ops 0-5: identical"),
                              (70 + plot_w * 6 / 7, 8, plot_w / 7, COLOUR["backend"], "rank 0, ops 6-6: backend")])


def test_a_column_keeps_the_first_of_equally_bad_statuses(monkeypatch):
    monkeypatch.setattr(report_html, "MAP_COLUMNS", 1)
    text = op_map({0: ["missing_in_a", "missing_in_b"]}, {0: 1}, {0: 2})
    assert [c[4] for c in _cells(text)] == ["rank 0, ops 0-1: missing in a"]


def test_more_ops_than_columns_share_columns_and_a_column_shows_its_worst(monkeypatch):
    monkeypatch.setattr(report_html, "MAP_COLUMNS", 2)
    plot_w = PLOT_WIDTH - 90
    text = op_map({0: ["identical", "job_nondeterminism", "identical", "identical"]}, {0: 1}, {0: 4})
    same_cells(_cells(text), [
        (70, 8, plot_w / 2, COLOUR["job_nondeterminism"], "rank 0, ops 0-1: job nondeterminism"),
        (70 + plot_w / 2, 8, plot_w / 2, COLOUR["identical"], "rank 0, ops 2-3: identical"),
    ])
    # A worse status is not hidden by a milder one after it in the same column.
    text = op_map({0: ["backend", "not_compared", "identical", "identical"]}, {0: 1}, {0: 4})
    assert _cells(text)[0][3] == COLOUR["backend"]


def test_ranks_past_the_rows_merge_into_rows_of_consecutive_ranks(monkeypatch):
    monkeypatch.setattr(report_html, "MAP_ROWS", 2)
    plot_w = PLOT_WIDTH - 90
    grid = {0: ["identical"], 1: ["backend"], 2: ["identical"], 3: ["identical"], 4: ["propagated"]}
    text = op_map(grid, dict.fromkeys(grid, 1), dict.fromkeys(grid, 1))
    # Five ranks in two rows at most: three ranks a row.
    same_cells(_cells(text), [(70, 8, plot_w, COLOUR["backend"], "ranks 0-2, ops 0-0: backend"),
                            (70, 26, plot_w, COLOUR["propagated"], "ranks 3-4, ops 0-0: propagated")])


def test_many_rows_get_thinner_cells_and_every_nth_label(monkeypatch):
    grid = {r: ["identical"] for r in range(32)}
    text = op_map(grid, dict.fromkeys(grid, 1), dict.fromkeys(grid, 1))
    rects = elements(text, "rect")
    assert [r["attrs"]["height"] for r in rects] == ["10"] * 32  # 360 px / 32 rows = 11 px a row
    assert [number(r, "y") for r in rects][:3] == [8, 19, 30]
    labels = [t["text"] for t in elements(text, "text") if t["attrs"].get("text-anchor") == "end"]
    assert labels == [f"rank {r}" for r in range(0, 32, 2)]  # at most 16 labels
    grid = {r: ["identical"] for r in range(40)}
    text = op_map(grid, dict.fromkeys(grid, 1), dict.fromkeys(grid, 1))
    labels = [t["text"] for t in elements(text, "text") if t["attrs"].get("text-anchor") == "end"]
    assert labels == [f"rank {r}" for r in range(0, 40, 2)]  # every second row of 40
    grid = {r: ["identical"] for r in range(128)}
    assert {r["attrs"]["height"] for r in elements(op_map(grid, dict.fromkeys(grid, 1), dict.fromkeys(grid, 1)), "rect")} \
        == {"3"}  # never thinner than 4 px a row


def test_an_op_map_of_ranks_without_ops_draws_no_cells():
    text = op_map({0: []}, {0: 1}, {0: 0})
    assert elements(text, "rect") == []
    assert "(0 .. 0)" in text  # an empty plot still has one column


# --- latency in issue order ----------------------------------------------------------------------

class _Stats:
    def __init__(self, a, b):
        self.series = {"a": a, "b": b}

    def rank0_series(self, side):
        return self.series[side]


def _points(polyline):
    return [tuple(map(float, p.split(","))) for p in polyline["attrs"]["points"].split()]


def test_latency_by_issue_without_ops_says_so():
    assert latency_by_issue(None) == "<p>No ops recorded on rank 0.</p>"
    assert latency_by_issue(_Stats([], [])) == "<p>No ops recorded on rank 0.</p>"


def test_latency_by_issue_spreads_the_ops_over_the_width_and_scales_to_the_slowest():
    text = latency_by_issue(_Stats([1.0, 4.0, 2.0], [2.0]))
    a, b = elements(text, "polyline")
    # 820 px wide from x=60; the slowest op (4 ms) at the plot's top (y=20), 0 ms on the axis (y=220).
    assert _points(a) == [(60.0, 170.0), (470.0, 20.0), (880.0, 120.0)]
    assert _points(b) == [(60.0, 120.0)]
    assert (a["attrs"]["stroke"], b["attrs"]["stroke"]) == (COLOURS["a"], COLOURS["b"])
    assert a["attrs"]["fill"] == "none" and a["attrs"]["stroke-width"] == "1.2"
    svg = elements(text, "svg")[0]["attrs"]
    assert (svg["data-plot"], svg["width"], svg["height"]) == ("latency-by-issue", "900", "260")
    assert [t["text"] for t in elements(text, "text")][:2] == ["rank 0's ops in issue order", "latency (ms)"]


def test_latency_by_issue_of_one_op_and_of_zero_latencies_stays_on_the_plot():
    text = latency_by_issue(_Stats([0.0], []))
    (a, b) = elements(text, "polyline")
    assert _points(a) == [(60.0, 220.0)]
    assert b["attrs"]["points"] == ""
    assert [t["text"] for t in elements(text, "text")][2:] == ["0", "0.5", "1"]
    assert stray_text(text) == []


def test_latency_by_issue_of_two_ops_puts_them_at_the_plots_two_ends():
    (a, _) = elements(latency_by_issue(_Stats([2.0, 1.0], [])), "polyline")
    assert _points(a) == [(60.0, 20.0), (880.0, 120.0)]


# --- memory over time ------------------------------------------------------------------------------

def _side(metas):
    return SideData(directory="d", metas=metas)


def test_memory_without_samples_says_so():
    assert memory_over_time({"a": None, "b": _side({0: {"memory": []}})}) == "<p>No memory samples recorded.</p>"


def test_memory_lines_start_at_each_sides_first_rank_and_scale_to_the_largest():
    data = {"a": _side({1: {"started_at": 102.0, "memory": [[0.0, 50.0, None], [2.0, 100.0, 40.0]]},
                        0: {"started_at": 100.0, "memory": [[0.0, 25.0, 10.0], [4.0, 50.0, 20.0]]}}),
            "b": _side({0: {"started_at": 500.0, "memory": [[1.0, 200.0, None]]}})}
    text = memory_over_time(data)
    lines = elements(text, "polyline")
    # Rank 0 of side a (RSS solid, CUDA dashed), rank 1 (2 s later), side b: 4 s and 200 MiB at the far corner.
    assert [(line["title"], line["attrs"]["stroke-dasharray"]) for line in lines] == [
        ("side a rank 0", ""), ("side a rank 0", "4 3"), ("side a rank 1", ""), ("side a rank 1", "4 3"),
        ("side b rank 0", "")]
    assert _points(lines[0]) == [(60.0, 195.0), (880.0, 170.0)]
    assert _points(lines[1]) == [(60.0, 210.0), (880.0, 200.0)]
    assert _points(lines[2]) == [(470.0, 170.0), (880.0, 120.0)]
    assert _points(lines[3]) == [(880.0, 180.0)]  # rank 1's only CUDA sample, 2 s after its start
    assert _points(lines[4]) == [(265.0, 20.0)]
    assert [line["attrs"]["stroke"] for line in lines] == [COLOURS["a"]] * 4 + [COLOURS["b"]]
    assert [t["text"] for t in elements(text, "text")][:2] == ["seconds since the side's first rank started", "MiB"]
    # The time axis's ticks (0 .. 4 s) stand under it at their times.
    ticks = [t for t in elements(text, "text") if t["attrs"].get("text-anchor") == "middle"]
    assert [(t["text"], number(t, "x"), number(t, "y")) for t in ticks] == [
        ("0", 60, 234), ("1", 265, 234), ("2", 470, 234), ("3", 675, 234), ("4", 880, 234)]
    assert elements(text, "svg")[0]["attrs"]["data-plot"] == "memory"
    assert "seconds since the side&#x27;s first rank started" in text


def test_a_rank_without_a_start_time_is_placed_at_its_sides_origin():
    data = {"a": _side({0: {"started_at": None, "memory": [[1.0, 10.0, None], [2.0, 20.0, None]]},
                        1: {"memory": [[1.0, 10.0, None]]}})}
    lines = elements(memory_over_time(data), "polyline")
    assert _points(lines[0]) == [(470.0, 120.0), (880.0, 20.0)]
    assert _points(lines[1]) == [(470.0, 120.0)]


def test_a_rank_without_a_start_time_does_not_move_its_sides_origin():
    # Rank 1 wrote no start: the side's origin stays rank 0's start (100 s), not 0, so rank 0's
    # samples keep their own times and rank 1's are placed at that origin.
    data = {"a": _side({0: {"started_at": 100.0, "memory": [[0.0, 10.0, None], [2.0, 20.0, None]]},
                        1: {"memory": [[1.0, 10.0, None]]}})}
    lines = elements(memory_over_time(data), "polyline")
    assert _points(lines[0]) == [(60.0, 120.0), (880.0, 20.0)]
    assert _points(lines[1]) == [(470.0, 120.0)]


def test_memory_of_zero_seconds_and_bytes_stays_on_the_plot():
    text = memory_over_time({"a": _side({0: {"started_at": 5.0, "memory": [[0.0, 0.0, None]]}})})
    lines = elements(text, "polyline")
    assert _points(lines[0]) == [(60.0, 220.0)]
    # Both scales of an empty plot run to 1.
    ticks = [t["text"] for t in elements(text, "text")][2:]
    assert ticks == ["0", "0.5", "1"] * 2
    assert stray_text(text) == []


# --- the tables --------------------------------------------------------------------------------------

def test_an_ops_rows_name_every_field_a_report_gives_an_op_in_order():
    keys = ["rank", "group", "seq", "op", "dtype", "shape", "reduce_op", "peer", "object_collective", "class",
            "cause", "inputs_differed_on_ranks", "max_abs_error", "max_rel_error", "reason", "missing_on"]
    op = {k: f"value of {k}" for k in reversed(keys)}
    assert _op_rows(op) == [[k, f"value of {k}"] for k in keys]


def test_an_ops_rows_are_its_known_fields_in_order_without_empty_ones():
    op = {"op": "all_reduce", "rank": 3, "group": "0", "seq": 7, "dtype": None, "shape": [], "reduce_op": "",
          "class": "backend", "max_abs_error": 0.5, "missing_on": "b", "extra": 1, "peer": 0}
    assert _op_rows(op) == [["rank", 3], ["group", "0"], ["seq", 7], ["op", "all_reduce"], ["peer", 0],
                            ["class", "backend"], ["max_abs_error", 0.5], ["missing_on", "b"]]


def test_an_op_whose_call_differs_starts_with_both_calls_and_leaves_out_its_reason():
    op = {"rank": 0, "group": "3", "seq": 1, "op": "all_reduce", "reason": "a different call: ...",
          "calls": {"a": "all_reduce of float32 [161] (161 elements)", "b": "all_reduce of float32 [16, 8] (128 elements)"},
          "class": "backend_dependent_path"}
    assert _op_rows(op) == [["side a issued", "all_reduce of float32 [161] (161 elements)"],
                            ["side b issued", "all_reduce of float32 [16, 8] (128 elements)"],
                            ["rank", 0], ["group", "3"], ["seq", 1], ["op", "all_reduce"],
                            ["class", "backend_dependent_path"]]
    assert _op_rows(dict(op, calls=None))[-1] == ["reason", "a different call: ..."]


def test_a_hung_sides_rows_name_each_running_rank_and_what_it_was_inside():
    fault = {"kind": "hung", "running": [
        {"rank": 1, "pid": 11, "stopped": True, "inside": [{"op": "all_reduce", "seq": 3, "group": "0"},
                                                          {"op": "send", "seq": 0, "group": "0/p2p 1>2"}],
         "last_record": {"op": "barrier", "seq": 2, "group": "0"}},
        {"rank": None, "pid": 12, "stopped": False}]}
    assert _fault_rows(fault) == [
        ["rank 1", "stopped", "all_reduce #3 of group 0, send #0 of group 0/p2p 1>2", "barrier #2 of group 0"],
        ["pid 12", "running", "-", "none"]]


def test_a_dead_ranks_row_names_its_signal_or_exit_status():
    assert _fault_rows({"kind": "died", "rank": 2, "signal": "SIGKILL", "exit_code": None,
                        "last_record": {"op": "recv", "seq": 5, "group": "1"}}) == \
        [["rank 2", "SIGKILL", "-", "recv #5 of group 1"]]
    assert _fault_rows({"kind": "exited", "rank": 0, "signal": None, "exit_code": 3}) == \
        [["rank 0", "exit status 3", "-", "none"]]
    assert _fault_rows({"kind": "exited", "rank": None, "signal": None, "exit_code": 1}) == []


# --- the whole page ----------------------------------------------------------------------------------

def _full_report(**extra):
    report = {"verdict": "backend <divergence>", "exit_code": 2, "ops_compared": 10, "identical": 7,
              "within_tolerance": 1, "divergent": 2, "missing_in_a": 0, "missing_in_b": 1, "tolerance": "1e-3",
              "divergence_classes": {"backend": 1, "job_nondeterminism": 1}, "backend_implicated": True,
              "sides": {"a": {"spec": "nccl", "directory": "/r/a", "ranks_recorded": 2},
                        "b": {"spec": "torch-nccl", "directory": "/r/b", "ranks_recorded": 2}}}
    report.update(extra)
    return report


class _Ops:
    def grid(self):
        return {0: ["identical", "backend"]}

    def steps(self):
        return {0: 1}

    def counts(self):
        return {0: 2}


def _sections(page):
    return [h["text"] for h in elements(page, "h2")]


def test_the_page_holds_the_verdict_summary_and_every_plot():
    page = render_html(_full_report(), {"a": None, "b": None}, stats=_Stats([1.0], [2.0]), ops=_Ops())
    assert stray_text(page) == []
    assert "data-plot='latency-by-issue'" in page
    assert page.startswith("<!DOCTYPE html>\n<html lang='en'>") and page.endswith("</body></html>\n")
    assert elements(page, "title")[0]["text"] == "nccl-migrate ab: backend <divergence>"
    verdict = elements(page, "p")[0]
    assert verdict["attrs"]["class"] == "verdict-2" and "(exit status 2)" in verdict["text"]
    assert "<b>backend &lt;divergence&gt;</b>" in page
    assert _sections(page) == ["Summary", "Ranks by op sequence", "Side by side", "Latency per op type",
                               "Latency by op, in issue order", "Memory over time"]
    summary = [[c["text"] for c in row] for row in _rows(page)[:10]]
    assert summary == [["ops compared", "10"], ["identical", "7"], ["within tolerance", "1"], ["divergent", "2"],
                       ["missing on a", "0"], ["missing on b", "1"], ["tolerance", "1e-3"],
                       ["divergent: backend", "1"], ["divergent: job nondeterminism", "1"],
                       ["backend implicated", "yes"]]
    assert "data-plot='op-map'" in page
    assert "Records and the job's output: /r/a, /r/b" in page
    assert "Shadow run" not in page
    header = [c["text"] for c in elements(page, "th")]
    assert header == ["", "a: nccl", "b: torch-nccl"]


def _rows(page):
    parser = _Elements(page)
    rows, current = [], None
    for e in parser.elements:
        if e["tag"] == "tr":
            current = []
            rows.append(current)
        elif e["tag"] == "td" and current is not None:
            current.append(e)
    return rows


def test_a_shadow_run_says_so_and_counts_what_was_not_shadowed():
    page = render_html(_full_report(mode="shadow", not_shadowed={"count": 4}, backend_implicated=False,
                                    run_dir="/runs/x"), {"a": None, "b": None})
    assert "<p>Shadow run: one run; side a is what the job saw, side b each op run again on shadow groups.</p>" in page
    assert stray_text(page) == []
    cells = [[c["text"] for c in row] for row in _rows(page)]
    assert ["not shadowed", "4"] in cells and ["backend implicated", "no"] in cells
    assert cells.index(["not shadowed", "4"]) == cells.index(["tolerance", "1e-3"]) + 1
    assert "Records and the job's output: /runs/x" in page
    assert "Ranks by op sequence" not in _sections(page)  # no op map given


def test_a_failed_side_gets_its_own_section_with_its_ranks():
    report = _full_report()
    report["sides"]["b"]["fault"] = {"kind": "died", "rank": 1, "signal": "SIGSEGV", "exit_code": None,
                                     "text": "rank 1 died <SIGSEGV>"}
    report["sides"]["a"]["fault"] = {"kind": "exited", "rank": None, "signal": None, "exit_code": 1,
                                     "text": "the launcher failed"}
    page = render_html(report, {"a": None, "b": None})
    assert _sections(page)[:3] == ["Summary", "Side a failed", "Side b failed"]
    assert "<h2>Side a failed</h2><p>the launcher failed</p><h2>" in page  # no ranks: no table
    assert "<p>rank 1 died &lt;SIGSEGV&gt;</p><table><tr><th>rank</th><th>how</th><th>inside</th>" \
           "<th>last record</th></tr><tr><td>rank 1</td><td>SIGSEGV</td>" in page


def test_the_first_divergence_and_first_missing_op_are_shown_when_there_are_some():
    page = render_html(_full_report(first_divergence={"rank": 0, "op": "all_reduce", "seq": 3, "group": "0"},
                                    first_missing={"rank": 1, "op": "send", "seq": 0, "group": "0", "missing_on": "a"}),
                       {"a": None, "b": None})
    assert _sections(page)[:3] == ["Summary", "First divergence", "First missing op"]
    assert "<h2>First divergence</h2><table><tr><td>rank</td><td>0</td></tr><tr><td>group</td>" in page
    assert "<tr><td>missing_on</td><td>a</td></tr>" in page
    assert stray_text(page) == []


def test_the_first_different_call_has_its_section_before_the_first_divergence_unless_it_is_that_op():
    call = {"rank": 1, "group": "0", "seq": 4, "op": "all_reduce", "calls": {"a": "x [2]", "b": "x [3]"}}
    first = {"rank": 0, "group": "0", "seq": 3, "op": "all_reduce", "class": "backend"}
    page = render_html(_full_report(first_different_call=call, first_divergence=first, path_differs=True),
                       {"a": None, "b": None})
    assert _sections(page)[:3] == ["Summary", "First different call", "First divergence"]
    assert "<h2>First different call</h2><table><tr><td>side a issued</td><td>x [2]</td></tr>" in page
    cells = [[c["text"] for c in row] for row in _rows(page)]
    assert cells[cells.index(["backend implicated", "yes"]) + 1] == ["the job took a different path", "yes"]
    led = render_html(_full_report(first_different_call=call, first_divergence=call), {"a": None, "b": None})
    assert _sections(led)[:2] == ["Summary", "First divergence"]
    assert "<h2>First divergence</h2><table><tr><td>side a issued</td><td>x [2]</td></tr>" in led
    alone = render_html(_full_report(first_different_call=call), {"a": None, "b": None})
    assert _sections(alone)[:2] == ["Summary", "First different call"]
    assert ["the job took a different path", "no"] in [[c["text"] for c in row] for row in _rows(led)]
    assert stray_text(page) == []


def test_a_run_without_a_comparison_has_no_summary_and_no_op_map():
    report = {"verdict": "side b failed", "exit_code": 1,
              "sides": {"a": {"spec": "x", "directory": None}, "b": {"spec": "y", "directory": "/b"}}}
    page = render_html(report, {"a": None, "b": None}, ops=_Ops())
    assert _sections(page) == ["Side by side", "Latency per op type", "Latency by op, in issue order",
                               "Memory over time"]
    assert elements(page, "p")[0]["attrs"]["class"] == "verdict-1"
    assert "Records and the job's output: , /b" in page
    assert stray_text(page) == []
    assert "Solid: process RSS per rank; dashed: torch&#x27;s allocated CUDA memory." not in page
    assert "Solid: process RSS per rank; dashed: torch's allocated CUDA memory." in page


def test_a_failed_ranks_own_output_is_quoted_under_its_sides_failure():
    report = _full_report()
    report["sides"]["b"]["fault"] = {
        "kind": "exited", "rank": 1, "signal": None, "exit_code": 1, "text": "rank 1 exited with status 1",
        "own_output": {"rank": 1, "shows": "traceback", "logs": ["/r/b/job.log"],
                       "lines": ["Traceback (most recent call last):", "  File 'job.py'", "RuntimeError: <boom>"]}}
    report["sides"]["a"]["fault"] = {"kind": "died", "rank": 0, "signal": "SIGKILL", "exit_code": -9, "text": "x",
                                     "own_output": {"rank": 0, "shows": "nothing", "lines": [], "logs": []}}
    page = render_html(report, {"a": None, "b": None})
    assert ("<p>Rank 1's own output (traceback, from /r/b/job.log):</p><pre>Traceback (most recent call last):\n"
            "  File &#x27;job.py&#x27;\nRuntimeError: &lt;boom&gt;</pre>") in page
    assert "<p>Rank 0 printed nothing (no job log).</p>" in page
    assert stray_text(page) == []


def test_the_side_by_side_table_is_in_plain_units_or_absent_when_a_side_recorded_nothing():
    report = _full_report()
    report["sides"]["a"].update(backend=["nccl: MigrateBackend (nccl)"], wall_seconds=5.987, init_seconds=0.0094,
                                peak_rss_mib={0: 698.1, 1: 698.2}, op_counts={"all_reduce": 6},
                                latency_ms={"all_reduce": {"count": 6, "p50": 0.952}})
    cells = [[c["text"] for c in row] for row in _rows(render_html(report, {"a": None, "b": None}))]
    assert ["backend", "nccl: MigrateBackend (nccl)", "-"] in cells and ["wall time", "6.0 s", "-"] in cells
    assert ["init time", "9.4 ms", "-"] in cells
    assert ["peak RSS", "rank 0 698.1 MiB, rank 1 698.2 MiB", "-"] in cells
    assert ["all_reduce", "6 ops: p50 0.952 ms", "0 ops"] in cells
    report["sides"]["b"].update(ranks_recorded=0, failure="side b failed")
    page = render_html(report, {"a": None, "b": None})
    assert ("<h2>Side by side</h2><p>side b (torch-nccl) recorded nothing: its job failed before any rank recorded "
            "(see its failure)</p>") in page
    assert "peak RSS" not in page
