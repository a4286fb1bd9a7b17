"""Start-up of `nccl-migrate lint`: the installed wheel's binary (Clang linked statically into
its C/C++ frontend module) against the in-tree build (the module links the shared libclang-cpp
and libLLVM), on an empty directory (no module loaded) and on one small C++ file (the module
loaded). Runs interleaved in the same process, so both binaries see the same machine load.
Prints median and best wall time per binary and case, and the ratios.

    .venv/bin/python bench/lint_startup.py --a VENV/bin/nccl-migrate --b build/migrate/nccl-migrate
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

# A C++ file with nothing to find: the run loads the module, lexes and scans.
CPP_SOURCE = "#include <vector>\nint main() { std::vector<int> v(3); return static_cast<int>(v.size()); }\n"


def one_run(cli: str, target: str) -> float:
    start = time.perf_counter()
    result = subprocess.run([cli, "lint", target], capture_output=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{cli} lint {target} exited {result.returncode}: {result.stderr.decode()[:300]}")
    return elapsed


def measure(clis: list[str], target: str, runs: int) -> dict[str, list[float]]:
    for cli in clis:
        one_run(cli, target)  # page cache warm for both
    times = {cli: [] for cli in clis}
    for _ in range(runs):
        for cli in clis:
            times[cli].append(one_run(cli, target))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="first nccl-migrate binary (e.g. the wheel's)")
    parser.add_argument("--b", required=True, help="peer nccl-migrate binary (e.g. build/migrate/nccl-migrate)")
    parser.add_argument("--runs", type=int, default=30, help="runs per binary and case (default 30)")
    args = parser.parse_args()
    clis = [args.a, args.b]
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as with_cpp:
        with open(os.path.join(with_cpp, "main.cc"), "w") as f:
            f.write(CPP_SOURCE)
        cases = {"empty directory": measure(clis, empty, args.runs),
                 "one C++ file": measure(clis, with_cpp, args.runs)}
    print("| case | binary | median ms | best ms |\n| --- | --- | ---: | ---: |")
    for case, times in cases.items():
        for cli, t in times.items():
            print(f"| {case} | {cli} | {statistics.median(t) * 1e3:.1f} | {min(t) * 1e3:.1f} |")
    print()
    for case, times in cases.items():
        print(f"{case}: median a/b {statistics.median(times[args.a]) / statistics.median(times[args.b]):.2f}")


if __name__ == "__main__":
    main()
