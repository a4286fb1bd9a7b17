"""Mutation check of the nccl_migrate Python package: mutmut changes the code of one module at a
time (an operator, a constant, a condition, a dropped call...), runs that module's fast unit-level
tests against each change, and a change the tests still pass is a survivor: behaviour no test
watches. Run it on a change before it lands, or whole now and then:

    .venv/bin/python tools/mutate_py.py                      # every module in the mapping
    .venv/bin/python tools/mutate_py.py --changed [--base REV] # modules a change touched
    .venv/bin/python tools/mutate_py.py --module ab/progress   # one module (repeatable)

tools/mutation-py.toml maps each module to its tests (and, for a module whose other functions only
run once installed in a job, the functions to mutate); tools/mutation-equivalents.toml lists the
equivalent mutants (no test can tell them from the code) with the reason, and they leave the score.
Prints, per module: mutants, killed, equivalent, survived and score = killed / (mutants -
equivalent), then every survivor (file:line, the line before and after); --json prints the same
as JSON on stdout. Progress goes to stderr. Exit status: 0 when every module reached the target
(90%), 1 when one is below it, 2 on a usage error or a failed run, 130 when interrupted.

mutmut works on a copy: the package and the tests are copied into a temporary directory under
build/mutation-py/ (git-ignored), removed when the module is done, also on Ctrl-C or SIGTERM; a
run that is killed outright leaves only that directory. The working tree is never written.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "python", "nccl_migrate")
TESTS = os.path.join(ROOT, "tests", "python")
MAPPING = os.path.join(ROOT, "tools", "mutation-py.toml")
EQUIVALENTS = os.path.join(ROOT, "tools", "mutation-equivalents.toml")
SCRATCH = os.path.join(ROOT, "build", "mutation-py")
TARGET = 0.90

# mutmut's outcomes (mutmut/stats.py, status_by_exit_code): a timeout or a crash is a change the
# tests noticed; "no tests" means no selected test reaches the mutated function at all.
KILLED = {"killed", "timeout", "segfault"}
SURVIVED = {"survived", "no tests", "suspicious"}
NOT_RUN = {"not checked", "check was interrupted by user"}


# The mutmut runs in progress (modules run side by side, each from a thread of its own): an
# interrupted run ends each one's process group.
_LIVE: set[subprocess.Popen] = set()
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()


class UsageError(Exception):
    """Bad options or configuration: said on stderr, exit status 2."""


@dataclass
class Mutant:
    key: str  # mutmut's name for it, valid for this run only
    status: str
    function: str  # "Progress.paired", "failed_ranks.by_the_agent"
    line: int  # in the module's source file
    before: str  # the mutated line(s) as written, stripped
    after: str  # the same line(s) in the mutant, stripped
    reason: str | None = None  # why it is equivalent, from the equivalents file


@dataclass
class ModuleResult:
    name: str
    path: str
    mutants: list[Mutant] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    stale_equivalents: list[dict] = field(default_factory=list)

    def count(self, statuses) -> int:
        return sum(m.status in statuses and m.reason is None for m in self.mutants)

    @property
    def killed(self) -> int:
        return self.count(KILLED)

    @property
    def equivalent(self) -> list[Mutant]:
        return [m for m in self.mutants if m.reason is not None]

    @property
    def survivors(self) -> list[Mutant]:
        return [m for m in self.mutants if m.reason is None and m.status not in KILLED]

    @property
    def score(self) -> float | None:
        judged = len(self.mutants) - len(self.equivalent)
        return self.killed / judged if judged else None

    def passed(self) -> bool:
        return self.error is None and (self.score is None or self.score >= TARGET)


def say(text: str) -> None:
    print(f"mutate_py: {text}", file=sys.stderr, flush=True)


# --- configuration -------------------------------------------------------------------------------

def load_mapping() -> dict[str, dict]:
    with open(MAPPING, "rb") as f:
        modules = tomllib.load(f).get("modules", {})
    for name, entry in modules.items():
        if not os.path.isfile(source_of(name)):
            raise UsageError(f"{MAPPING}: module {name!r} has no file {os.path.relpath(source_of(name), ROOT)}")
        tests = entry.get("tests")
        if not tests or not all(isinstance(t, str) for t in tests):
            raise UsageError(f"{MAPPING}: module {name!r} needs `tests`, a list of test paths under tests/python/")
        for test in tests:
            if not os.path.exists(os.path.join(ROOT, test.split("::")[0])):
                raise UsageError(f"{MAPPING}: module {name!r} names {test!r}, which does not exist")
        functions = entry.get("functions")
        if functions is not None:
            if not functions or not all(isinstance(f, str) for f in functions):
                raise UsageError(f"{MAPPING}: module {name!r}: `functions` is a list of names such as "
                                 "\"Recorder.begin\" or \"shadow_backend\" (leave it out to mutate every function)")
            with open(source_of(name)) as f:
                known = function_spans(f.read())
            unknown = [f for f in functions if f not in known]
            if unknown:
                raise UsageError(f"{MAPPING}: module {name!r} names no function {', '.join(map(repr, unknown))} "
                                 f"of {os.path.relpath(source_of(name), ROOT)} under `functions`")
    return modules


def load_equivalents() -> list[dict]:
    if not os.path.exists(EQUIVALENTS):
        return []
    with open(EQUIVALENTS, "rb") as f:
        entries = tomllib.load(f).get("equivalent", [])
    for n, entry in enumerate(entries, 1):
        missing = [k for k in ("module", "function", "line", "mutant", "reason") if not entry.get(k)]
        if missing:
            raise UsageError(f"{EQUIVALENTS}: entry {n} lacks {', '.join(missing)}")
    return entries


def source_of(name: str) -> str:
    return os.path.join(PACKAGE, name + ".py")


def all_modules() -> list[str]:
    names = []
    for folder, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py") and f != "__init__.py" and f != "__main__.py":
                names.append(os.path.relpath(os.path.join(folder, f), PACKAGE)[:-3])
    return sorted(names)


def changed_files(base: str) -> set[str]:
    done = subprocess.run(["git", "diff", "--name-only", "--no-color", base, "--"], cwd=ROOT, text=True,
                          capture_output=True)
    if done.returncode != 0:
        raise UsageError(f"git diff against {base!r} failed: {done.stderr.strip()} (name a revision with --base)")
    untracked = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=ROOT, text=True,
                               capture_output=True).stdout
    return set(done.stdout.split()) | set(untracked.split())


def touched_modules(mapping: dict[str, dict], files: set[str]) -> list[str]:
    """A module is touched when its source changed, or one of its tests (a stronger test changes
    the score as surely as new code does)."""
    chosen = []
    for name, entry in mapping.items():
        mine = {os.path.relpath(source_of(name), ROOT)} | {t.split("::")[0] for t in entry["tests"]}
        if mine & files:
            chosen.append(name)
    return chosen


# --- one module under mutmut ----------------------------------------------------------------------

def prepare(name: str, entry: dict, work: str) -> None:
    """The copy mutmut works in: the package as `nccl_migrate/` (mutmut names a mutant after its
    file's path, which must be the module's import path), the tests, and mutmut's settings."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    shutil.copytree(PACKAGE, os.path.join(work, "nccl_migrate"), ignore=ignore, symlinks=True)
    shutil.copytree(TESTS, os.path.join(work, "tests", "python"), ignore=ignore, symlinks=True)
    # The tests' conftest.py asks tools/_tree_package.py where the package comes from: here the
    # copy's python/ does not exist, so the mutated package in the work directory is imported.
    # The harnesses (tests/gpu/, tests/faults/) are not copied: no mapped test imports them.
    os.makedirs(os.path.join(work, "tools"))
    shutil.copy(os.path.join(ROOT, "tools", "_tree_package.py"), os.path.join(work, "tools"))
    selection = list(entry["tests"]) + (["-k", entry["k"]] if entry.get("k") else [])
    settings = {
        "source_paths": ["nccl_migrate"],
        "only_mutate": [f"nccl_migrate/{name}.py"],
        "also_copy": ["tools"],  # into mutmut's own copy, beside the tests
        "pytest_add_cli_args_test_selection": selection,
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-p", "no:timeout"],
        "use_git_change_detection": False,
        # Each mutant's tests run in a process forked from a server that imported pytest and the
        # tests but never ran one: forked from mutmut's own process (which ran every test once
        # to see what reaches what), a mutant would inherit the state those runs left, such as a
        # thread pool whose thread did not survive the fork, and a wait on it would pass for a kill.
        "process_isolation": "forkserver",
        # A mutant that makes a test wait forever is ended after 5 times the tests' own time
        # plus 5 s (and counted as caught: the real test would hang too).
        "timeout_multiplier": 5.0,
        "timeout_constant": 1.0,
    }
    with open(os.path.join(work, "pyproject.toml"), "w") as f:
        f.write("[tool.mutmut]\n")
        for key, value in settings.items():
            f.write(f"{key} = {json.dumps(value)}\n")


# Run by the same interpreter inside the work directory once mutmut is done: each mutant's outcome
# and its diff, read through mutmut's own functions (its result files are its own business).
COLLECT = r"""
import json, sys
from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code
data = SourceFileMutationData(path=sys.argv[1])
data.load()
out = [{"key": k, "status": status_by_exit_code[v], "diff": get_diff_for_mutant(k, path=sys.argv[1])}
       for k, v in data.exit_code_by_key.items()]
json.dump(out, sys.stdout)
"""


def mutant_patterns(name: str, functions: list[str] | None) -> list[str]:
    """mutmut's names for the mutants of ``functions`` (all of the module's when None), as the
    globs `mutmut run` takes: "nccl_migrate.ab.recorder.xǁRecorderǁbegin__mutmut_*"."""
    if functions is None:
        return []
    module = "nccl_migrate." + name.replace("/", ".")
    patterns = []
    for function in functions:
        cls, _, method = function.rpartition(".")
        mangled = f"x{SEPARATOR}{cls}{SEPARATOR}{method}" if cls else f"x_{method}"
        patterns.append(f"{module}.{mangled}__mutmut_*")
    return patterns


def run_mutmut(name: str, work: str, jobs: int, log_path: str, patterns: list[str]) -> None:
    env = dict(os.environ)
    # A test that starts a Python subprocess gets the mutated copy too, not the working tree's. The
    # directory exists before mutmut starts: Python remembers a path entry that was missing at its
    # first import as one to skip, and would import the working tree's package instead.
    env["PYTHONPATH"] = os.path.join(work, "mutants")
    os.makedirs(env["PYTHONPATH"], exist_ok=True)
    env.pop("MUTANT_UNDER_TEST", None)
    with open(log_path, "w") as log:
        with _LIVE_LOCK:
            if _STOPPING.is_set():
                raise RuntimeError("interrupted before mutmut started")
            proc = subprocess.Popen([sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs), *patterns],
                                    cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            _LIVE.add(proc)
        watcher = threading.Thread(target=_report_progress, args=(name, work, proc), daemon=True)
        watcher.start()
        try:
            returncode = proc.wait()
        except BaseException:
            _end_group(proc)
            raise
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(proc)
    if _STOPPING.is_set():
        raise RuntimeError("interrupted")
    if returncode != 0:
        with open(log_path, errors="replace") as f:
            tail = "".join(f.readlines()[-25:])
        raise RuntimeError(f"mutmut exited with status {returncode}:\n{tail}")


def _end_group(proc: subprocess.Popen) -> None:
    """mutmut and its forked workers run in a session of their own: end them all."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _report_progress(name: str, work: str, proc: subprocess.Popen) -> None:
    """A line every 20 s with how many mutants have an outcome, read from mutmut's result file."""
    meta = os.path.join(work, "mutants", "nccl_migrate", name + ".py.meta")
    started = time.monotonic()
    next_line = started + 20
    while proc.poll() is None:
        time.sleep(1)
        if time.monotonic() < next_line:
            continue
        next_line += 20
        try:
            with open(meta) as f:
                codes = json.load(f)["exit_code_by_key"]
        except (OSError, ValueError, KeyError):
            continue
        done = sum(c is not None for c in codes.values())
        say(f"{name}: {done} of {len(codes)} mutants tried ({time.monotonic() - started:.0f} s)")


def collect(name: str, work: str) -> list[dict]:
    done = subprocess.run([sys.executable, "-c", COLLECT, f"nccl_migrate/{name}.py"], cwd=work, text=True,
                          capture_output=True)
    if done.returncode != 0:
        raise RuntimeError(f"reading mutmut's results failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


# --- naming each mutant stably ---------------------------------------------------------------------

SEPARATOR = "\u01c1"  # mutmut's class separator in mangled names: x<sep>Class<sep>method


def function_of(key: str) -> str:
    """mutmut's "nccl_migrate.ab.progress.xǁProgressǁpaired__mutmut_3" -> "Progress.paired"."""
    mangled = key.partition("__mutmut_")[0].rpartition(".")[2]
    if mangled.startswith("x" + SEPARATOR):
        cls, _, method = mangled[2:].partition(SEPARATOR)
        return f"{cls}.{method}"
    return mangled[2:]


def function_spans(source: str) -> dict[str, tuple[int, int]]:
    """Each function's and method's first and last line (decorators included), by qualified name."""
    spans = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                    spans.setdefault(name, (first, child.end_lineno))
                visit(child, name + ".")
    visit(ast.parse(source), "")
    return spans


def describe(raw: dict, source_lines: list[str], spans: dict[str, tuple[int, int]]) -> Mutant:
    """The mutant as a reader names it: its function, the changed line as written and as mutated,
    and that line's number in the source file."""
    function = function_of(raw["key"])
    removed, added, hunk_start = [], [], None
    for line in raw["diff"].splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            hunk_start = hunk_start or int(re.match(r"@@ -(\d+)", line).group(1))
        elif line.startswith("-"):
            removed.append(line[1:])
        elif line.startswith("+"):
            added.append(line[1:])
    number = 0
    first, last = spans.get(function, (1, len(source_lines)))
    if removed:
        # mutmut's diff shows the function on its own, a method dedented: lines match stripped.
        candidates = [n for n in range(first, last + 1) if source_lines[n - 1].strip() == removed[0].strip()]
        if candidates:
            # The diff's hunk starts up to 3 lines of context before the change, counted from the
            # function's first line: the candidate nearest that place is the one.
            guess = first + (hunk_start or 1) - 1 + 3
            number = min(candidates, key=lambda n: abs(n - guess))
    return Mutant(key=raw["key"], status=raw["status"], function=function, line=number,
                  before=" ".join(s.strip() for s in removed), after=" ".join(s.strip() for s in added))


def apply_equivalents(result: ModuleResult, equivalents: list[dict]) -> None:
    mine = [e for e in equivalents if e["module"] == result.name]
    used = set()
    for m in result.mutants:
        for n, e in enumerate(mine):
            if (e["function"], e["line"].strip(), e["mutant"].strip()) == (m.function, m.before, m.after):
                if m.status not in KILLED:
                    m.reason = e["reason"]
                used.add(n)
    # An entry that matches no mutant, or only killed ones, no longer describes the code.
    result.stale_equivalents = [e for n, e in enumerate(mine) if n not in used
                                or all(m.status in KILLED for m in result.mutants
                                       if (m.function, m.before, m.after) ==
                                       (e["function"], e["line"].strip(), e["mutant"].strip()))]


def check_module(name: str, entry: dict, jobs: int, equivalents: list[dict], keep: bool) -> ModuleResult:
    result = ModuleResult(name=name, path=os.path.relpath(source_of(name), ROOT))
    if _STOPPING.is_set():
        result.error = "interrupted before it started"
        return result
    started = time.monotonic()
    os.makedirs(SCRATCH, exist_ok=True)
    work = tempfile.mkdtemp(prefix=name.replace("/", ".") + "-", dir=SCRATCH)
    try:
        prepare(name, entry, work)
        say(f"{name}: mutating {result.path}"
            + (f" ({len(entry['functions'])} functions)" if entry.get("functions") else "")
            + f", testing with {' '.join(entry['tests'])}"
            + (f" -k {entry['k']!r}" if entry.get("k") else ""))
        functions = entry.get("functions")
        run_mutmut(name, work, jobs, os.path.join(work, "mutmut.log"), mutant_patterns(name, functions))
        with open(source_of(name)) as f:
            source = f.read()
        lines, spans = source.splitlines(), function_spans(source)
        mutants = (describe(raw, lines, spans) for raw in collect(name, work))
        result.mutants = sorted((m for m in mutants if functions is None or m.function in functions),
                                key=lambda m: (m.line, m.key))
        not_run = [m for m in result.mutants if m.status in NOT_RUN]
        if not_run:
            raise RuntimeError(f"{len(not_run)} mutants were never tried (e.g. {not_run[0].key})")
        apply_equivalents(result, equivalents)
    except RuntimeError as error:
        result.error = str(error)
    finally:
        result.seconds = time.monotonic() - started
        if keep:
            say(f"{name}: work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    score = "n/a" if result.score is None else f"{result.score:.0%}"
    say(f"{name}: {'FAILED' if result.error else score} in {result.seconds:.0f} s")
    return result


# --- output ------------------------------------------------------------------------------------------

def render(results: list[ModuleResult], unmapped: list[str]) -> str:
    header = f"{'module':<28} {'mutants':>7} {'killed':>6} {'equiv':>5} {'survived':>8} {'score':>6} {'time':>6}"
    out = [header, "-" * len(header)]
    for r in results:
        if r.error:
            out.append(f"{r.name:<28} run failed")
            continue
        score = "-" if r.score is None else f"{r.score:.0%}"
        flag = "" if r.passed() else "  < 90%"
        out.append(f"{r.name:<28} {len(r.mutants):>7} {r.killed:>6} {len(r.equivalent):>5} {len(r.survivors):>8} "
                   f"{score:>6} {r.seconds:>5.0f}s{flag}")
    for r in results:
        if r.error:
            out += ["", f"{r.name}: the run failed: {r.error}"]
        if r.survivors:
            out += ["", f"{r.name}: survivors"]
            for m in r.survivors:
                why = " (no selected test reaches this function)" if m.status == "no tests" else \
                    f" ({m.status})" if m.status != "survived" else ""
                out.append(f"  {r.path}:{m.line} in {m.function}: {m.before}  ->  {m.after}{why}")
        if r.equivalent:
            out += ["", f"{r.name}: equivalent (tools/mutation-equivalents.toml)"]
            for m in r.equivalent:
                out.append(f"  {r.path}:{m.line} in {m.function}: {m.before}  ->  {m.after}")
        for e in r.stale_equivalents:
            out.append(f"  stale equivalent entry (matches no surviving mutant): {e['function']}: {e['line']}"
                       f"  ->  {e['mutant']}")
    if unmapped:
        out += ["", "no fast unit-level tests mapped (tools/mutation-py.toml): " + ", ".join(unmapped)]
    return "\n".join(out)


def as_json(results: list[ModuleResult], unmapped: list[str]) -> str:
    return json.dumps({
        "target": TARGET,
        "modules": [{
            "module": r.name, "file": r.path, "error": r.error, "seconds": round(r.seconds, 1),
            "mutants": len(r.mutants), "killed": r.killed, "equivalent": len(r.equivalent),
            "survived": len(r.survivors), "score": r.score, "passed": r.passed(),
            "survivors": [{"line": m.line, "function": m.function, "before": m.before, "after": m.after,
                           "status": m.status} for m in r.survivors],
            "equivalents": [{"line": m.line, "function": m.function, "before": m.before, "after": m.after,
                             "reason": m.reason} for m in r.equivalent],
            "stale_equivalents": r.stale_equivalents,
        } for r in results],
        "unmapped": unmapped,
    }, indent=1)


# --- main ----------------------------------------------------------------------------------------------

def stop_on_signals() -> None:
    """SIGTERM and SIGHUP end the run as Ctrl-C does: mutmut's process group is ended and the
    work directory removed on the way out."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)


def choose(args: argparse.Namespace, mapping: dict[str, dict]) -> list[str]:
    if args.module:
        unknown = [m for m in args.module if m not in mapping]
        if unknown:
            raise UsageError(f"no module {', '.join(map(repr, unknown))} in {os.path.relpath(MAPPING, ROOT)}; "
                             f"known: {', '.join(mapping)}")
        return list(dict.fromkeys(args.module))
    if args.changed:
        return touched_modules(mapping, changed_files(args.base))
    return list(mapping)


def run_modules(names: list[str], mapping: dict[str, dict], args: argparse.Namespace,
                equivalents: list[dict]) -> list[ModuleResult] | None:
    """Each module checked, `args.modules_at_once` side by side, results in the mapping's order;
    None when interrupted (every mutmut run ended, every work directory removed)."""
    def one(k: int, name: str) -> ModuleResult:
        say(f"module {k} of {len(names)}: {name}")
        return check_module(name, mapping[name], args.jobs, equivalents, args.keep)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.modules_at_once)
    futures = [pool.submit(one, k, name) for k, name in enumerate(names, 1)]
    try:
        return [f.result() for f in futures]
    except KeyboardInterrupt:
        _STOPPING.set()
        with _LIVE_LOCK:
            for proc in list(_LIVE):
                _end_group(proc)
        return None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # each running module removes its directory


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--module", action="append", metavar="NAME",
                        help="only this module, e.g. ab/progress or launch (repeatable)")
    chosen.add_argument("--changed", action="store_true",
                        help="only the modules whose source or tests differ from --base (and untracked files)")
    parser.add_argument("--base", metavar="REV", help="with --changed: the revision to compare with (default HEAD)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    # Two modules at a time, two mutants each, on this 2-core machine: a module's start (copying,
    # torch's import, mutmut's first runs of its tests) is serial, and many tests wait on threads,
    # timers or child processes; a second module fills the cores meanwhile (tests/README.md has
    # the timings).
    parser.add_argument("--jobs", type=int, default=2, help="mutants of one module tested at once (default 2)")
    parser.add_argument("--modules-at-once", type=int, default=2, metavar="N",
                        help="modules checked side by side (default 2)")
    parser.add_argument("--keep", action="store_true", help="keep each module's work directory (for debugging)")
    args = parser.parse_args(argv)
    if args.base and not args.changed:
        parser.error("--base goes with --changed")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.modules_at_once < 1:
        parser.error("--modules-at-once must be at least 1")
    args.base = args.base or "HEAD"
    try:
        mapping = load_mapping()
        equivalents = load_equivalents()
        names = choose(args, mapping)
    except UsageError as error:
        print(f"mutate_py: {error}", file=sys.stderr)
        return 2
    if not any(f.startswith("_C") and f.endswith(".so") for f in os.listdir(PACKAGE)):
        print("mutate_py: the package's native module is not built (python/nccl_migrate/_C*.so); "
              "run tools/build.sh first", file=sys.stderr)
        return 2
    unmapped = [m for m in all_modules() if m not in mapping] if not (args.module or args.changed) else []
    if not names:
        say(f"no mapped module's source or tests changed since {args.base}")
    stop_on_signals()
    started = time.monotonic()
    results = run_modules(names, mapping, args, equivalents)
    if results is None:
        say("interrupted; work directories removed")
        return 130
    say(f"done in {time.monotonic() - started:.0f} s")
    print(as_json(results, unmapped) if args.json else render(results, unmapped))
    if any(r.error for r in results):
        return 2
    return 0 if all(r.passed() for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
