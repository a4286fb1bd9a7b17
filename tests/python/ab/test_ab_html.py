"""The HTML report: one self-contained, well-formed file with the JSON report's figures and its
plots, written into the run directory and to --html PATH."""

import json
from html.parser import HTMLParser

from nccl_migrate.ab.report import milliseconds_text, seconds_text
from test_ab_cli import TINY_JOB, ab
from torch_support import requires_torch


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.open, self.errors, self.plots, self.text, self.external = [], [], [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "svg":
            self.plots.append(attrs.get("data-plot"))
        for key in ("src", "href"):
            if attrs.get(key):
                self.external.append(attrs[key])
        if tag not in ("meta", "br", "img"):  # void elements; self-closing ones never get here
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if not self.open or self.open[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.open[-1:] or 'nothing'}")
        else:
            self.open.pop()

    def handle_data(self, data):
        self.text.append(data)


@requires_torch("backend_plugins")
def test_the_html_report_holds_the_json_reports_figures_and_plots(tmp_path):
    perturb = '"NCCL_MIGRATE_AB_PERTURB=rank=0,group=0,seq=1"'
    out = tmp_path / "page.html"
    status, report, stderr = ab(tmp_path, "--keep-tensors", "4096", "--html", str(out), "--b", f"rewritten,{perturb}",
                                "--", TINY_JOB)
    assert status == 1, stderr
    page_text = out.read_text()
    assert page_text == (tmp_path / "run" / "report.html").read_text()
    assert json.loads((tmp_path / "run" / "report.json").read_text()) == report
    page = Page()
    page.feed(page_text)
    page.close()
    assert page_text.startswith("<!DOCTYPE html>") and not page.errors and not page.open, (page.errors, page.open)
    assert not page.external and "<script" not in page_text, "self-contained: nothing is fetched"
    assert set(page.plots) == {"op-map", "latency-by-op", "latency-by-issue", "memory"}
    text = " ".join(" ".join(page.text).split())
    assert report["verdict"] in text
    for label, key in (("ops compared", "ops_compared"), ("identical", "identical"), ("divergent", "divergent")):
        assert f"{label} {report[key]}" in text
    first = report["first_divergence"]
    assert (first["rank"], first["seq"], first["op"]) == (0, 1, "all_reduce")
    for key in ("rank", "group", "seq", "op", "dtype", "max_abs_error"):
        assert f"{key} {first[key]}" in text
    # 3 all_reduces on each of 2 ranks: a p50, too few ops for a p90 or p99
    lat = [report["sides"][side]["latency_ms"]["all_reduce"] for side in ("a", "b")]
    assert all(side == {"count": 6, "p50": side["p50"]} for side in lat), lat
    assert (f"all_reduce 6 ops: p50 {milliseconds_text(lat[0]['p50'])} ms 6 ops: p50 "
            f"{milliseconds_text(lat[1]['p50'])} ms") in text
    assert "p90" not in text.split("Side by side")[1].split("Latency per op type")[0]
    walls = [seconds_text(report["sides"][side]["wall_seconds"]) for side in ("a", "b")]
    assert f"wall time {walls[0]} {walls[1]}" in text
    assert page_text.count("<rect") >= 6 and page_text.count("<polyline") >= 2 + 2 * 2  # bars; latency and RSS lines
