"""The A/B report: verdict, op comparison, first divergence, and the two sides side by side
(communicators, memory, init time, per-op latency, wall time), as a dict (--format json) or
text."""

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


def _row(label: str, a, b) -> str:
    return f"  {label:<24} {a!s:<46} {b}"


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
        lines.append(f"    class: {first['class'].replace('_', ' ')}; cause: {first['cause']}"
                     + (f" (ranks {first['inputs_differed_on_ranks']})" if first["inputs_differed_on_ranks"] else ""))
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
    lines += ["", _row("", f"a: {a['spec']}", f"b: {b['spec']}")]
    for label, key in (("outcome", "failure"), ("backend", "backend"), ("wall time (s)", "wall_seconds"),
                       ("init time (s)", "init_seconds"), ("peak RSS per rank (MiB)", "peak_rss_mib")):
        value_a, value_b = a.get(key), b.get(key)
        if key == "failure":
            value_a, value_b = outcome(a), outcome(b)
        if key == "init_seconds":
            value_a, value_b = (None if v is None else round(v, 3) for v in (value_a, value_b))
        lines.append(_row(label, value_a, value_b))
    for rank in sorted(set(a.get("communicators") or {}) | set(b.get("communicators") or {})):
        # "-": no report from that rank (not the toolkit's backend, or a rank killed before its exit)
        lines.append(_row(f"communicators rank {rank}", *(len(side["communicators"][rank]) if rank in
                                                          (side.get("communicators") or {}) else "-" for side in (a, b))))
    for op in sorted(set(a.get("op_counts", {})) | set(b.get("op_counts", {}))):
        cell = {}
        for name, side in (("a", a), ("b", b)):
            count, lat = side.get("op_counts", {}).get(op, 0), side.get("latency_ms", {}).get(op)
            cell[name] = f"{count} ops" + (f", p50/p90/p99 {lat['p50']}/{lat['p90']}/{lat['p99']} ms" if lat else "")
        lines.append(_row(op, cell["a"], cell["b"]))
    for side in (a, b):
        if side["failure"]:
            lines.append(f"  {side['failure']}")
    return "\n".join(lines)
