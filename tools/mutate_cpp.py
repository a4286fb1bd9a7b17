"""Mutation check of a change's C++ lines: each operator or condition on a line the change added
to the linter (lint/) or the backends' engine and transport (backends/, shim/) is changed in
turn, the target's tests are built and run, and a mutant the tests still pass is a survivor: a
line whose new tests do not watch it. Run before a change lands, on what it touched:

    .venv/bin/python tools/mutate_cpp.py [--base REV] [--max N] [--timeout S] [--json FILE]

--base: the change's base (default: the merge base with origin/main, else HEAD~1); --max: at most
this many mutants, spread over the changed lines (default 40); --timeout: seconds per test run.
Headers are left out (a mutant there rebuilds most of its target). The build directory is build/
(tools/build.sh). Every file is put back after each mutant, also
on Ctrl-C. Prints a table per file (mutants, killed, survived, not built) and each survivor;
exit status 0 when every mutant that built was killed, 1 when any survived, 2 on a usage or
build error before the first mutant, 130 when interrupted (Ctrl-C, SIGTERM, SIGHUP: the file is
put back first). Comments, strings and character literals are never mutated.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")

# Which tests watch which sources: (source folder, ninja targets, test binaries under build/).
TARGETS = [
    ("lint/", ["lint_tests"], ["tests/lint/lint_tests"]),
    ("backends/", ["backends_tests", "sim_tests", "nccl_call_order_tests"],
     ["tests/backends/backends_tests", "tests/backends/sim_tests", "tests/backends/nccl_call_order_tests"]),
    ("shim/", ["shim_tests"], ["tests/shim/shim_tests"]),
]

# Operator and condition mutations, tried in this order on a line: (pattern, replacement, name).
# Each pattern stands alone as a token, so `<=` is not taken for `<` and `->` not for `>`.
MUTATIONS = [
    (r"(?<![=!<>])==(?!=)", "!=", "== to !="),
    (r"!=", "==", "!= to =="),
    # Relational operators stand between blanks (clang-format), template brackets never do.
    (r"(?<=\s)<=(?=\s)", "<", "<= to <"),
    (r"(?<=\s)>=(?=\s)", ">", ">= to >"),
    (r"(?<=\s)<(?=\s)", "<=", "< to <="),
    (r"(?<=\s)>(?=\s)", ">=", "> to >="),
    (r"&&", "||", "&& to ||"),
    (r"\|\|", "&&", "|| to &&"),
    (r"(?<![\w!])!(?=[\w(])", "", "drop !"),
    (r"\btrue\b", "false", "true to false"),
    (r"\bfalse\b", "true", "false to true"),
    (r"(?<=[^\w.])1(?=[^\w.])", "2", "1 to 2"),
    (r"(?<=[^\w.])0(?=[^\w.x])", "1", "0 to 1"),
    (r"\+\+", "--", "++ to --"),
    (r"(?<![+\w])\+ 1\b", "- 1", "+ 1 to - 1"),
    (r"(?<![-\w])- 1\b", "+ 1", "- 1 to + 1"),
]


@dataclass
class Mutant:
    path: str
    line: int
    name: str
    before: str
    after: str
    outcome: str = ""  # killed, survived, unbuilt, timeout
    detail: str = ""


@dataclass
class FileTally:
    mutants: int = 0
    killed: int = 0
    survived: int = 0
    unbuilt: int = 0
    survivors: list = field(default_factory=list)


def changed_lines(base: str) -> dict[str, list[int]]:
    """Added lines of the change, per C/C++ source under a watched folder."""
    diff = subprocess.run(["git", "diff", "--no-color", "--no-ext-diff", "-U0", base, "--", *[t[0] for t in TARGETS]], cwd=ROOT, text=True,
                          capture_output=True, check=True).stdout
    lines: dict[str, list[int]] = {}
    path = None
    for row in diff.splitlines():
        if row.startswith("+++ "):
            name = row[4:].removeprefix("b/")
            # Sources only: a header's mutant rebuilds most of its target for each try.
            path = name if re.search(r"\.(cc|cpp|cu)$", name) else None
        elif row.startswith("@@") and path:
            m = re.search(r"\+(\d+)(?:,(\d+))?", row)
            start, count = int(m.group(1)), int(m.group(2) or 1)
            lines.setdefault(path, []).extend(range(start, start + count))
    return lines


def masked(source: str) -> str:
    """The source with comments, string and character literals blanked (same length, line breaks
    kept), so that a mutation never lands in them and positions still map onto the source."""
    token = re.compile("|".join([
        r'R"([^(\s]*)\((?:.|\n)*?\)\1"',   # a raw string
        r"/\*(?:.|\n)*?\*/",                 # a block comment, over lines too
        r"//[^\n]*",                          # a line comment
        r'"(?:\\.|[^"\\\n])*"',               # a string
        r"'(?:\\.|[^'\\\n])+'",               # a character literal, escapes of any length
    ]))
    return token.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


def mutants_of(path: str, numbers: list[int]) -> list[Mutant]:
    with open(os.path.join(ROOT, path), newline="") as f:
        text = f.read()
    source = text.splitlines(keepends=True)
    code_lines = masked(text).splitlines(keepends=True)
    found = []
    for number in numbers:
        if number > len(source):
            continue
        line, code = source[number - 1], code_lines[number - 1]
        if not code.strip() or code.lstrip().startswith("#"):  # blank, all comment, or a preprocessor line
            continue
        for pattern, replacement, name in MUTATIONS:
            m = re.search(pattern, code)
            if m:
                found.append(Mutant(path, number, name, line, line[:m.start()] + replacement + line[m.end():]))
    return found


def spread(mutants: list[Mutant], most: int) -> list[Mutant]:
    """At most `most` mutants, one per line first, then more per line, in file order."""
    by_line: dict[tuple[str, int], list[Mutant]] = {}
    for m in mutants:
        by_line.setdefault((m.path, m.line), []).append(m)
    chosen, depth = [], 0
    while len(chosen) < most and any(len(v) > depth for v in by_line.values()):
        for v in by_line.values():
            if len(v) > depth and len(chosen) < most:
                chosen.append(v[depth])
        depth += 1
    return sorted(chosen, key=lambda m: (m.path, m.line))


def target_of(path: str):
    for folder, targets, binaries in TARGETS:
        if path.startswith(folder):
            return targets, binaries
    raise ValueError(path)


def build(targets: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(["cmake", "--build", BUILD, "--target", *targets], cwd=ROOT, text=True, capture_output=True)


def run_tests(binaries: list[str], timeout: float) -> tuple[str, str]:
    for binary in binaries:
        try:
            done = subprocess.run([os.path.join(BUILD, binary), "--gtest_brief=1"], cwd=ROOT, text=True,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "killed", f"{binary} ran past {timeout:.0f} s (a hang counts as caught)"
        if done.returncode != 0:
            failed = [line for line in done.stdout.splitlines() if line.startswith("[  FAILED  ]")]
            return "killed", (failed[0] if failed else f"{binary} exited {done.returncode}")
    return "survived", ""


def write_back(path: str, data: bytes) -> None:
    """Writes the whole file at once (a temporary file renamed over it), so that an interruption
    never leaves it half written."""
    temporary = path + ".mutate_cpp.tmp"
    with open(temporary, "wb") as f:
        f.write(data)
    os.replace(temporary, path)


def try_mutant(m: Mutant, timeout: float) -> None:
    full = os.path.join(ROOT, m.path)
    with open(full, "rb") as f:
        original = f.read()
    lines = original.decode().splitlines(keepends=True)
    lines[m.line - 1] = m.after
    targets, binaries = target_of(m.path)
    try:
        write_back(full, "".join(lines).encode())
        built = build(targets)
        if built.returncode != 0:
            m.outcome, m.detail = "unbuilt", "does not compile"
            return
        m.outcome, m.detail = run_tests(binaries, timeout)
    finally:
        write_back(full, original)  # byte for byte, line endings included


def stop_on_signals() -> None:
    """SIGTERM and SIGHUP (a CI timeout, a closed terminal) end the run as Ctrl-C does: through
    the `finally` that puts the mutated file back."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)


def default_base() -> str:
    for ref in (["git", "merge-base", "HEAD", "origin/main"], ["git", "rev-parse", "HEAD~1"]):
        done = subprocess.run(ref, cwd=ROOT, text=True, capture_output=True)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    return "HEAD"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=None, help="the change's base revision (default: merge base or HEAD~1)")
    parser.add_argument("--max", type=int, default=40, help="at most this many mutants (default 40)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per test binary run (default 300)")
    parser.add_argument("--json", help="also write every mutant and its outcome to this file")
    args = parser.parse_args(argv)
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        print("mutate_cpp: no build/ to mutate in; run tools/build.sh first", file=sys.stderr)
        return 2
    base = args.base or default_base()
    try:
        lines = changed_lines(base)
    except subprocess.CalledProcessError as error:
        print(f"mutate_cpp: git diff against {base} failed: {error.stderr.strip()}", file=sys.stderr)
        return 2
    mutants = spread([m for path, numbers in sorted(lines.items()) for m in mutants_of(path, numbers)], args.max)
    if not mutants:
        print(f"mutate_cpp: no C++ line of the change since {base[:12]} has an operator or condition to mutate")
        return 0
    for targets in {tuple(target_of(m.path)[0]) for m in mutants}:
        if build(list(targets)).returncode != 0:
            print(f"mutate_cpp: {', '.join(targets)} does not build before any mutation; fix the build first",
                  file=sys.stderr)
            return 2
    print(f"mutate_cpp: {len(mutants)} mutants on {len(lines)} changed files since {base[:12]}", file=sys.stderr)
    tallies: dict[str, FileTally] = {}
    started = time.monotonic()
    stop_on_signals()
    try:
        for k, m in enumerate(mutants, 1):
            run_one(k, m, mutants, tallies, started, args.timeout)
    finally:
        # Put back the build of the unmutated sources, so that build/ matches the tree again.
        for targets in {tuple(target_of(m.path)[0]) for m in mutants}:
            build(list(targets))
    report(tallies)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([m.__dict__ for m in mutants], f, indent=1)
    return 1 if any(t.survived for t in tallies.values()) else 0


def run_one(k: int, m: Mutant, mutants: list[Mutant], tallies: dict[str, FileTally], started: float,
            timeout: float) -> None:
    """Tries mutant `m` (number k) and counts its outcome."""
    try_mutant(m, timeout)
    t = tallies.setdefault(m.path, FileTally())
    t.mutants += 1
    if m.outcome == "killed":
        t.killed += 1
    elif m.outcome == "survived":
        t.survived += 1
        t.survivors.append(m)
    else:
        t.unbuilt += 1
    print(f"[{k}/{len(mutants)}, {time.monotonic() - started:.0f} s] {m.path}:{m.line} {m.name}: {m.outcome}",
          file=sys.stderr, flush=True)


def report(tallies: dict[str, FileTally]) -> None:
    print(f"{'file':<56} {'mutants':>7} {'killed':>6} {'survived':>8} {'unbuilt':>7} {'score':>6}")
    for path, t in sorted(tallies.items()):
        built = t.killed + t.survived
        score = f"{100 * t.killed / built:.0f}%" if built else "-"
        print(f"{path:<56} {t.mutants:>7} {t.killed:>6} {t.survived:>8} {t.unbuilt:>7} {score:>6}")
    killed = sum(t.killed for t in tallies.values())
    survived = sum(t.survived for t in tallies.values())
    total = killed + survived
    print(f"score: {killed} of {total} built mutants killed" + (f" ({100 * killed / total:.0f}%)" if total else ""))
    for t in tallies.values():
        for m in t.survivors:
            print(f"survived: {m.path}:{m.line} {m.name}\n  - {m.before.strip()}\n  + {m.after.strip()}")


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        print("mutate_cpp: interrupted; the mutated file is put back", file=sys.stderr)
        sys.exit(130)
