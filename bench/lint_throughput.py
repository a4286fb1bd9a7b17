"""Lint throughput on the installed torch package and Megatron-LM, against ruff and clang-tidy in the same run.

Python part, on up to three scopes: every .py/.pyi under torch/ (torch/include left out),
torch/distributed alone, where the prefilter lets through most of what it can (as in a training
stack), and a Megatron-LM checkout given with `--megatron PATH` (for instance
`git archive HEAD | tar -x -C /tmp/megatron` of github.com/NVIDIA/Megatron-LM; nothing is
downloaded here). `ruff check --isolated --select E711` (one rule, no cache, no configuration
file) against nccl-migrate with one rule (`--select NM201`) and in its default mode (every rule
that is on by default, the project-wide wrapper table included: it is built inside the timed run,
with environment resolution on: imports that leave the tree are resolved through python3 on PATH,
or the interpreter named by `--python`, which the table asks only when the tree calls an installed
name in a loop or many times), and the default mode with `--no-environment`, which shows what
environment resolution costs. C++ part: torch's C++ headers in
nccl-migrate's default mode (raw lexer, all rules) against clang-tidy-19 running one check
(`-checks=-*,bugprone-use-after-move`) on a sample of headers, extrapolated per file. Lines and
files per second, and the ratios peer time / nccl-migrate time (above 1: nccl-migrate is faster).
Each Python run is repeated (`--repeat`, interleaved so that all tools see the same machine) and
the fastest time is kept, and the least CPU time (user and system, all threads and processes): on a
machine that other work shares, CPU time says more than wall time. The default mode's target is
1.0x ruff on every scope, in wall time. Users get a Release build (the wheel's build type,
pyproject.toml); tools/build.sh's build/ is RelWithDebInfo: name a Release build's CLI with --cli
for figures that stand for theirs.

    .venv/bin/python bench/lint_throughput.py [--cli build/migrate/nccl-migrate] [--repeat 3] [--tidy-sample 12]
        [--python-only] [--megatron /tmp/megatron] [--python PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path


def files_under(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in suffixes and p.is_file())


def count_lines(files: list[Path]) -> int:
    return sum(p.read_bytes().count(b"\n") for p in files)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], ok=(0, 1)) -> tuple[float, float]:
    """Wall and CPU seconds of one run of `cmd`."""
    cpu = children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(cmd[:3])} ... exited {proc.returncode}: {proc.stderr.decode()[-400:]}")
    return elapsed, children_cpu() - cpu


def best_of(commands: dict[str, list[str]], repeat: int) -> dict[str, tuple[float, float]]:
    """The fastest of `repeat` runs of each command and the least CPU time, run in turn so that
    load from elsewhere on the machine falls on all of them alike."""
    best = {name: (float("inf"), float("inf")) for name in commands}
    for _ in range(repeat):
        for name, cmd in commands.items():
            wall, cpu = timed(cmd)
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


def row(name: str, files: int, lines: int, seconds: float, peer: float | None = None,
        cpu: float | None = None, peer_cpu: float | None = None) -> None:
    ratio = f"{peer / seconds:8.2f}x" if peer else f"{'':>9}"
    cpu_text = f"{cpu:8.3f}" if cpu is not None else f"{'':>8}"
    cpu_ratio = f"{peer_cpu / cpu:8.2f}x" if peer_cpu and cpu else f"{'':>9}"
    print(f"{name:<52} {files:>7} {lines:>9} {seconds:>8.3f} {files / seconds:>10.0f} {lines / seconds:>11.0f} {ratio}"
          f" {cpu_text} {cpu_ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_cli = next((c for c in ("build/migrate/nccl-migrate", "build-lint/migrate/nccl-migrate") if Path(c).exists()),
                       "build/migrate/nccl-migrate")
    parser.add_argument("--cli", default=default_cli)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each Python command; the fastest counts")
    parser.add_argument("--tidy-sample", type=int, default=12)
    parser.add_argument("--python-only", action="store_true", help="leave out the C++ part (clang-tidy takes minutes)")
    parser.add_argument("--megatron", type=Path, help="a Megatron-LM checkout to lint as a third scope")
    parser.add_argument("--python", help="the interpreter whose environment the default mode resolves imports through "
                                         "(nccl-migrate's --python; default: python3 on PATH)")
    args = parser.parse_args()
    if args.megatron and not (args.megatron / "megatron").is_dir():
        sys.exit(f"--megatron {args.megatron}: no megatron/ folder there; give the root of a Megatron-LM checkout")
    import torch  # only to find the installed tree

    root = Path(torch.__file__).parent
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    tidy = shutil.which("clang-tidy-19") or "/usr/lib/llvm-19/bin/clang-tidy"
    include = root / "include"
    cpp_files = files_under(include, (".h", ".hpp", ".cuh"))
    cpp_lines = count_lines(cpp_files)
    print(f"torch tree: {root}")
    if args.megatron:
        print(f"Megatron-LM tree: {args.megatron}")
    interpreter = args.python or shutil.which("python3") or "python3 (not on PATH)"
    print(f"environment resolution (default mode) through: {interpreter}")
    print(f"{'run':<52} {'files':>7} {'lines':>9} {'seconds':>8} {'files/s':>10} {'lines/s':>11} {'vs peer':>9}"
          f" {'cpu s':>8} {'cpu vs peer':>9}")

    verdicts = []
    scopes = [("torch", root), ("torch/distributed", root / "distributed")]
    if args.megatron:
        scopes.append(("Megatron-LM", args.megatron))
    python = ["--python", args.python] if args.python else []
    for scope, path in scopes:
        py_files = [p for p in files_under(path, (".py", ".pyi")) if include not in p.parents]
        py_lines = count_lines(py_files)
        runs = best_of(
            {
                "ruff": [ruff, "check", "--isolated", "--no-cache", "--select", "E711", "--exit-zero", "--quiet", str(path)],
                "single": [args.cli, "lint", "--select", "NM201", "--exclude", "include", str(path)],
                "default": [args.cli, "lint", *python, "--exclude", "include", str(path)],
                "noenv": [args.cli, "lint", "--no-environment", "--exclude", "include", str(path)],
            },
            args.repeat,
        )
        (ruff_s, ruff_cpu) = runs["ruff"]
        row(f"{scope}: ruff check --select E711 (peer)", len(py_files), py_lines, ruff_s, cpu=ruff_cpu)
        for name, label in (("single", "--select NM201 (one rule)"), ("default", "default mode"),
                            ("noenv", "default, --no-environment")):
            row(f"{scope}: nccl-migrate {label}", len(py_files), py_lines, runs[name][0], ruff_s, runs[name][1], ruff_cpu)
        ratio = ruff_s / runs["default"][0]
        verdicts.append(f"Python, {scope}, default mode (environment on) vs ruff --select E711: {ratio:.2f}x wall "
                        f"({'meets' if ratio >= 1.0 else 'BELOW'} the 1.00x target), "
                        f"{ruff_cpu / runs['default'][1]:.2f}x CPU")

    if args.python_only:
        print(f"load average (1, 5, 15 min) at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for verdict in verdicts:
            print(verdict)
        return
    sample = cpp_files[:: max(1, len(cpp_files) // args.tidy_sample)][: args.tidy_sample]
    flags = ["--", "-x", "c++", "-std=c++17", f"-I{include}", f"-I{include}/torch/csrc/api/include"]
    tidy_s = 0.0
    for header in sample:
        tidy_s += timed([tidy, "--quiet", "-checks=-*,bugprone-use-after-move", str(header)] + flags, ok=(0, 1))[0]
    tidy_per_file = tidy_s / len(sample)
    tidy_lines = count_lines(sample)
    row(f"clang-tidy-19, 1 check, {len(sample)} headers (peer)", len(sample), tidy_lines, tidy_s)
    nm_cpp = timed([args.cli, "lint", str(include)])[0]
    # Same per-file basis: clang-tidy's time for the whole header set, extrapolated from its sample.
    row("nccl-migrate lint torch/include (lexer)", len(cpp_files), cpp_lines, nm_cpp, tidy_per_file * len(cpp_files))
    print("ratios: peer time / nccl-migrate time for the same files (clang-tidy extrapolated per file)")
    print(f"load average (1, 5, 15 min) at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for verdict in verdicts:
        print(verdict)


if __name__ == "__main__":
    main()
