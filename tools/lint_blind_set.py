#!/usr/bin/env python3
"""Score `nccl-migrate lint` against a blind evaluation set (tests/lint/blind_sets/set_*.toml).

A set lists real files from public repositories, each labelled by hand with the hazards it holds
(rule code and line) or marked clean. This script runs the linter once per repository snapshot
over the folder a user would lint (`lint_root`), keeps only the findings in the set's files, and
matches them to the labels by (file, code, line): a label with a finding is a true positive, a
label without one a false negative (miss), a finding without a label a false positive.

Snapshots are not fetched here. Each repository of the set must already be exported, at the
recorded commit, to SNAPSHOTS/<owner>__<name> (for example with
`git --git-dir=REPO.git archive COMMIT | tar -x -C SNAPSHOTS/<owner>__<name>`); an optional
SNAPSHOTS/<owner>__<name>/.blind_commit holding the commit is checked when present.

It is a measurement, not a gate: exit 0 whenever it scored (whatever the numbers), 2 on bad
input (a malformed set file, a missing snapshot or file, a missing CLI), 3 when the linter itself
failed on a snapshot. See tests/lint/blind_sets/README.md for the schema and how the sets were made.
"""

import argparse
import json
import os
import re
import subprocess
import sys
from collections import defaultdict

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    try:
        import tomli as tomllib  # type: ignore[no-redef]
    except ModuleNotFoundError:
        tomllib = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CLI = os.environ.get("NCCL_MIGRATE_LINT_CLI", os.path.join(ROOT, "build", "migrate", "nccl-migrate"))
DEFAULT_SNAPSHOTS = "/tmp/blind"

REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
CODE_RE = re.compile(r"^NM[0-9]{3}$")


class BadInput(Exception):
    """The set file or the snapshots are not usable; the message says what to fix."""


def snapshot_name(repo):
    owner, name = repo.split("/", 1)
    return f"{owner}__{name}"


def load_set(path):
    """Parse and validate a set file; returns its list of file entries."""
    if tomllib is None:
        raise BadInput("reading TOML needs Python 3.11+ (tomllib) or the tomli package")
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such set file")
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{path}: not valid TOML: {e}")
    files = data.get("file")
    if not isinstance(files, list) or not files:
        raise BadInput(f"{path}: expected one or more [[file]] tables")
    problems = []
    seen = set()
    for i, entry in enumerate(files, 1):
        where = f"{path}: [[file]] #{i}"
        if not isinstance(entry, dict):
            problems.append(f"{where}: not a table")
            continue
        for key in ("repo", "commit", "path", "lint_root"):
            if not isinstance(entry.get(key), str) or not entry.get(key):
                problems.append(f"{where}: `{key}` must be a non-empty string")
        if problems and problems[-1].startswith(where):
            continue
        where = f"{where} ({entry['repo']}:{entry['path']})"
        if not REPO_RE.match(entry["repo"]):
            problems.append(f"{where}: `repo` must be owner/name")
        if not COMMIT_RE.match(entry["commit"]):
            problems.append(f"{where}: `commit` must be 40 lowercase hex digits")
        for key in ("path", "lint_root"):
            value = entry[key]
            if os.path.isabs(value) or ".." in value.replace("\\", "/").split("/"):
                problems.append(f"{where}: `{key}` must be a relative path inside the repository")
        key = (entry["repo"], os.path.normpath(entry["path"]))
        if key in seen:
            problems.append(f"{where}: the same file is listed twice")
        seen.add(key)
        labels = entry.get("labels")
        if not isinstance(labels, list):
            problems.append(f"{where}: `labels` must be a list (empty for a clean file)")
            continue
        if not labels and not (isinstance(entry.get("why_clean"), str) and entry["why_clean"].strip()):
            problems.append(f"{where}: a file with no labels needs a `why_clean` string")
        if labels and "why_clean" in entry:
            problems.append(f"{where}: `why_clean` is only for files with no labels")
        label_keys = set()
        for j, label in enumerate(labels, 1):
            lw = f"{where}: label #{j}"
            if not isinstance(label, dict):
                problems.append(f"{lw}: not an inline table")
                continue
            line, code, why = label.get("line"), label.get("code"), label.get("why")
            if not isinstance(line, int) or isinstance(line, bool) or line < 1:
                problems.append(f"{lw}: `line` must be a positive integer")
            if not isinstance(code, str) or not CODE_RE.match(code):
                problems.append(f"{lw}: `code` must look like NM401")
            if not isinstance(why, str) or not why.strip():
                problems.append(f"{lw}: `why` must be a non-empty string")
            if (code, line) in label_keys:
                problems.append(f"{lw}: duplicate label {code} at line {line}")
            label_keys.add((code, line))
    if problems:
        raise BadInput("malformed set file:\n  " + "\n  ".join(problems))
    return files


def check_snapshots(files, snapshots):
    """Every repository folder and every listed file must be there, at the recorded commit."""
    missing_repos, missing_files, wrong_commit = {}, [], []
    for entry in files:
        folder = os.path.join(snapshots, snapshot_name(entry["repo"]))
        if not os.path.isdir(folder):
            missing_repos[entry["repo"]] = (folder, entry["commit"])
            continue
        marker = os.path.join(folder, ".blind_commit")
        if os.path.isfile(marker):
            with open(marker) as f:
                recorded = f.read().strip()
            if recorded != entry["commit"]:
                wrong_commit.append(f"{folder}: .blind_commit says {recorded}, the set says {entry['commit']}")
        if not os.path.isdir(os.path.join(folder, entry["lint_root"])):
            missing_files.append(f"{folder}: lint_root {entry['lint_root']!r} is not a folder")
        if not os.path.isfile(os.path.join(folder, entry["path"])):
            missing_files.append(f"{folder}: {entry['path']} is missing")
    if missing_repos or missing_files or wrong_commit:
        lines = []
        if missing_repos:
            lines.append(f"{len(missing_repos)} repository snapshot(s) missing under {snapshots}:")
            for repo, (folder, commit) in sorted(missing_repos.items()):
                lines.append(f"  {repo} at {commit} -> {folder}")
            lines.append("Lay each out as SNAPSHOTS/<owner>__<name>/ holding the repository's files at the recorded "
                         "commit, e.g.:")
            lines.append("  mkdir -p SNAPSHOTS/<owner>__<name> && git --git-dir=<repo.git> archive <commit> | "
                         "tar -x -C SNAPSHOTS/<owner>__<name> && echo <commit> > SNAPSHOTS/<owner>__<name>/.blind_commit")
        lines.extend(missing_files)
        lines.extend(wrong_commit)
        raise BadInput("\n".join(lines))


def run_lint(cli, folder, lint_root, timeout):
    """Findings of one lint run, as {(repo-relative path, code, line): message}."""
    command = [cli, "lint", "--format", "json", "--exit-zero", lint_root]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` in {folder} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError as e:
        raise RuntimeError(f"`{' '.join(command)}` in {folder} printed no JSON report: {e}")
    findings = {}
    for f in report.get("findings", []):
        path = f["path"]
        path = os.path.relpath(path, folder) if os.path.isabs(path) else os.path.normpath(path)
        findings.setdefault((path, f["code"], int(f["line"])), f.get("message", ""))
    return findings, report.get("warnings", [])


def ratio(num, den):
    return None if den == 0 else num / den


def score(files, findings_by_repo):
    per_code = defaultdict(lambda: {"labelled": 0, "found": 0, "tp": 0, "fn": 0, "fp": 0})
    misses, false_positives, hits = [], [], []
    for entry in files:
        path = os.path.normpath(entry["path"])
        labels = {(lab["code"], lab["line"]): lab["why"] for lab in entry["labels"]}
        found = {(code, line): msg for (p, code, line), msg in findings_by_repo[(entry["repo"], entry["lint_root"])].items()
                 if p == path}
        where = f"{entry['repo']}:{entry['path']}"
        for (code, line), why in sorted(labels.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            per_code[code]["labelled"] += 1
            if (code, line) in found:
                per_code[code]["tp"] += 1
                hits.append({"file": where, "line": line, "code": code})
            else:
                per_code[code]["fn"] += 1
                misses.append({"file": where, "line": line, "code": code, "why": why})
        for (code, line), msg in sorted(found.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            per_code[code]["found"] += 1
            if (code, line) not in labels:
                per_code[code]["fp"] += 1
                false_positives.append({"file": where, "line": line, "code": code, "message": msg})
    totals = {k: sum(c[k] for c in per_code.values()) for k in ("labelled", "found", "tp", "fn", "fp")}
    for row in list(per_code.values()) + [totals]:
        row["recall"] = ratio(row["tp"], row["labelled"])
        row["precision"] = ratio(row["tp"], row["found"])
    return dict(sorted(per_code.items())), totals, misses, false_positives, hits


def fmt(x):
    return "n/a" if x is None else f"{x:.2f}"


def print_table(per_code, totals, out):
    header = ("code", "labelled", "found", "TP", "FN", "FP", "recall", "precision")
    rows = [(code, c["labelled"], c["found"], c["tp"], c["fn"], c["fp"], fmt(c["recall"]), fmt(c["precision"]))
            for code, c in per_code.items()]
    rows.append(("total", totals["labelled"], totals["found"], totals["tp"], totals["fn"], totals["fp"],
                 fmt(totals["recall"]), fmt(totals["precision"])))
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(str(v).ljust(widths[i]) if i == 0 else str(v).rjust(widths[i])
                                       for i, v in enumerate(r)) + " |"
    print(line(header), file=out)
    print("|" + "|".join(("-" * (w + 1) + ":") if i else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|", file=out)
    for r in rows:
        print(line(r), file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Score `nccl-migrate lint` on a blind evaluation set: per rule code, labelled hazards, "
                    "findings, true positives, misses, false positives, recall and precision.",
        epilog="Exit status: 0 scored, 2 bad input (malformed set, missing snapshot or file, missing CLI), "
               "3 the linter failed. Snapshots: SNAPSHOTS/<owner>__<name>/ at the recorded commit, e.g. "
               "`git --git-dir=REPO.git archive COMMIT | tar -x -C SNAPSHOTS/<owner>__<name>`.")
    parser.add_argument("set_file", help="a set file, e.g. tests/lint/blind_sets/set_a.toml")
    parser.add_argument("--snapshots", default=DEFAULT_SNAPSHOTS,
                        help=f"folder holding one <owner>__<name> folder per repository (default {DEFAULT_SNAPSHOTS})")
    parser.add_argument("--cli", default=DEFAULT_CLI, help="the nccl-migrate binary (default: build/migrate/nccl-migrate, "
                                                           "or $NCCL_MIGRATE_LINT_CLI)")
    parser.add_argument("--json", action="store_true", help="print a machine-readable JSON report instead of tables")
    parser.add_argument("--details", action="store_true", help="also list every miss and false positive (file:line)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds allowed for one lint run (default 1800)")
    args = parser.parse_args(argv)

    try:
        files = load_set(args.set_file)
        check_snapshots(files, args.snapshots)
        # Lint runs inside each snapshot's folder: a relative path is taken from where the tool was started.
        args.cli = os.path.abspath(args.cli)
        if not os.access(args.cli, os.X_OK):
            raise BadInput(f"{args.cli} is not an executable nccl-migrate (build it, or pass --cli)")
    except BadInput as e:
        print(f"lint_blind_set: {e}", file=sys.stderr)
        return 2

    findings_by_repo, warnings, commands = {}, [], []
    for repo, lint_root in sorted({(e["repo"], e["lint_root"]) for e in files}):
        folder = os.path.join(args.snapshots, snapshot_name(repo))
        commands.append(f"(cd {folder} && {args.cli} lint --format json --exit-zero {lint_root})")
        try:
            findings_by_repo[(repo, lint_root)], repo_warnings = run_lint(args.cli, folder, lint_root, args.timeout)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"lint_blind_set: the linter failed: {e}", file=sys.stderr)
            return 3
        warnings.extend(f"{repo}: {w}" for w in repo_warnings)

    per_code, totals, misses, false_positives, hits = score(files, findings_by_repo)
    repos = sorted({e["repo"] for e in files})
    summary = {
        "set_file": args.set_file,
        "files": len(files),
        "hazard_files": sum(1 for e in files if e["labels"]),
        "clean_files": sum(1 for e in files if not e["labels"]),
        "repositories": len(repos),
    }
    if args.json:
        json.dump({"summary": summary, "per_code": per_code, "totals": totals, "misses": misses,
                   "false_positives": false_positives, "true_positives": hits, "lint_warnings": warnings,
                   "commands": commands}, sys.stdout, indent=2)
        print()
        return 0

    out = sys.stdout
    print(f"{args.set_file}: {summary['files']} files ({summary['hazard_files']} with hazards, "
          f"{summary['clean_files']} clean) from {summary['repositories']} repositories", file=out)
    print_table(per_code, totals, out)
    if warnings:
        print(f"\nlint warnings: {len(warnings)} (run with --json to see them)", file=out)
    if args.details:
        print(f"\nmisses ({len(misses)}):", file=out)
        for m in misses:
            print(f"  {m['file']}:{m['line']}: {m['code']} -- {m['why']}", file=out)
        print(f"\nfalse positives ({len(false_positives)}):", file=out)
        for f in false_positives:
            print(f"  {f['file']}:{f['line']}: {f['code']} -- {f['message'][:160]}", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
