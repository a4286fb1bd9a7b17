#!/usr/bin/env python3
"""Acceptance check of `nccl-migrate lint --fix --unsafe-fixes` on a real tree, touching nothing
of it: the tree is copied to a temporary folder, fixed there, and every fixed file is checked.

    tools/lint_fix_acceptance.py [--cli PATH] [--json FILE] TREE [TREE...]

Checks, each failure named file:line:
  compiles      a fixed Python file compiles (py_compile); a fixed C/C++/CUDA file compiles
                against each torch's headers where its original did (c++ -fsyntax-only)
  applied       the CLI applied every fix it found, with no warning
  idempotent    a second `--fix --unsafe-fixes` changes nothing
  untouched     the file differs from the original only where a fix edits it (the finding's
                edits, the helper a fix inserts)
  line-length   no line a fix wrote is longer than the file's line length: its ruff, black or
                flake8 configuration, nearest folder first, else 88 (docs/lint.md, Line length)
  ruff-format   `ruff format` (at that line length) writes the lines a fix wrote as they are;
                lines whose original ruff would change too are reported as not checked
  torch         each rewritten check gives the right answer on every torch given (--python):
                `_is_nccl_backend(x, extra)` is true for torch's ProcessGroupNCCL, ProcessGroupNCCL2
                and ProcessGroupNCCLLazy where torch has them and for a backend whose name() is
                nccl, nccl2 or nccl-lazy, false for Gloo and other objects unless of `extra`;
                `name in ("nccl", "nccl2", "nccl-lazy")` holds for those three names alone

Exit 0 when every check passed, 1 when one failed, 2 on bad usage (a missing tree, CLI or torch).
"""

import argparse
import dataclasses
import difflib
import json
import os
import py_compile
import re
import shutil
import subprocess
import sys
import tempfile

import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CLI = os.environ.get("NCCL_MIGRATE_LINT_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))
DEFAULT_PYTHONS = {
    "torch 2.15 (.venv)": os.path.join(ROOT, ".venv", "bin", "python"),
    "torch 2.11 (.venv-torch211)": os.path.join(ROOT, ".venv-torch211", "bin", "python"),
}
PYTHON_SUFFIXES = (".py", ".pyi")
CPP_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh")
# The files that set a Python project's line length, in the order the fixes read them.
LINE_LENGTH_FILES = (".ruff.toml", "ruff.toml", "pyproject.toml", "setup.cfg", "tox.ini", ".flake8")
DEFAULT_LINE_LENGTH = 88  # ruff's and black's
HELPER_PREFIXES = ("_is_nccl_backend", "asNcclBackend")
NCCL_NAMES = ("nccl", "nccl2", "nccl-lazy")


class UsageError(Exception):
    pass


@dataclasses.dataclass
class Failure:
    check: str
    path: str
    line: int
    what: str

    def __str__(self):
        return f"{self.path}:{self.line}: [{self.check}] {self.what}"


@dataclasses.dataclass
class TreeResult:
    tree: str
    files_scanned: int = 0
    findings_with_fixes: int = 0
    fixes_applied: int = 0
    files_fixed: list = dataclasses.field(default_factory=list)
    checks_passed: dict = dataclasses.field(default_factory=dict)
    failures: list = dataclasses.field(default_factory=list)
    not_checked: list = dataclasses.field(default_factory=list)

    def passed(self, check, count=1):
        self.checks_passed[check] = self.checks_passed.get(check, 0) + count

    def fail(self, check, path, line, what):
        failure = Failure(check, path, line, what)
        self.failures.append(failure)
        progress(f"FAIL {failure}")


def progress(message):
    print(f"[lint-fix-acceptance] {message}", file=sys.stderr, flush=True)


# --- the project's line length, as docs/lint.md's "Line length" states the fixes read it ---------


def _toml_line_length(path, pyproject):
    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return None
    # ruff takes the nearest file that configures it, with its default where that file sets none.
    if not pyproject:
        return _positive(table.get("line-length")) or DEFAULT_LINE_LENGTH
    tool = table.get("tool", {})
    if isinstance(tool.get("ruff"), dict):
        return _positive(tool["ruff"].get("line-length")) or DEFAULT_LINE_LENGTH
    black = tool.get("black", {})
    return _positive(black.get("line-length")) or _positive(black.get("line_length"))


def _positive(value):
    return value if isinstance(value, int) and 0 < value <= 100000 else None


def _flake8_line_length(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    section = False
    for line in lines:
        text = line.strip()
        if text.startswith("["):
            section = text == "[flake8]"
            continue
        key, sep, value = text.partition("=") if "=" in text else text.partition(":")
        if section and sep and key.strip() in ("max-line-length", "max_line_length"):
            try:
                return _positive(int(value.strip()))
            except ValueError:
                return None
    return None


def line_length(path):
    """(length, where it came from) for the Python file at `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    while True:
        for name in LINE_LENGTH_FILES:
            candidate = os.path.join(folder, name)
            if not os.path.isfile(candidate):
                continue
            if name.endswith(".toml"):
                found = _toml_line_length(candidate, name == "pyproject.toml")
            else:
                found = _flake8_line_length(candidate)
            if found:
                return found, candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return DEFAULT_LINE_LENGTH, "the default"
        folder = parent


# --- the copy ------------------------------------------------------------------------------------


def copy_tree(tree, scratch):
    """The tree copied under `scratch` at its own absolute path, with the line-length files of the
    folders above it, so that the fixes and ruff read the configuration they read in place."""
    tree = os.path.abspath(tree)
    mirror = os.path.join(scratch, tree.lstrip(os.sep))
    shutil.copytree(tree, mirror, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    folder = os.path.dirname(tree)
    while True:
        for name in LINE_LENGTH_FILES:
            if os.path.isfile(os.path.join(folder, name)):
                target = os.path.join(scratch, folder.lstrip(os.sep))
                os.makedirs(target, exist_ok=True)
                shutil.copy2(os.path.join(folder, name), target)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return mirror


def read_tree(root):
    texts = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                continue
            with open(path, "rb") as f:
                texts[os.path.relpath(path, root)] = f.read()
    return texts


# --- the CLI -------------------------------------------------------------------------------------


def run_cli(cli, *args):
    done = subprocess.run([cli, "lint", *args], capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode not in (0, 1):
        raise UsageError(f"{cli} lint {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return done


def findings_with_fixes(cli, root):
    done = run_cli(cli, "--unsafe-fixes", "--format", "json", root)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError as e:
        raise UsageError(f"{cli} lint --format json printed no JSON ({e}): {done.stderr[-2000:]}") from e
    fixes = {}
    for finding in report["findings"]:
        if finding.get("fix"):
            path = os.path.relpath(os.path.join(root, finding["path"]) if not os.path.isabs(finding["path"])
                                   else finding["path"], root)
            fixes.setdefault(path, []).append(finding)
    return report.get("files_scanned", 0), fixes


def fixes_applied(stderr):
    match = re.search(r"Fixed (\d+) finding", stderr)
    return int(match.group(1)) if match else 0


# --- the checks ----------------------------------------------------------------------------------


def line_of(text, offset):
    return text.count(b"\n", 0, max(0, offset)) + 1


def hunks(before, after):
    """(i1, i2, j1, j2) of each changed region, in lines of `before` and `after`."""
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _unnamed(line):
    """A line with the helper's name, whichever free name the fix gave it, written one way."""
    return re.sub(r"\b(_is_nccl_backend|asNcclBackend)(_?\d+)?\b", "HELPER", line)


def without_helpers(lines, helpers):
    """The indices of `lines` that are not part of an inserted helper (any of `helpers`' texts),
    and where each helper was taken out (as an index into those kept lines)."""
    drop, cuts = set(), set()
    for helper in helpers:
        body = [_unnamed(line) for line in helper.splitlines()]
        body = body[next((k for k, line in enumerate(body) if line.strip()), 0):]
        for k in range(len(lines) - len(body) + 1):
            if body and all(_unnamed(lines[k + n]) == line for n, line in enumerate(body)):
                drop.update(range(k, k + len(body)))
                cuts.add(k)
    kept = [k for k in range(len(lines)) if k not in drop]
    return kept, {sum(1 for k in kept if k < cut) for cut in cuts}


def check_untouched(result, rel, original, fixed, findings):
    """Every changed region holds a finding's edit; besides, only the helper a fix defines and
    the blank lines around it are new."""
    edited = set()
    helpers = []
    for finding in findings:
        for edit in finding["fix"]["edits"]:
            if edit["begin_offset"] < 0:
                helpers.append(edit["replacement"])
                continue
            first = line_of(original, edit["begin_offset"])
            last = line_of(original, max(edit["begin_offset"], edit["end_offset"] - 1))
            edited.update(range(first, last + 1))
    before, after = original.decode(errors="replace").splitlines(), fixed.decode(errors="replace").splitlines()
    kept, cuts = without_helpers(after, helpers)
    ok = True
    for i1, i2, j1, j2 in hunks(before, [after[k] for k in kept]):
        if edited & set(range(i1 + 1, i2 + 1)):
            continue
        blank = not "".join(before[i1:i2]).strip() and not "".join(after[kept[j]] for j in range(j1, j2)).strip()
        if blank and any(j1 <= cut <= j2 for cut in cuts):
            continue  # the blank lines around an inserted helper
        ok = False
        written = [j for j in range(j1, j2) if after[kept[j]].strip()] or list(range(j1, j2))
        line = kept[written[0]] + 1 if written else (kept[j1] + 1 if j1 < len(kept) else len(after))
        shown = [after[kept[j]] for j in written][:2] or [f"removed: {x}" for x in before[i1:i2][:2]]
        result.fail("untouched", rel, line, f"changed where no fix edits: {shown}")
    if ok:
        result.passed("untouched")


def ruff_format(ruff, path, text, length):
    done = subprocess.run([ruff, "format", "--no-cache", "--line-length", str(length), "--stdin-filename", path, "-"],
                          input=text, capture_output=True, text=True, timeout=120, check=False)
    return done.stdout if done.returncode == 0 else None


def lines_ruff_keeps(lines, formatted):
    """The indices of `lines` that ruff writes as they are."""
    kept = set()
    matcher = difflib.SequenceMatcher(None, lines, formatted, autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag == "equal":
            kept.update(range(i1, i2))
    return kept


def check_python_layout(result, rel, path, original, fixed, ruff):
    length, source = line_length(path)
    before, after = original.decode(errors="replace").splitlines(), fixed.decode(errors="replace").splitlines()
    changed = hunks(before, after)
    long_lines = [(j, line) for _, _, j1, j2 in changed for j, line in enumerate(after[j1:j2], j1) if len(line) > length]
    for j, line in long_lines:
        result.fail("line-length", rel, j + 1, f"{len(line)} columns, over the line length {length} ({source})")
    if not long_lines:
        result.passed("line-length")
    if ruff is None:
        result.not_checked.append(f"{rel}: ruff-format (no ruff found; pass --ruff)")
        return
    formatted_after = ruff_format(ruff, path, fixed.decode(errors="replace"), length)
    formatted_before = ruff_format(ruff, path, original.decode(errors="replace"), length)
    if formatted_after is None:
        result.fail("ruff-format", rel, 1, "ruff format cannot read the fixed file")
        return
    kept_after = lines_ruff_keeps(after, formatted_after.splitlines())
    kept_before = lines_ruff_keeps(before, (formatted_before or "").splitlines())
    ok = True
    for i1, i2, j1, j2 in changed:
        moved = [j for j in range(j1, j2) if j not in kept_after]
        if not moved:
            continue
        if any(i not in kept_before for i in range(i1, i2)):
            result.not_checked.append(f"{rel}:{j1 + 1}: ruff-format (ruff rewrites the original lines too)")
            continue
        ok = False
        want = difflib.get_close_matches(after[moved[0]], formatted_after.splitlines(), n=1, cutoff=0.0)
        result.fail("ruff-format", rel, moved[0] + 1,
                    f"ruff format writes this fixed line otherwise: {after[moved[0]].strip()!r}"
                    + (f" (ruff: {want[0].strip()!r})" if want else ""))
    if ok:
        result.passed("ruff-format")


# Run under each torch: the file's helpers and rewritten checks on stand-ins for every backend.
TORCH_PROBE = r'''
import ast, json, sys
from unittest import mock
import torch
import torch.distributed as dist
c10d = torch._C._distributed_c10d
NAMES = ("nccl", "nccl2", "nccl-lazy")

def named(name):
    backend = mock.Mock(spec=c10d.Backend)
    backend.name.return_value = name
    return backend

nccl = {"torch ProcessGroupNCCL": mock.Mock(spec=dist.ProcessGroupNCCL)}
for cls in ("ProcessGroupNCCL2", "ProcessGroupNCCLLazy"):
    if hasattr(c10d, cls):
        nccl[f"torch {cls}"] = mock.Mock(spec=getattr(c10d, cls))
for name in NAMES:
    nccl[f"backend named {name}"] = named(name)
gloo = mock.Mock(spec=dist.ProcessGroupGloo)
gloo.name.return_value = "gloo"
other = {"torch ProcessGroupGloo": gloo, "backend named gloo": named("gloo"), "not a backend": object()}

out = {"torch": torch.__version__, "wrong": [], "checked": 0, "skipped": []}
for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    space = {"__name__": "fixed_module"}
    for node in tree.body:  # the module's imports, where they import here, then its helpers
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not (
                isinstance(node, ast.ImportFrom) and (node.level or node.module == "__future__")):
            try:
                exec(compile(ast.Module([node], []), path, "exec"), space)
            except Exception:
                pass
    helpers = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_is_nccl_backend")]
    for node in helpers:
        exec(compile(ast.Module([node], []), path, "exec"), space)
    names = {n.name for n in helpers}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names and node.args:
            extra = node.args[1] if len(node.args) > 1 else None
            try:
                classes = eval(compile(ast.Expression(extra), path, "eval"), space) if extra else ()
            except Exception as e:
                out["skipped"].append(f"{path}:{node.lineno}: its classes do not evaluate here ({type(e).__name__}: {e})")
                continue
            check = space[node.func.id]
            for kind, obj in {**nccl, **other}.items():
                want = kind in nccl or isinstance(obj, classes)
                got = bool(check(obj, classes) if extra else check(obj))
                if got != want:
                    out["wrong"].append({"path": path, "line": node.lineno, "kind": kind, "got": got, "want": want})
            out["checked"] += 1
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            right = node.comparators[0]
            try:
                values = ast.literal_eval(right)
            except ValueError:
                continue
            if not (isinstance(values, tuple) and set(values) >= {"nccl", "nccl2"}):
                continue
            space_compare = {"__value": None}
            expr = ast.Expression(ast.Compare(ast.Name("__value", ast.Load()), node.ops, [right]))
            compiled = compile(ast.fix_missing_locations(expr), path, "eval")
            for name in NAMES + ("gloo", "cpu:gloo", "ucc", "nccl-legacy"):
                want = (name in NAMES) == isinstance(node.ops[0], ast.In)
                got = eval(compiled, {"__value": name})
                if got != want:
                    out["wrong"].append({"path": path, "line": node.lineno, "kind": f"name {name!r}", "got": got,
                                         "want": want})
            out["checked"] += 1
print(json.dumps(out))
'''


def check_torch(result, fixed_python, root, pythons):
    if not fixed_python:
        return
    if not pythons:
        result.not_checked.append("torch: the fixed checks were not run (--no-torch)")
    for label, python in pythons.items():
        done = subprocess.run([python, "-c", TORCH_PROBE, *[os.path.join(root, rel) for rel in fixed_python]],
                              capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            result.fail("torch", fixed_python[0], 1, f"{label}: the probe failed: {done.stderr.strip()[-1500:]}")
            continue
        report = json.loads(done.stdout.strip().splitlines()[-1])
        for wrong in report["wrong"]:
            result.fail("torch", os.path.relpath(wrong["path"], root), wrong["line"],
                        f"torch {report['torch']}: the fixed check gives {wrong['got']} for {wrong['kind']}, "
                        f"want {wrong['want']}")
        result.not_checked += [f"torch {report['torch']}: {s}" for s in report["skipped"]]
        if not report["wrong"]:
            result.passed("torch", report["checked"])
        progress(f"{label}: torch {report['torch']}: {report['checked']} fixed checks run, "
                 f"{len(report['wrong'])} wrong")


def torch_includes(python):
    script = "import json, torch.utils.cpp_extension as e; print(json.dumps(e.include_paths()))"
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        return None
    include = json.loads(done.stdout.strip().splitlines()[-1])
    site = os.path.dirname(os.path.dirname(include[0]))
    nvidia = os.path.join(site, "nvidia")
    extra = sorted(os.path.join(nvidia, d, "include") for d in os.listdir(nvidia)) if os.path.isdir(nvidia) else []
    return include + [d for d in extra if os.path.isdir(d)] + [d for d in ("/usr/local/cuda/include",) if os.path.isdir(d)]


def compiles(path, includes):
    # As tests/python/lint/test_lint_fixed_cpp_compiles.py compiles fixed C++: torch's own flags.
    done = subprocess.run(["c++", "-fsyntax-only", "-std=c++20", "-DUSE_C10D_NCCL", "-w", "-x", "c++",
                           *[f"-I{d}" for d in includes], path], capture_output=True, text=True, timeout=600, check=False)
    return done.returncode == 0, done.stderr


def check_cpp(result, rel, path, original, pythons, scratch):
    if not pythons:
        result.not_checked.append(f"{rel}: compiles (no torch headers with --no-torch)")
    for label, python in pythons.items():
        includes = torch_includes(python)
        if includes is None:
            result.fail("compiles", rel, 1, f"{label}: {python} has no torch to compile against")
            continue
        before = os.path.join(scratch, "original" + os.path.splitext(path)[1])
        with open(before, "wb") as f:
            f.write(original)
        if not compiles(before, includes)[0]:
            result.not_checked.append(f"{rel}: compiles with {label} (the original does not compile alone)")
            continue
        ok, errors = compiles(path, includes)
        if ok:
            result.passed("compiles")
            continue
        where = re.search(r":(\d+):\d+: error: (.*)", errors)
        result.fail("compiles", rel, int(where.group(1)) if where else 1,
                    f"{label}: does not compile: {where.group(2) if where else errors.strip()[-500:]}")


def accept_tree(tree, cli, ruff, pythons, scratch):
    result = TreeResult(tree)
    root = copy_tree(tree, scratch)
    originals = read_tree(root)
    progress(f"{tree}: {len(originals)} files copied to {root}")
    result.files_scanned, fixes = findings_with_fixes(cli, root)
    result.findings_with_fixes = sum(len(f) for f in fixes.values())
    progress(f"{tree}: {result.files_scanned} files scanned, {result.findings_with_fixes} findings with a fix "
             f"in {len(fixes)} files")
    done = run_cli(cli, "--fix", "--unsafe-fixes", root)
    result.fixes_applied = fixes_applied(done.stderr)
    for warning in re.findall(r"warning: (.*fixes not applied.*)", done.stderr):
        result.fail("applied", os.path.relpath(warning.split(":")[0], root), 1, warning)
    fixed = read_tree(root)
    result.files_fixed = sorted(rel for rel, text in fixed.items() if originals.get(rel) != text)
    progress(f"{tree}: {result.fixes_applied} fixes applied to {len(result.files_fixed)} files")
    if result.fixes_applied < result.findings_with_fixes:
        result.not_checked.append(f"{result.findings_with_fixes - result.fixes_applied} findings' fixes were "
                                  "not applied (a fix shared by two findings counts once)")
    for rel in sorted(set(fixes) - set(result.files_fixed)):
        result.fail("applied", rel, fixes[rel][0]["line"], "the CLI offered a fix here, and --fix left the file as it was")
    done = run_cli(cli, "--fix", "--unsafe-fixes", root)
    again = read_tree(root)
    changed_again = sorted(rel for rel in again if again[rel] != fixed.get(rel))
    for rel in changed_again:
        first = hunks(fixed[rel].decode(errors="replace").splitlines(), again[rel].decode(errors="replace").splitlines())
        result.fail("idempotent", rel, first[0][2] + 1 if first else 1, "a second --fix --unsafe-fixes changed it")
    if not changed_again:
        result.passed("idempotent")
    for rel in result.files_fixed:
        path = os.path.join(root, rel)
        if rel not in originals:
            result.fail("untouched", rel, 1, "--fix created this file")
            continue
        check_untouched(result, rel, originals[rel], fixed[rel], fixes.get(rel, []))
        if rel.endswith(PYTHON_SUFFIXES):
            try:
                with tempfile.NamedTemporaryFile(dir=scratch, suffix=".py", delete=False) as f:
                    f.write(fixed[rel])
                py_compile.compile(f.name, cfile=f.name + "c", doraise=True)
                result.passed("compiles")
            except py_compile.PyCompileError as e:
                error = e.exc_value
                result.fail("compiles", rel, getattr(error, "lineno", 1) or 1, f"does not compile: {e.exc_type_name}: "
                            f"{getattr(error, 'msg', error)}")
            check_python_layout(result, rel, path, originals[rel], fixed[rel], ruff)
        elif rel.endswith(CPP_SUFFIXES):
            check_cpp(result, rel, path, originals[rel], pythons, scratch)
    check_torch(result, [rel for rel in result.files_fixed if rel.endswith(PYTHON_SUFFIXES)], root, pythons)
    return result


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="lint_fix_acceptance.py",
        description=__doc__.split("\n\n")[0],
        epilog="\n".join(__doc__.split("\n\n")[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("trees", nargs="+", metavar="TREE", help="a folder to copy, fix and check (left as it is)")
    parser.add_argument("--cli", default=DEFAULT_CLI,
                        help="the nccl-migrate executable that fixes (default: %(default)s, or $NCCL_MIGRATE_LINT_CLI)")
    parser.add_argument("--ruff", default=shutil.which("ruff", path=os.path.join(ROOT, ".venv", "bin"))
                        or shutil.which("ruff"), help="the ruff executable (default: the .venv's, else PATH's)")
    parser.add_argument("--python", action="append", metavar="PYTHON", dest="pythons",
                        help="an interpreter with torch to run the fixed checks under (repeatable; default: "
                             + " and ".join(DEFAULT_PYTHONS.values()) + ")")
    parser.add_argument("--no-torch", action="store_true",
                        help="leave the fixed checks unrun (reported as not checked): for a machine without torch")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE ('-': stdout)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and print where it is")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        for tree in args.trees:
            if not os.path.isdir(tree):
                raise UsageError(f"{tree} is not a folder: give the tree to check (it is copied, never changed)")
        if not os.access(args.cli, os.X_OK):
            raise UsageError(f"{args.cli} is not an executable: build it (tools/build.sh) or pass --cli PATH")
        pythons = {f"--python {p}": p for p in args.pythons} if args.pythons else dict(DEFAULT_PYTHONS)
        if args.no_torch:
            pythons = {}
        for label, python in pythons.items():
            if not os.access(python, os.X_OK):
                hint = " (tools/check-torch211.sh creates it)" if "torch211" in python else ""
                raise UsageError(f"{label}: {python} does not exist{hint}; or name the interpreters with --python")
        scratch = tempfile.mkdtemp(prefix="lint-fix-acceptance-")
        try:
            results = [accept_tree(tree, args.cli, args.ruff, pythons, scratch) for tree in args.trees]
        finally:
            if args.keep:
                progress(f"kept {scratch}")
            else:
                shutil.rmtree(scratch, ignore_errors=True)
    except UsageError as e:
        print(f"lint_fix_acceptance.py: error: {e}", file=sys.stderr)
        return 2
    for r in results:
        status = "FAILED" if r.failures else "passed"
        progress(f"{r.tree}: {status}: {len(r.files_fixed)} files fixed, {r.fixes_applied} fixes applied, "
                 f"checks passed {dict(sorted(r.checks_passed.items()))}, {len(r.failures)} failures, "
                 f"{len(r.not_checked)} not checked")
        for note in r.not_checked:
            progress(f"  not checked: {note}")
    if args.json:
        document = json.dumps({"trees": [{**dataclasses.asdict(r), "failures": [dataclasses.asdict(f) | {"message": str(f)}
                                                                                 for f in r.failures]}
                                         for r in results], "passed": not any(r.failures for r in results)}, indent=2)
        if args.json == "-":
            print(document)
        else:
            with open(args.json, "w") as f:
                f.write(document + "\n")
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
