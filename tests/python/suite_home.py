"""Keeps what the suite writes inside its temporary directories. Each test process (each xdist
worker) gives itself and every process it starts a HOME, XDG_CACHE_HOME and TMPDIR of its own
under pytest's base temporary directory, and no inherited dump or report location, so torch's
default flight-recorder dumps (~/.cache/torch/comm_lib_trace_rank_N), caches and the temporary
run directories of `nccl-migrate run` and `ab` without --run-dir land there. At the end,
the process that started the run checks the real user's HOME (its top level) and torch's cache
folder there for files that appeared or changed while the suite ran, and fails the run naming
them. Another process writing there at the same time (a second suite sharing the HOME) is
counted too: the check is for a machine running one suite, as tools/test.sh does."""

from __future__ import annotations

import os
import tempfile

import pytest

# Where a developer's shell may send dumps and reports: the suite's own HOME holds them instead.
UNSET = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "NCCL_MIGRATE_REPORT")


def watched(environ=os.environ) -> tuple[str, str]:
    """The real user's HOME and torch's cache folder, as torch finds it (XDG_CACHE_HOME first)."""
    home = environ.get("HOME") or os.path.expanduser("~")
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    return home, os.path.join(cache, "torch")


def _top_level(folder: str) -> dict[str, int]:
    if not os.path.isdir(folder):
        return {}
    return {entry.path: entry.stat(follow_symlinks=False).st_mtime_ns for entry in os.scandir(folder)}


def _files_below(folder: str) -> dict[str, int]:
    seen = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            try:
                seen[path] = os.lstat(path).st_mtime_ns
            except OSError:  # gone while walked
                continue
    return seen


def snapshot(home: str, torch_cache: str) -> dict[str, int]:
    """Each entry of HOME's top level and each file below torch's cache folder: its mtime (ns)."""
    return {**_top_level(home), **_files_below(torch_cache)}


def gained(before: dict[str, int], after: dict[str, int], home: str) -> list[str]:
    """What appeared or changed. HOME's top-level folders change whenever anything below them
    does: of those, only new ones count (torch's cache below .cache is walked on its own)."""
    def top_level_folder(path: str) -> bool:
        return os.path.dirname(path) == home and os.path.isdir(path)

    return [path for path, mtime in sorted(after.items())
            if path not in before or (mtime != before[path] and not top_level_folder(path))]


def start(config: pytest.Config) -> None:
    """Remembers the real HOME as it is, in the process that runs the session (not in a worker)."""
    if hasattr(config, "workerinput"):
        return
    home, torch_cache = watched()
    config.stash[_KEY] = (home, torch_cache, snapshot(home, torch_cache))


def finish(session: pytest.Session) -> None:
    """Fails the run, naming the files, when the real HOME gained any while it ran."""
    if _KEY not in session.config.stash:
        return
    home, torch_cache, before = session.config.stash[_KEY]
    changed = gained(before, snapshot(home, torch_cache), home)
    if not changed:
        return
    shown = "\n".join(f"  {path}" for path in changed[:50]) + (f"\n  ... {len(changed) - 50} more" if len(changed) > 50
                                                             else "")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = (f"the suite wrote outside its temporary directories: {len(changed)} file(s) appeared or changed in "
               f"{home} or {torch_cache} while it ran (a test or a process it started ignores the suite's HOME, or "
               f"names a path outside tmp_path):\n{shown}")
    if reporter is not None:
        reporter.write_sep("=", "files written outside the suite's temporary directories", red=True)
        reporter.write_line(message)
    else:
        print(message)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


_KEY = pytest.StashKey[tuple]()


@pytest.fixture(scope="session", autouse=True)
def suite_home(tmp_path_factory):
    """A HOME, cache and temporary folder of this test process's own, for it and every process it
    starts (tempfile's, for this process: pytest's tmp_path is already placed)."""
    home, temporary = tmp_path_factory.mktemp("home"), tmp_path_factory.mktemp("tmp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        patch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
        patch.setenv("TMPDIR", str(temporary))
        patch.setattr(tempfile, "tempdir", str(temporary))
        for variable in UNSET:
            patch.delenv(variable, raising=False)
        yield home
