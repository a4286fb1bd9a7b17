"""The HTML report as people see it: rendered by a real browser (Debian's chromium, headless) from
a report of many op types, ranks and a planted divergence. Nothing is drawn past the page's
column, no two labels of a chart overlap, each side's memory starts at its own time zero, and the
ranks-by-op-sequence map shows where the divergence and the missing ops are."""

import itertools
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib

import pytest
from test_ab_cli import CLI

CHROMIUM = shutil.which("chromium")
OPS = ("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single",
       "batch_isend_irecv", "barrier", "gather", "scatter", "reduce_scatter", "all_to_all")
RANKS, OPS_PER_RANK = 8, 240
WINDOW = (1280, 4200)
PAGE_COLUMN = 1100 + 2 * 14 + 4  # the report's body: max-width 1100 px, 2em margins, and a border


def _ci_flags(profile) -> list[str]:
    """What a CI runner needs: its own profile (HOME may be unwritable or shared by parallel runs),
    no /dev/shm (Docker's 64 MB does not hold a 1280x4200 screenshot), nothing fetched (runners are
    offline), and no sandbox only where it cannot work: as root."""
    flags = [f"--user-data-dir={profile}", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-background-networking", "--disable-component-update"]
    return flags + (["--no-sandbox"] if os.geteuid() == 0 else [])


def chromium(*args):
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: tools/setup.sh installs it (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        done = subprocess.run([CHROMIUM, "--headless", *_ci_flags(profile), "--disable-gpu", "--hide-scrollbars",
                               f"--window-size={WINDOW[0]},{WINDOW[1]}", *args], capture_output=True, text=True,
                              timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _side(directory, label):
    """Records of a job with many op types on RANKS ranks: side b's rank 5 computes op 100
    differently (identical inputs), and side b's rank 7 stops 10 ops early."""
    directory.mkdir(parents=True)
    for rank in range(RANKS):
        started = (1000.0 if label == "a" else 9000.0) + rank * 0.5  # ranks start apart; the runs far apart
        memory = [[t / 10, 300 + rank + t, None] for t in range(40)]
        (directory / f"rank{rank}.meta.json").write_text(json.dumps(
            {"rank": rank, "world_size": RANKS, "peak_rss_kib": 400 * 1024, "memory": memory, "started_at": started,
             "backend": "nccl", "backend_class": "MigrateBackend", "init_seconds": 0.1}))
        count = OPS_PER_RANK - (10 if (label, rank) == ("b", 7) else 0)
        lines = []
        for seq in range(count):
            out = "x" if (label, rank, seq) == ("b", 5, 100) else f"o{seq}"
            lines.append(json.dumps({"rank": rank, "group": "0", "seq": seq, "op": OPS[seq % len(OPS)],
                                     "dtype": "float32", "in_shapes": [[8]], "out_shapes": [[8]], "reduce_op": None,
                                     "peer": None, "t": started + seq * 0.01, "ms": 0.2 + (seq % 7) * (1 + rank),
                                     "in": f"i{seq}", "out": out}))
        (directory / f"rank{rank}.jsonl").write_text("".join(line + "\n" for line in lines))


def _png_rows(path):
    """The pixel rows of an 8-bit RGB(A) non-interlaced PNG, as bytes per row (what chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, pos = {}, 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunks.setdefault(kind, []).append(data[pos + 8:pos + 8 + length])
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"][0])
    assert depth == 8 and colour in (2, 6) and interlace == 0
    channels = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(chunks[b"IDAT"])), width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b, c = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + a) & 255
            elif kind == 2:
                line[x] = (line[x] + b) & 255
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


MEASURE = """<script>
const out = {};
for (const svg of document.querySelectorAll('svg[data-plot]')) {
  const box = svg.getBoundingClientRect();
  const texts = [...svg.querySelectorAll('text')].map(t => t.getBoundingClientRect());
  let overlaps = 0;
  for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
    const a = texts[i], b = texts[j];
    if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) overlaps++;
  }
  const textRight = Math.max(...texts.map(t => t.right));
  out[svg.dataset.plot] = {right: Math.max(box.right, textRight), overlaps: overlaps,
    starts: [...svg.querySelectorAll('polyline')].map(p => [p.getAttribute('stroke'),
                                                             parseFloat(p.getAttribute('points').split(',')[0])])};
}
out.page = document.documentElement.clientWidth;
const pre = document.createElement('pre'); pre.id = 'measured'; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def test_the_report_renders_in_a_real_browser_within_the_page_and_without_overlaps(tmp_path):
    _side(tmp_path / "a", "a"), _side(tmp_path / "b", "b")
    done = subprocess.run([CLI, "ab", "--format", "json", "--run-dir", str(tmp_path / "run"), "compare",
                           str(tmp_path / "a"), str(tmp_path / "b")], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["divergence_classes"]["backend"] == 1 and report["missing_in_b"] == 10
    page = tmp_path / "run" / "report.html"
    shot = tmp_path / "shot.png"
    chromium(f"--screenshot={shot}", f"file://{page}")
    width, height, channels, rows = _png_rows(shot)
    assert (width, height) == WINDOW
    drawn = [y for y, row in enumerate(rows) if set(row[:PAGE_COLUMN * channels]) != {255}]
    assert len(drawn) > height // 3, "the browser drew the report"
    beyond = [y for y, row in enumerate(rows) if set(row[PAGE_COLUMN * channels:]) - {255}]
    assert not beyond, f"drawn past the page's column at rows {beyond[:5]}..."

    instrumented = tmp_path / "measured.html"
    instrumented.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    dom = chromium("--dump-dom", "--virtual-time-budget=5000", f"file://{instrumented}")
    measured = json.loads(re.search(r"<pre id=\"measured\">(.*?)</pre>", dom, re.DOTALL).group(1).replace("&quot;", '"'))
    assert {"latency-by-op", "latency-by-issue", "memory", "op-map"} <= set(measured)
    for plot, facts in measured.items():
        if plot != "page":
            assert facts["right"] <= PAGE_COLUMN, (plot, facts["right"])
            assert facts["overlaps"] == 0, f"{facts['overlaps']} overlapping labels in {plot}"
    memory = measured["memory"]["starts"]  # (side's colour, x of its first sample), rank by rank
    firsts = {colour: [x for c, x in memory if c == colour] for colour, _ in memory}
    assert len(firsts) == 2 and abs(firsts.popitem()[1][0] - firsts.popitem()[1][0]) < 2, \
        "each side starts at its own time zero, however far apart the runs were"
    for colour in {c for c, _ in memory}:
        starts = [x for c, x in memory if c == colour]
        steps = [b - a for a, b in itertools.pairwise(starts)]
        assert len(starts) == RANKS and min(steps) > 5 and max(steps) - min(steps) < 2, \
            "each rank is placed by its own start (0.5 s apart here)"

    svg = re.search(r"<svg data-plot='op-map'.*?</svg>", page.read_text(), re.DOTALL).group(0)
    cells = re.findall(r"<rect [^>]*fill='(#[0-9a-f]+)'><title>(rank \d+), ops (\d+)-(\d+): ([a-z ]+)</title>", svg)
    assert ("#d32f2f", "rank 5", "backend") in {(c, r, s) for c, r, _, _, s in cells}
    backend = [(int(lo), int(hi)) for c, r, lo, hi, s in cells if s == "backend"]
    assert len(backend) == 1 and backend[0][0] <= 100 <= backend[0][1]
    assert any(r == "rank 7" and s == "missing in b" and int(hi) == OPS_PER_RANK - 1 for _, r, _, hi, s in cells)
    assert {s for *_, s in cells} == {"identical", "backend", "missing in b"}
