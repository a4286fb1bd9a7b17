"""The A/B report as one self-contained HTML file: summary, first divergence, the two sides' cost
side by side, and inline SVG plots (per-op latency percentiles, latency by op in issue order,
memory over time). No script and nothing fetched: it opens anywhere, offline."""

from __future__ import annotations

import html
import math

from .op_map import COLOUR, LEGEND, SEVERITY
from .report import (
    cost_rows,
    milliseconds_text,
    nothing_recorded_because,
    recorded_nothing,
)
from .side_stats import MIN_SAMPLES
from .sides import SideData

COLOURS = {"a": "#1f77b4", "b": "#ff7f0e"}
QUANTILES = ("p50", "p90", "p99")
PLOT_WIDTH = 900  # every plot fits the page's 1100 px body
MAP_ROWS, MAP_COLUMNS = 128, 256
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; max-width: 1100px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5em 0; } td, th { border: 1px solid #ccc; padding: 3px 8px;
text-align: left; vertical-align: top; } th { background: #f4f4f4; }
.verdict-0 { color: #137333; } .verdict-1 { color: #b06000; } .verdict-2 { color: #c5221f; }
svg { background: #fcfcfc; border: 1px solid #e4e4e4; margin: .4em 0; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
pre { background: #f6f6f6; padding: .5em; white-space: pre-wrap; overflow-wrap: anywhere; }
.legend span { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; vertical-align: middle; }
"""


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def _table(rows: list[list], header: list[str] | None = None) -> str:
    head = "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


def _legend(report: dict) -> str:
    return "<p class='legend'>" + "".join(
        f"<span style='background:{COLOURS[s]}'></span>{s}: {_e(report['sides'][s]['spec'])}" for s in ("a", "b")) + "</p>"


def _ticks(top: float, count: int = 4) -> list[float]:
    if top <= 0:
        return [0.0]
    step = 10 ** math.floor(math.log10(top / count))
    for factor in (1, 2, 5, 10):
        if top / (step * factor) <= count:
            step *= factor
            break
    return [i * step for i in range(int(top / step) + 1)]


def _axes(width: int, height: int, left: int, bottom: int, y_max: float, y_label: str, x_label: str) -> list[str]:
    parts = [f"<line x1='{left}' y1='{height - bottom}' x2='{width - 10}' y2='{height - bottom}' stroke='#888'/>",
             f"<line x1='{left}' y1='10' x2='{left}' y2='{height - bottom}' stroke='#888'/>",
             f"<text x='{left}' y='{height - 4}'>{_e(x_label)}</text>",
             f"<text x='4' y='12'>{_e(y_label)}</text>"]
    for tick in _ticks(y_max):
        y = height - bottom - (tick / y_max) * (height - bottom - 20) if y_max else height - bottom
        parts.append(f"<line x1='{left - 4}' y1='{y:.1f}' x2='{width - 10}' y2='{y:.1f}' stroke='#eee'/>")
        parts.append(f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor='end'>{tick:g}</text>")
    return parts


def latency_bars(report: dict) -> str:
    """Per op type, p50/p90/p99 latency of both sides as horizontal bars, one row per op type: the
    chart keeps its width however many op types there are, and no label shares a row."""
    sides = report["sides"]
    ops = sorted(set(sides["a"].get("latency_ms") or {}) | set(sides["b"].get("latency_ms") or {}))
    if not ops:
        return "<p>No op latencies recorded.</p>"
    values = [((sides[s].get("latency_ms") or {}).get(op) or {}).get(q, 0) for s in "ab" for op in ops for q in QUANTILES]
    top = max(values) or 1.0
    label_w = 8 + 7 * max(len(op) for op in ops)  # 7 px per character of the 11 px labels
    bar, row = 7, 6 * 7 + 12
    width, left, right, head = PLOT_WIDTH, label_w, 70, 24
    plot_w = width - left - right
    height = head + row * len(ops) + 24
    parts = [f"<text x='{left}' y='14'>latency (ms): p50, p90, p99 of side a, then side b</text>"]
    for tick in _ticks(top):
        x = left + tick / top * plot_w
        parts.append(f"<line x1='{x:.1f}' y1='{head}' x2='{x:.1f}' y2='{height - 20}' stroke='#eee'/>")
        parts.append(f"<text x='{x:.1f}' y='{height - 6}' text-anchor='middle'>{tick:g}</text>")
    for i, op in enumerate(ops):
        y0 = head + i * row
        parts.append(f"<text x='{left - 6}' y='{y0 + row / 2:.1f}' text-anchor='end'>{_e(op)}</text>")
        for j, side in enumerate("ab"):
            lat = (sides[side].get("latency_ms") or {}).get(op)
            if lat is None:  # this side never ran it
                continue
            for k, q in enumerate(QUANTILES):
                if q not in lat:  # too few ops for it: no bar, rather than one that means something else
                    continue
                y = y0 + (j * 3 + k) * bar + (4 if j else 0)
                parts.append(f"<rect x='{left}' y='{y}' width='{lat[q] / top * plot_w:.1f}' height='{bar - 1}' "
                             f"fill='{COLOURS[side]}' fill-opacity='{(0.45, 0.7, 1.0)[k]}'><title>{_e(op)} side "
                             f"{side} {q}: {milliseconds_text(lat[q])} ms</title></rect>")
            given = [q for q in QUANTILES if q in lat]
            end = lat[given[-1]] if given else 0
            label = (f"{given[-1]} {milliseconds_text(end)}" if given else
                     f"{lat.get('count', 0)} op{'' if lat.get('count') == 1 else 's'}: too few for a percentile")
            parts.append(f"<text x='{left + end / top * plot_w + 4:.1f}' y='{y0 + j * 3 * bar + 2.5 * bar + (4 if j else 0):.1f}'"
                         f">{_e(label)}</text>")
    fewest = ", ".join(f"{q} from {MIN_SAMPLES[q]}" for q in QUANTILES)
    return (f"<svg data-plot='latency-by-op' width='{width}' height='{height}' viewBox='0 0 {width} {height}' "
            f"role='img'>{''.join(parts)}</svg><p>A percentile is drawn only from enough ops ({fewest}): below "
            "that, the sample holds nothing of the tail it would describe.</p>")


def op_map(grid: dict[int, list[str]], steps: dict[int, int], counts: dict[int, int]) -> str:
    """Ranks (rows, consecutive ranks merged past MAP_ROWS) by op sequence (columns of equal op
    counts), each cell coloured by the worst the comparison found in it."""
    if not grid:
        return "<p>No ops compared.</p>"
    longest = max(counts.values()) or 1
    columns = min(MAP_COLUMNS, longest)
    per_column = longest / columns
    ranks = sorted(grid)
    per_row = max(1, math.ceil(len(ranks) / MAP_ROWS))
    rows: list[list[str | None]] = []
    for start in range(0, len(ranks), per_row):
        merged: list[str | None] = [None] * columns
        for rank in ranks[start:start + per_row]:
            for cell, status in enumerate(grid[rank]):
                first = int(cell * steps[rank] / per_column)
                last = min(columns - 1, int(((cell + 1) * steps[rank] - 1) / per_column))
                for column in range(first, last + 1):
                    if merged[column] is None or SEVERITY[status] > SEVERITY[merged[column]]:
                        merged[column] = status
        rows.append(merged)
    left, head, cell_h = 70, 8, max(4, min(18, 360 // len(rows)))
    width, plot_w = PLOT_WIDTH, PLOT_WIDTH - 70 - 20
    height = head + cell_h * len(rows) + 30
    parts = []
    for r, cells in enumerate(rows):
        y, first_rank = head + r * cell_h, ranks[r * per_row]
        label = f"rank {first_rank}" if per_row == 1 else f"ranks {first_rank}-{ranks[min(len(ranks), (r + 1) * per_row) - 1]}"
        if r % max(1, len(rows) // 16) == 0:
            parts.append(f"<text x='{left - 6}' y='{y + cell_h - 1}' text-anchor='end'>{_e(label)}</text>")
        column = 0
        while column < columns:  # one rect per run of equal cells keeps the page small
            end = column
            while end + 1 < columns and cells[end + 1] == cells[column]:
                end += 1
            if cells[column] is not None:
                x, w = left + column / columns * plot_w, (end - column + 1) / columns * plot_w
                parts.append(f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='{cell_h - 1}' "
                             f"fill='{COLOUR[cells[column]]}'><title>{_e(label)}, ops {int(column * per_column)}-"
                             f"{int((end + 1) * per_column) - 1}: {cells[column].replace('_', ' ')}</title></rect>")
            column = end + 1
    parts.append(f"<text x='{left}' y='{height - 8}'>each rank's ops in issue order (0 .. {longest - 1})</text>")
    legend = "".join(f"<span style='background:{colour}'></span>{name.replace('_', ' ')}" for name, colour in LEGEND)
    return (f"<p class='legend'>{legend}</p><svg data-plot='op-map' width='{width}' height='{height}' "
            f"viewBox='0 0 {width} {height}' role='img'>{''.join(parts)}</svg>")


def latency_by_issue(stats) -> str:
    """Each op's latency on rank 0, in the order rank 0 issued them, one line per side."""
    series = {side: stats.rank0_series(side) for side in ("a", "b")} if stats else {}
    if not any(series.values()):
        return "<p>No ops recorded on rank 0.</p>"
    count = max(len(v) for v in series.values())
    top = max(max(v) for v in series.values() if v) or 1.0
    width, height, left, bottom = 900, 260, 60, 40
    parts = _axes(width, height, left, bottom, top, "latency (ms)", "rank 0's ops in issue order")
    plot_w, plot_h = width - left - 20, height - bottom - 20
    for side, values in series.items():
        points = " ".join(f"{left + (i / max(1, count - 1)) * plot_w:.1f},{height - bottom - v / top * plot_h:.1f}"
                          for i, v in enumerate(values))
        parts.append(f"<polyline points='{points}' fill='none' stroke='{COLOURS[side]}' stroke-width='1.2'/>")
    return f"<svg data-plot='latency-by-issue' width='{width}' height='{height}' role='img'>{''.join(parts)}</svg>"


def memory_over_time(data: dict[str, SideData | None]) -> str:
    """Each rank's RSS (solid) and, when CUDA was used, torch's allocated device memory (dashed),
    against seconds since its side's first rank started: each rank's samples are placed by its
    own start (wall clock), so ranks of one side line up and both sides start at 0."""
    lines = []
    for side, d in data.items():
        metas = (d.metas if d else {}).items()
        # A rank that wrote no start time is placed at the origin; it does not move it.
        origin = min((m["started_at"] for _, m in metas if m.get("started_at") is not None), default=0.0)
        for rank, meta in sorted(metas):
            shift = (meta.get("started_at") or origin) - origin
            samples = meta.get("memory") or []
            if samples:
                lines.append((side, rank, [(s[0] + shift, s[1]) for s in samples], ""))
                cuda = [(s[0] + shift, s[2]) for s in samples if s[2] is not None]
                if cuda:
                    lines.append((side, rank, cuda, "4 3"))
    if not lines:
        return "<p>No memory samples recorded.</p>"
    t_max = max(p[0] for _, _, pts, _ in lines for p in pts) or 1.0
    top = max(p[1] for _, _, pts, _ in lines for p in pts) or 1.0
    width, height, left, bottom = PLOT_WIDTH, 260, 60, 40
    parts = _axes(width, height, left, bottom, top, "MiB", "seconds since the side's first rank started")
    plot_w, plot_h = width - left - 20, height - bottom - 20
    for tick in _ticks(t_max):
        x = left + tick / t_max * plot_w
        parts.append(f"<text x='{x:.1f}' y='{height - bottom + 14}' text-anchor='middle'>{tick:g}</text>")
    for side, rank, pts, dash in lines:
        points = " ".join(f"{left + t / t_max * plot_w:.1f},{height - bottom - v / top * plot_h:.1f}" for t, v in pts)
        parts.append(f"<polyline points='{points}' fill='none' stroke='{COLOURS[side]}' stroke-width='1.2' "
                     f"stroke-dasharray='{dash}'><title>side {side} rank {rank}</title></polyline>")
    return f"<svg data-plot='memory' width='{width}' height='{height}' role='img'>{''.join(parts)}</svg>"


def _op_rows(op: dict) -> list[list]:
    """An op's fields in order; an op whose call differs starts with each side's call (its reason,
    which only repeats them, left out)."""
    keys = ("rank", "group", "seq", "op", "dtype", "shape", "reduce_op", "peer", "object_collective", "class", "cause",
            "inputs_differed_on_ranks",
            "max_abs_error", "max_rel_error", "reason", "missing_on")
    calls = op.get("calls")
    rows = [["side a issued", calls["a"]], ["side b issued", calls["b"]]] if calls else []
    return rows + [[k, ", ".join(map(str, op[k])) if k == "inputs_differed_on_ranks" and isinstance(op[k], list) else op[k]]
                   for k in keys if k in op and op[k] not in (None, [], "") and not (calls and k == "reason")]


def _op_name(op: dict | None) -> str:
    return f"{op['op']} #{op['seq']} of group {op['group']}" if op else "none"


def _fault_rows(fault: dict) -> list[list]:
    """A failed side's ranks: the one that died and its last record, or each rank still running at
    the deadline with the op it was inside and its last record."""
    if fault["kind"] == "hung":
        return [[f"rank {r['rank']}" if r["rank"] is not None else f"pid {r['pid']}",
                 "stopped" if r["stopped"] else "running",
                 ", ".join(_op_name(op) for op in r.get("inside") or []) or "-", _op_name(r.get("last_record"))]
                for r in fault["running"]]
    if fault.get("rank") is None:
        return []
    return [[f"rank {fault['rank']}", fault["signal"] or f"exit status {fault['exit_code']}", "-",
             _op_name(fault.get("last_record"))]]


def _own_output(fault: dict) -> str:
    """The failed rank's own words (side_failure.own_output), as printed."""
    own = fault.get("own_output")
    if not own:
        return ""
    where = " or ".join(own["logs"]) or "no job log"
    if own["shows"] == "nothing":
        return f"<p>Rank {own['rank']} printed nothing ({_e(where)}).</p>"
    return (f"<p>Rank {own['rank']}'s own output ({_e(own['shows'])}, from {_e(where)}):</p>"
            f"<pre>{_e(chr(10).join(own['lines']))}</pre>")


def _side_by_side(report: dict) -> str:
    """The cost table, or why there is none: a side that recorded nothing has nothing to set beside
    the other's."""
    sides = report["sides"]
    empty = [label for label in ("a", "b") if recorded_nothing(sides[label])]
    if empty:
        return "".join(f"<p>{_e(nothing_recorded_because(label, sides[label]))}</p>" for label in empty)
    return _table(cost_rows(report), ["", "a: " + sides["a"]["spec"], "b: " + sides["b"]["spec"]])


def render_html(report: dict, data: dict[str, SideData | None], stats=None, ops=None) -> str:
    """The whole report; ``data`` holds each side's records (None for a side that could not be read)."""
    verdict = (f"<h1>nccl-migrate ab</h1><p class='verdict-{report['exit_code']}'><b>{_e(report['verdict'])}</b> "
               f"(exit status {report['exit_code']})</p>")
    body = [verdict]
    if report.get("mode") == "shadow":
        body.append("<p>Shadow run: one run; side a is what the job saw, side b each op run again on shadow groups.</p>")
    if "ops_compared" in report:
        body.append("<h2>Summary</h2>" + _table(
            [["ops compared", report["ops_compared"]], ["identical", report["identical"]],
             ["within tolerance", report["within_tolerance"]], ["divergent", report["divergent"]],
             ["missing on a", report["missing_in_a"]], ["missing on b", report["missing_in_b"]],
             ["tolerance", report["tolerance"]]]
            + ([["not shadowed", report["not_shadowed"]["count"]]] if "not_shadowed" in report else [])
            + [[f"divergent: {cls.replace('_', ' ')}", n] for cls, n in report["divergence_classes"].items()]
            + [["backend implicated", "yes" if report["backend_implicated"] else "no"],
               ["the job took a different path", "yes" if report.get("path_differs") else "no"]]))
    for label, side in report["sides"].items():
        fault = side.get("fault")
        if fault:
            rows = _fault_rows(fault)
            body.append(f"<h2>Side {label} failed</h2><p>{_e(fault['text'])}</p>"
                        + (_table(rows, ["rank", "how", "inside", "last record"]) if rows else "")
                        + _own_output(fault))
    called, first = report.get("first_different_call"), report.get("first_divergence")
    if called and not (first and "calls" in first):  # the job's other path, before what followed from it
        body.append("<h2>First different call</h2>" + _table(_op_rows(called)))
    if first:
        body.append("<h2>First divergence</h2>" + _table(_op_rows(first)))
    if report.get("first_missing"):
        body.append("<h2>First missing op</h2>" + _table(_op_rows(report["first_missing"])))
    if ops is not None and "ops_compared" in report:
        body.append("<h2>Ranks by op sequence</h2>" + op_map(ops.grid(), ops.steps(), ops.counts()))
    body.append("<h2>Side by side</h2>" + _side_by_side(report))
    body.append("<h2>Latency per op type</h2>" + _legend(report) + latency_bars(report))
    body.append("<h2>Latency by op, in issue order</h2>" + _legend(report) + latency_by_issue(stats))
    body.append("<h2>Memory over time</h2>" + _legend(report) + memory_over_time(data)
                + "<p>Solid: process RSS per rank; dashed: torch's allocated CUDA memory.</p>")
    places = report.get("run_dir") or ", ".join(side.get("directory") or "" for side in report["sides"].values())
    body.append(f"<p>Records and the job's output: {_e(places)}</p>")
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>nccl-migrate ab: "
            f"{_e(report['verdict'])}</title><style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n")
