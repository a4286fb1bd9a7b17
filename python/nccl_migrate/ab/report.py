"""The A/B report: verdict, op comparison, first divergence, and the two sides side by side
(communicators, memory, init time, per-op latency, wall time), as a dict (--format json: numbers
stay numbers) or text; the side-by-side rows, in the units a person writes, are the text's and the
HTML page's alike."""

from __future__ import annotations

from .compare import Comparison
from .runner import SideRun
from .side_stats import SideStats
from .sides import SideData


def side_summary(run: SideRun, data: SideData | None, stats: SideStats | None) -> dict:
    summary = {"spec": run.side.text, "env": run.side.env, "directory": run.directory, "log": run.log,
               "failure": run.failure, "wall_seconds": round(run.seconds, 3)}
    if data is None:
        return summary
    metas = [data.metas[r] for r in sorted(data.metas)]
    summary.update(
        backend=sorted({f"{m['backend']}: {m['backend_class']}" for m in metas if m.get("backend")}),
        init_seconds=max((m["init_seconds"] for m in metas if m.get("init_seconds") is not None), default=None),
        peak_rss_mib={m["rank"]: round(m["peak_rss_kib"] / 1024, 1) for m in metas},
        communicators={rank: [f"{c['key']} ({c['purpose']})" for c in r["communicators_created"]]
                       for rank, r in sorted(data.reports.items())} if data.reports else None,
        restarts=getattr(data, "attempt", 0),  # the records read are the last attempt's
        ranks_recorded=len(set(data.ranks()) | set(data.metas)),
    )
    if stats is not None:
        label = run.side.label
        summary.update(op_counts=stats.op_counts(label), latency_ms=stats.latency_ms(label))
    return summary


def build(runs: list[SideRun], data: list, comparison: Comparison | None, exit_code: int, verdict: str,
          stats: SideStats | None = None) -> dict:
    report = {"verdict": verdict, "exit_code": exit_code,
              "sides": {run.side.label: side_summary(run, d, stats) for run, d in zip(runs, data)}}
    if comparison is not None:
        report.update(tolerance=comparison.tolerance, ops_compared=comparison.compared, **comparison.counts,
                      backend_implicated=comparison.backend_implicated, path_differs=comparison.path_differs,
                      divergence_classes=comparison.classes, object_collectives=comparison.object_collectives,
                      first_different_call=comparison.first_different_call,
                      first_divergence=comparison.first_divergence, divergences=comparison.divergences,
                      divergence_samples=comparison.samples, first_missing=comparison.first_missing)
    return report


def _where(op: dict) -> str:
    return f"rank {op['rank']}, group {op['group']}, seq {op['seq']}"


def _op_line(op: dict) -> str:
    where = f"{_where(op)}: {op['op']} {op['dtype']} {op['shape']}"
    where += f" {op['reduce_op']}" if op.get("reduce_op") else ""
    return where + (f" (inside {op['object_collective']})" if op.get("object_collective") else "")


def _calls(op: dict) -> list[str]:
    """An op whose call differs: where, then each side's call, first of what is said of it."""
    return [f"{_where(op)}: a different call on each side", f"    side a issued {op['calls']['a']}",
            f"    side b issued {op['calls']['b']}"]


def outcome(side: dict) -> str:
    """A side's outcome in a few words, for the side-by-side rows."""
    fault = side.get("fault")
    if not fault:
        return "failed" if side.get("failure") else "ok"
    if fault["kind"] in ("died", "exited") and fault.get("rank") is not None:
        how = fault["signal"] or f"status {fault['exit_code']}"
        return f"rank {fault['rank']} {fault['kind']} ({how})"
    if fault["kind"] == "hung":
        return f"hung (timeout {fault['timeout']:g} s)" if fault.get("timeout") is not None else "hung"
    return {"ended": "ended by a signal"}.get(fault["kind"], "failed")


def recorded_nothing(side: dict) -> bool:
    """A side with nothing to show side by side: its records could not be read, or no rank of it
    wrote any (no op, no meta)."""
    return not side.get("ranks_recorded")


def nothing_recorded_because(label: str, side: dict) -> str:
    """What the report says instead of the table for a side that recorded nothing, and why."""
    if "ranks_recorded" not in side:
        why = "its records could not be read (see the verdict)"
    elif side.get("fault") or side.get("failure"):
        why = "its job failed before any rank recorded (see its failure)"
    else:
        why = ("no rank joined a process group (does COMMAND run the job's Python, and does the job call "
               "init_process_group?)")
    return f"side {label} ({side['spec']}) recorded nothing: {why}"


def seconds_text(seconds: float | None) -> str:
    """A duration as a person writes it: "850 ms" below a second, "12.3 s" from there."""
    if seconds is None:
        return "-"
    return f"{milliseconds_text(seconds * 1000)} ms" if seconds < 1 else f"{seconds:.1f} s"


def milliseconds_text(ms: float) -> str:
    """Milliseconds to three significant digits, never in exponent form."""
    if ms >= 100:
        return f"{ms:,.0f}"
    return f"{ms:.3g}" if ms >= 0.001 else f"{ms:.3f}"


def backend_text(backends: list[str] | None) -> str:
    return "; ".join(backends) if backends else "-"


def peak_rss_text(per_rank: dict | None) -> str:
    """Each rank's peak RSS, or, past a few ranks, the largest and smallest with their ranks."""
    if not per_rank:
        return "-"
    if len(per_rank) <= 4:
        return ", ".join(f"rank {rank} {mib:,.1f} MiB" for rank, mib in sorted(per_rank.items()))
    top = max(per_rank, key=lambda rank: (per_rank[rank], -int(rank)))
    low = min(per_rank, key=lambda rank: (per_rank[rank], int(rank)))
    return (f"max {per_rank[top]:,.1f} MiB (rank {top}), min {per_rank[low]:,.1f} MiB (rank {low}), "
            f"{len(per_rank)} ranks")


def ops_text(count: int, latency: dict | None) -> str:
    """An op type's count and the latency percentiles its count gives (side_stats.MIN_SAMPLES)."""
    text = f"{count:,} op" + ("" if count == 1 else "s")
    given = [f"{q} {milliseconds_text(latency[q])} ms" for q in ("p50", "p90", "p99") if q in (latency or {})]
    return text + (": " + ", ".join(given) if given else "")


def cost_rows(report: dict) -> list[list[str]]:
    """The sides side by side, a row per fact: [what, side a, side b]."""
    a, b = report["sides"]["a"], report["sides"]["b"]
    rows = [["outcome", outcome(a), outcome(b)],
            ["backend", backend_text(a.get("backend")), backend_text(b.get("backend"))],
            ["wall time", seconds_text(a.get("wall_seconds")), seconds_text(b.get("wall_seconds"))],
            ["init time", seconds_text(a.get("init_seconds")), seconds_text(b.get("init_seconds"))],
            ["peak RSS", peak_rss_text(a.get("peak_rss_mib")), peak_rss_text(b.get("peak_rss_mib"))]]
    for rank in sorted(set(a.get("communicators") or {}) | set(b.get("communicators") or {})):
        # "-": no report from that rank (not the toolkit's backend, or a rank killed before its exit)
        rows.append([f"communicators rank {rank}", *(str(len(side["communicators"][rank])) if rank in
                                                     (side.get("communicators") or {}) else "-" for side in (a, b))])
    for op in sorted(set(a.get("op_counts") or {}) | set(b.get("op_counts") or {})):
        rows.append([op, *(ops_text((side.get("op_counts") or {}).get(op, 0), (side.get("latency_ms") or {}).get(op))
                           for side in (a, b))])
    return rows


def own_output_lines(label: str, fault: dict | None) -> list[str]:
    """The failed rank's own words (side_failure.own_output), as the text report quotes them."""
    own = (fault or {}).get("own_output")
    if not own:
        return []
    where = " or ".join(own["logs"]) or "no job log"
    if own["shows"] == "nothing":
        return [f"  rank {own['rank']} of side {label} printed nothing ({where})"]
    return ([f"  rank {own['rank']} of side {label}, its own output ({own['shows']}, from {where}):"]
            + [f"    {line}" for line in own["lines"]])


def _table(rows: list[list[str]]) -> list[str]:
    """Rows in columns as wide as their widest cell, two spaces apart."""
    widths = [max(len(row[column]) for row in rows) for column in range(2)]
    return [f"  {row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]}".rstrip() for row in rows]
def render_text(report: dict) -> str:
    lines = [f"nccl-migrate ab: {report['verdict']}"]
    if report.get("mode") == "shadow":
        lines.append("  shadow run: side a is what the job saw; side b ran each op again on shadow groups")
    if "ops_compared" in report:
        lines.append(f"  ops compared {report['ops_compared']}: identical {report['identical']}, "
                     f"within tolerance {report['within_tolerance']}, divergent {report['divergent']}, "
                     f"missing on a {report['missing_in_a']}, missing on b {report['missing_in_b']}")
    skipped = report.get("not_shadowed")
    if skipped and skipped["count"]:
        where = skipped["first"]
        lines.append(f"  not shadowed {skipped['count']} (first: rank {where['rank']}, group {where['group']}, "
                     f"seq {where['seq']}: {where['op']}, {where['reason']})")
    first = report.get("first_divergence")
    called = report.get("first_different_call")
    if called and not (first and "calls" in first):  # the job's other path, before what followed from it
        head, *calls = _calls(called)
        lines += [f"  first different call: {head}", *calls]
    if first:
        classes = ", ".join(f"{cls.replace('_', ' ')} {n}" for cls, n in report["divergence_classes"].items())
        lines.append(f"  divergent ops by class: {classes}")
        if report.get("object_collectives"):
            lines.append("  divergent ops inside object collectives (pickled objects): "
                         + ", ".join(f"{name} {n}" for name, n in report["object_collectives"].items()))
        if "calls" in first:  # both calls first; the reason would only repeat them
            head, *calls = _calls(first)
            lines += [f"  first divergence: {head}", *calls]
        else:
            lines.append(f"  first divergence: {_op_line(first)}")
        ranks = first["inputs_differed_on_ranks"]
        lines.append(f"    class: {first['class'].replace('_', ' ')}; cause: {first['cause']}"
                     + (f" (on rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))})" if ranks else ""))
        if "max_abs_error" in first:
            lines.append(f"    max abs error {first['max_abs_error']}, max rel error {first['max_rel_error']}")
        if first.get("reason") and "calls" not in first:
            lines.append(f"    {first['reason']}")
        for cls, sample in report.get("divergence_samples", {}).items():  # a rarer class behind the first
            if sample and cls != first["class"]:
                lines.append(f"  first {cls.replace('_', ' ')} divergence: {_op_line(sample[0])}")
    if report.get("first_missing"):
        missing = report["first_missing"]
        lines.append(f"  first op missing on side {missing['missing_on']}: {_op_line(missing)}")
    a, b = report["sides"]["a"], report["sides"]["b"]
    empty = [label for label, side in (("a", a), ("b", b)) if recorded_nothing(side)]
    if empty:  # a table of dashes would say nothing; why there is none does
        lines += [""] + [f"  {nothing_recorded_because(label, report['sides'][label])}" for label in empty]
    else:
        lines += [""] + _table([["", f"a: {a['spec']}", f"b: {b['spec']}"], *cost_rows(report)])
    for label, side in (("a", a), ("b", b)):
        if side["failure"]:
            lines.append(f"  {side['failure']}")
        lines += own_output_lines(label, side.get("fault"))
    return "\n".join(lines)
