"""tools/lint_blind_set.py on a tiny synthetic set: the counts it derives from a real lint run, and
its exit status for a missing snapshot and a malformed set file."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from lint_cli import CLI

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCORER = os.path.join(ROOT, "tools", "lint_blind_set.py")
COMMIT = "0123456789abcdef0123456789abcdef01234567"

HAZARD = textwrap.dedent("""\
    import torch
    import torch.distributed as dist


    def is_nccl(pg):
        return isinstance(pg, torch.distributed.ProcessGroupNCCL)
    """)  # NM201 on line 6

CLEAN = textwrap.dedent("""\
    import torch.distributed as dist


    def cpu_group():
        if dist.get_backend() == "gloo":
            return dist.group.WORLD
        return dist.new_group(backend="gloo")
    """)

SET = textwrap.dedent(f"""\
    [[file]]
    repo = "acme/demo"
    commit = "{COMMIT}"
    path = "pkg/hazard.py"
    lint_root = "."
    labels = [
      {{ line = 6, code = "NM201", why = "isinstance against the legacy class" }},
    ]

    [[file]]
    repo = "acme/demo"
    commit = "{COMMIT}"
    path = "pkg/clean.py"
    lint_root = "."
    labels = [
      {{ line = 7, code = "NM401", why = "deliberately wrong label: lint should miss it" }},
    ]

    [[file]]
    repo = "acme/demo"
    commit = "{COMMIT}"
    path = "pkg/unlabelled.py"
    lint_root = "."
    labels = []
    why_clean = "deliberately unlabelled copy of the hazard: its finding counts as a false positive"
    """)


def _scorer(*args):
    return subprocess.run([sys.executable, SCORER, *args], capture_output=True, text=True, timeout=300, check=False)


def _layout(tmp_path, set_text=SET, with_snapshot=True):
    set_file = tmp_path / "set.toml"
    set_file.write_text(set_text)
    snapshots = tmp_path / "snapshots"
    if with_snapshot:
        pkg = snapshots / "acme__demo" / "pkg"
        pkg.mkdir(parents=True)
        (pkg / "hazard.py").write_text(HAZARD)
        (pkg / "clean.py").write_text(CLEAN)
        (pkg / "unlabelled.py").write_text(HAZARD)
        (snapshots / "acme__demo" / ".blind_commit").write_text(COMMIT + "\n")
    else:
        snapshots.mkdir()
    return str(set_file), str(snapshots)


def test_counts_from_a_real_lint_run(tmp_path):
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"{CLI} is not built")
    set_file, snapshots = _layout(tmp_path)
    done = _scorer(set_file, "--snapshots", snapshots, "--cli", CLI, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["summary"] == {"set_file": set_file, "files": 3, "hazard_files": 2, "clean_files": 1,
                                 "repositories": 1}
    nm201 = report["per_code"]["NM201"]
    assert (nm201["labelled"], nm201["found"], nm201["tp"], nm201["fn"], nm201["fp"]) == (1, 2, 1, 0, 1)
    assert nm201["recall"] == 1.0 and nm201["precision"] == 0.5
    nm401 = report["per_code"]["NM401"]
    assert (nm401["labelled"], nm401["found"], nm401["tp"], nm401["fn"], nm401["fp"]) == (1, 0, 0, 1, 0)
    assert nm401["precision"] is None
    assert [(m["file"], m["line"], m["code"]) for m in report["misses"]] == [("acme/demo:pkg/clean.py", 7, "NM401")]
    assert [(f["file"], f["line"], f["code"]) for f in report["false_positives"]] == [
        ("acme/demo:pkg/unlabelled.py", 6, "NM201")]
    totals = report["totals"]
    assert (totals["labelled"], totals["tp"], totals["fn"], totals["fp"]) == (2, 1, 1, 1)

    table = _scorer(set_file, "--snapshots", snapshots, "--cli", CLI, "--details")
    assert table.returncode == 0, table.stderr
    assert "| NM201 " in table.stdout and "acme/demo:pkg/clean.py:7: NM401" in table.stdout


def test_missing_snapshot_is_bad_input(tmp_path):
    set_file, snapshots = _layout(tmp_path, with_snapshot=False)
    done = _scorer(set_file, "--snapshots", snapshots, "--cli", CLI)
    assert done.returncode == 2
    assert "acme/demo" in done.stderr and "acme__demo" in done.stderr and "git" in done.stderr


def test_wrong_commit_marker_is_bad_input(tmp_path):
    set_file, snapshots = _layout(tmp_path)
    with open(os.path.join(snapshots, "acme__demo", ".blind_commit"), "w") as f:
        f.write("f" * 40)
    done = _scorer(set_file, "--snapshots", snapshots, "--cli", CLI)
    assert done.returncode == 2 and ".blind_commit" in done.stderr


@pytest.mark.parametrize("broken", [
    "[[file]\nrepo = 'x'\n",  # not TOML
    SET.replace('code = "NM201"', 'code = "201"'),  # bad rule code
    SET.replace(f'commit = "{COMMIT}"', 'commit = "abc"', 1),  # short commit
    SET.replace('why_clean = "deliberately', 'note = "deliberately'),  # clean file without why_clean
])
def test_malformed_set_is_bad_input(tmp_path, broken):
    set_file, snapshots = _layout(tmp_path, set_text=broken)
    done = _scorer(set_file, "--snapshots", snapshots, "--cli", CLI)
    assert done.returncode == 2
    assert "set file" in done.stderr or "TOML" in done.stderr


def test_relative_cli_is_taken_from_where_the_scorer_starts(tmp_path):
    # Lint runs inside each snapshot's folder; a --cli relative to the caller's folder must still be found.
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"{CLI} is not built")
    set_file, snapshots = _layout(tmp_path)
    cli_folder, cli_name = os.path.split(os.path.abspath(CLI))
    done = subprocess.run([sys.executable, SCORER, set_file, "--snapshots", snapshots, "--cli", os.path.join(".", cli_name),
                           "--json"], capture_output=True, text=True, timeout=300, check=False, cwd=cli_folder)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["totals"]["tp"] == 1
