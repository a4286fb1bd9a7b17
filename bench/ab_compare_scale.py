"""What comparing two recorded sides costs as jobs grow: synthetic records of R ranks x OPS ops
per side (default 10,000 ops per rank, R from 64 to 1,024), compared by `nccl-migrate ab`'s
streaming comparison and, beside it in the same run while it fits, by a peer that first reads
every record of both sides into memory (what a comparison keyed on the whole job needs). Each
comparison runs in a fresh process; the table gives its time and its peak RSS above what the
process held once torch and the package were imported (about 0.5 GiB, the same for both), per-op
time, and both ratios against the smallest R (how they grow) and against the peer.

Records are written as the recorder writes them (one JSON line per op, every rank's own file),
twelve op types in turn, with one op on every rank computed differently on side b (so each
comparison classifies R divergences) and side b's last rank 10 ops short (missing ops). Beside it,
in the same run, the same side a against a side b where every op diverges (R x OPS divergences):
its time and peak RSS, and its RSS against the one-divergence-per-rank comparison of the same R
(flat when the divergences' facts do not live in memory).

    .venv/bin/python bench/ab_compare_scale.py [--ranks 64,128,256,512,1024] [--ops 10000]
                                               [--peer-max-ranks 128] [--every-max-ranks 1024] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from _tree_package import use_tree_package  # tools/_tree_package.py

use_tree_package()

OPS = ("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor",
       "all_to_all_single", "batch_isend_irecv", "barrier", "gather", "scatter", "reduce_scatter", "all_to_all")
LINE = ('{{"rank": {rank}, "group": "{group}", "seq": {seq}, "op": "{op}", "dtype": "bfloat16", '
        '"in_shapes": [[4096, 1024]], "out_shapes": [[4096, 1024]], "reduce_op": "{reduce}", "peer": null, '
        '"t": {t:.6f}, "ms": {ms:.3f}, "in": "{inp}", "out": "{out}"}}\n')


def _digest(side_seed: int, rank: int, seq: int) -> str:
    return f"{(rank * 1_000_003 + seq * 7919 + side_seed) & (2**128 - 1):032x}"


def write_side(directory: str, label: str, ranks: int, ops: int, diverging: str = "one") -> None:
    """One side's records, as the recorder leaves them; side b's outputs differ from a's at one op
    per rank (``diverging`` "one") or at every op ("every")."""
    os.makedirs(directory, exist_ok=True)
    for rank in range(ranks):
        count = ops - 10 if (label, rank) == ("b", ranks - 1) else ops
        with open(os.path.join(directory, f"rank{rank}.jsonl"), "w") as out:
            out.writelines(LINE.format(rank=rank, group="0" if seq % 5 else "1", seq=seq, op=OPS[seq % len(OPS)],
                                       reduce="SUM" if seq % 3 == 0 else "null", t=1000.0 + seq * 0.004,
                                       ms=0.3 + (seq % 11) * 0.07, inp=_digest(0, rank, seq),
                                       out=_digest(1 if label == "b" and (diverging == "every" or seq == ops // 2)
                                                   else 2, rank, seq))
                           for seq in range(count))
        with open(os.path.join(directory, f"rank{rank}.meta.json"), "w") as out:
            json.dump({"rank": rank, "world_size": ranks, "peak_rss_kib": 1 << 20, "started_at": 1000.0,
                       "memory": [[i * 0.1, 900.0 + i, None] for i in range(600)]}, out)


def subset(source: str, target: str, ranks: int) -> None:
    """The first ``ranks`` ranks of a larger side, linked, not copied."""
    os.makedirs(target, exist_ok=True)
    for rank in range(ranks):
        for name in (f"rank{rank}.jsonl", f"rank{rank}.meta.json"):
            os.symlink(os.path.join(source, name), os.path.join(target, name))


def streaming(dir_a: str, dir_b: str) -> dict:
    from nccl_migrate.ab.compare import compare
    from nccl_migrate.ab.op_map import OpMap
    from nccl_migrate.ab.side_stats import SideStats
    from nccl_migrate.ab.sides import load

    stats, ops = SideStats(), OpMap()
    result = compare(load(dir_a), load(dir_b), observers=[stats, ops])
    ops.grid()
    return {"compared": result.compared, "divergent": result.counts["divergent"],
            "backend": result.classes["backend"], "missing": result.counts["missing_in_b"]}


def whole_job_in_memory(dir_a: str, dir_b: str) -> dict:
    """The peer: every record of both sides read into one dict per side, then compared key by key."""
    import glob

    from nccl_migrate.ab.compare import _judge
    from nccl_migrate.ab.sides import SideData, read_records

    sides = []
    for directory in (dir_a, dir_b):
        data = SideData(directory)
        for path in glob.glob(os.path.join(directory, "rank*.jsonl")):
            for _, entry in read_records(path):
                data.ops[(entry["rank"], entry["group"], entry["seq"])] = entry
        sides.append(data)
    a, b = sides
    counts = {"compared": 0, "divergent": 0, "missing": 0}
    for key in sorted(set(a.ops) | set(b.ops)):
        counts["compared"] += 1
        if key not in a.ops or key not in b.ops:
            counts["missing"] += 1
        elif _judge(a.ops[key], b.ops[key], a, b, 0.0)[0] == "divergent":
            counts["divergent"] += 1
    return counts


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(mode: str, dir_a: str, dir_b: str) -> None:
    import nccl_migrate.ab.compare  # noqa: F401 - torch and the package, imported before the clock starts

    before = _rss_mib()
    started = time.perf_counter()
    counts = (streaming if mode == "streaming" else whole_job_in_memory)(dir_a, dir_b)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(dict(counts, seconds=seconds, peak_mib=peak - before)))


def measure(mode: str, dir_a: str, dir_b: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", mode, dir_a, dir_b], capture_output=True, text=True,
                          check=False)
    if done.returncode:
        raise SystemExit(f"the {mode} comparison failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", default="64,128,256,512,1024")
    parser.add_argument("--ops", type=int, default=10_000, help="ops per rank per side")
    parser.add_argument("--peer-max-ranks", type=int, default=128, help="largest R the in-memory peer runs at")
    parser.add_argument("--every-max-ranks", type=int, default=1024,
                        help="largest R compared against a side b where every op diverges")
    parser.add_argument("--dir", help="where the synthetic records go (default: a temporary folder, removed after)")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "DIR_A", "DIR_B"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    ranks = sorted(int(r) for r in args.ranks.split(","))
    base = args.dir or tempfile.mkdtemp(prefix="ab-compare-scale-")
    try:
        started = time.perf_counter()
        for label in "ab":
            write_side(os.path.join(base, "full", label), label, ranks[-1], args.ops)
        every_max = max([r for r in ranks if r <= args.every_max_ranks], default=0)
        if every_max:
            write_side(os.path.join(base, "every", "b"), "b", every_max, args.ops, diverging="every")
        print(f"wrote {2 * ranks[-1]} rank files of {args.ops} ops in {time.perf_counter() - started:.0f} s "
              f"({sum(os.path.getsize(os.path.join(base, 'full', s, f)) for s in 'ab' for f in os.listdir(os.path.join(base, 'full', s))) / 2**30:.1f} GiB)",
              file=sys.stderr)
        rows = []
        for r in ranks:
            dirs = []
            for label in "ab":
                target = os.path.join(base, f"r{r}", label)
                if r == ranks[-1]:
                    target = os.path.join(base, "full", label)
                else:
                    subset(os.path.join(base, "full", label), target, r)
                dirs.append(target)
            # The largest side is b's last rank 10 ops short; smaller subsets have every op on both sides.
            stream = measure("streaming", *dirs)
            expected = {"backend": r, "divergent": r, "missing": 10 if r == ranks[-1] else 0}
            if {k: stream[k] for k in expected} != expected:
                raise SystemExit(f"the streaming comparison of {r} ranks found {stream}, expected {expected}")
            peer = measure("whole_job_in_memory", *dirs) if r <= args.peer_max_ranks else None
            every = None
            if r <= every_max:
                every_b = os.path.join(base, "every", "b") if r == every_max else os.path.join(base, f"r{r}", "every_b")
                if r != every_max:
                    subset(os.path.join(base, "every", "b"), every_b, r)
                every = measure("streaming", dirs[0], every_b)
                ops_b = r * args.ops - (10 if r == every_max else 0)
                if (every["divergent"], every["backend"]) != (ops_b, ops_b):
                    raise SystemExit(f"every op of {r} ranks should diverge, by the backend: found {every}")
            rows.append((r, stream, peer, every))
            print(f"  {r} ranks: streaming {stream['seconds']:.1f} s, {stream['peak_mib']:.0f} MiB"
                  + (f"; in memory {peer['seconds']:.1f} s, {peer['peak_mib']:.0f} MiB" if peer else "")
                  + (f"; every op divergent {every['seconds']:.1f} s, {every['peak_mib']:.0f} MiB" if every else ""),
                  file=sys.stderr)
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    first = rows[0][1]
    print(f"| ranks | ops per side | compare (s) | µs per op | peak RSS above start (MiB) | time vs {ranks[0]} ranks | "
          f"RSS vs {ranks[0]} ranks | in-memory peer (s) | peer peak RSS above start (MiB) | peer/streaming RSS | "
          "every op divergent (s) | its peak RSS above start (MiB) | its RSS vs one divergence per rank |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r, stream, peer, every in rows:
        per_op = stream["seconds"] / stream["compared"] * 1e6
        cells = [r, f"{r * args.ops:,}", f"{stream['seconds']:.1f}", f"{per_op:.1f}", f"{stream['peak_mib']:.0f}",
                 f"{stream['seconds'] / first['seconds']:.1f}", f"{stream['peak_mib'] / first['peak_mib']:.2f}"]
        cells += ([f"{peer['seconds']:.1f}", f"{peer['peak_mib']:.0f}", f"{peer['peak_mib'] / stream['peak_mib']:.1f}"]
                  if peer else ["(not run)", "", ""])
        cells += ([f"{every['seconds']:.1f}", f"{every['peak_mib']:.0f}", f"{every['peak_mib'] / stream['peak_mib']:.2f}"]
                  if every else ["(not run)", "", ""])
        print("| " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    main()
