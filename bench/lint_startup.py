"""Start-up of `nccl-migrate lint` on an empty directory: the installed wheel's binary (Clang
linked in statically) against the in-tree build (shared libclang-cpp and libLLVM), runs
interleaved in the same process so both see the same machine load. Prints median and best wall
time per binary and the ratio.

    .venv/bin/python bench/lint_startup.py --a VENV/bin/nccl-migrate --b build/migrate/nccl-migrate
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time


def one_run(cli: str, empty: str) -> float:
    start = time.perf_counter()
    result = subprocess.run([cli, "lint", empty], capture_output=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{cli} lint {empty} exited {result.returncode}: {result.stderr.decode()[:300]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="first nccl-migrate binary (e.g. the wheel's)")
    parser.add_argument("--b", required=True, help="peer nccl-migrate binary (e.g. build/migrate/nccl-migrate)")
    parser.add_argument("--runs", type=int, default=30, help="runs per binary (default 30)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as empty:
        for cli in (args.a, args.b):
            one_run(cli, empty)  # page cache warm for both
        times = {args.a: [], args.b: []}
        for _ in range(args.runs):
            for cli in (args.a, args.b):
                times[cli].append(one_run(cli, empty))
    print(f"| binary | median ms | best ms |\n| --- | ---: | ---: |")
    for cli, t in times.items():
        print(f"| {cli} | {statistics.median(t) * 1e3:.1f} | {min(t) * 1e3:.1f} |")
    ratio = statistics.median(times[args.a]) / statistics.median(times[args.b])
    print(f"\nmedian a/b: {ratio:.2f}")


if __name__ == "__main__":
    main()
