"""The shim's resolution from Python, row by row against the same table the C++ tests check
(tests/shim/resolution_table.json): one implementation, one contract."""

import json
import os

import pytest

from nccl_migrate._native import native

TABLE = os.path.join(os.path.dirname(__file__), "..", "..", "shim", "resolution_table.json")


def _table():
    with open(TABLE) as f:
        return json.load(f)


def test_every_row_of_the_shared_table():
    table = _table()
    failures = []
    for row in table["rows"]:
        got = native.resolve_backend(row["backend"], row["env"], table["torch"][row["torch"]], row["gpu"])
        want = row["expect"]
        problems = []
        for key in ("backend", "behaviour", "implementation"):
            if got[key] != want[key]:
                problems.append(f"{key} {got[key]!r} != {want[key]!r}")
        if (got["error"] is not None) != want["error"]:
            problems.append(f"error {got['error']!r}")
        if bool(got["warnings"]) != want["warning"]:
            problems.append(f"warnings {got['warnings']!r}")
        for key, field in (("reason_contains", "reason"), ("error_contains", "error")):
            if key in want and want[key] not in (got[field] or ""):
                problems.append(f"{field} {got[field]!r} lacks {want[key]!r}")
        if "warning_contains" in want and not any(want["warning_contains"] in w for w in got["warnings"]):
            problems.append(f"warnings {got['warnings']!r} lack {want['warning_contains']!r}")
        if problems:
            failures.append(f"{row['id']}: " + "; ".join(problems))
    assert not failures, "\n".join(failures[:20])
    assert len(table["rows"]) > 800
