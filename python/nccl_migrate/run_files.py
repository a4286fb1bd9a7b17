"""Where the files a launched job writes for itself go: its run directory. `nccl-migrate run` gives
a job one folder (--run-dir), `nccl-migrate ab` one per side (a/, b/, shadow/); the toolkit's
report (report_{rank}.json), the flight recorder's dumps (fr/comm_lib_trace_rank_<rank>) and the
per-rank logs torch's launcher keeps (logs/) go there, never to torch's defaults
(~/.cache/torch/, a torchelastic_* folder in the temporary directory), so one side's dumps never
overwrite the other's and a run's evidence stays together. Decided here; launch.py applies it to
every job it starts."""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping, MutableMapping

REPORT_VARIABLE = "NCCL_MIGRATE_REPORT"  # report.py reads it in each rank
REPORT_NAME = "report_{rank}.json"
DUMP_FOLDER = "fr"
LOG_FOLDER = "logs"  # torch's agent: <rendezvous id>_*/attempt_<n>/<local rank>/{stdout,stderr}.log
# torch's own name for a dump; torch and the toolkit's recorder append the global rank.
DUMP_NAME = "comm_lib_trace_rank_"
# The dump prefix: torch and the toolkit's recorder (backends/src/engine/flight_recorder.cc) read
# the first name, else its deprecated alias, which torch warns about. A run sets the first and
# drops the alias (the prefix it named is replaced all the same).
DUMP_VARIABLE, DUMP_ALIAS = "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"


def dump_folder(directory: str) -> str:
    return os.path.join(os.path.abspath(directory), DUMP_FOLDER)


def log_folder(directory: str) -> str:
    return os.path.join(os.path.abspath(directory), LOG_FOLDER)


def dump_prefix(directory: str) -> str:
    """The prefix the job's dumps get in ``directory`` (a run's or a side's folder)."""
    return os.path.join(dump_folder(directory), DUMP_NAME)


def report_into(env: MutableMapping[str, str], directory: str) -> None:
    """The job's report goes to ``directory``, unless the user named a file of their own
    (NCCL_MIGRATE_REPORT is the toolkit's, set only for the toolkit: it is honoured)."""
    env.setdefault(REPORT_VARIABLE, os.path.join(os.path.abspath(directory), REPORT_NAME))


def run_directory(env: Mapping[str, str], given: str | None = None) -> str | None:
    """The job's run directory: ``given``, else the folder its report goes to (`ab` names each
    side's report in the side's folder); None when neither says (torch's defaults then hold)."""
    if given:
        return os.path.abspath(given)
    report = env.get(REPORT_VARIABLE)
    return os.path.dirname(os.path.abspath(report)) if report else None


def keep_dumps_in(env: MutableMapping[str, str], directory: str) -> str:
    """Points the flight recorder's dumps into the fr/ folder of the run directory, creating it
    (torch writes a dump only into a folder that exists), and returns that folder. A dump
    location the user set is replaced: torch's variable is often set once for every job, and a
    prefix both sides of an A/B run, or two runs, shared would have the later overwrite the
    earlier (replaced_locations says so)."""
    folder = dump_folder(directory)
    os.makedirs(folder, exist_ok=True)
    env[DUMP_VARIABLE] = dump_prefix(directory)
    env.pop(DUMP_ALIAS, None)
    return folder


def replaced_locations(environ: Mapping[str, str], directory: str) -> str | None:
    """What to tell a user whose own dump location a run in ``directory`` (its run directory:
    `run`'s, or the whole A/B run's) replaces, or None."""
    given = [f"{variable}={environ[variable]}" for variable in (DUMP_VARIABLE, DUMP_ALIAS)
             if environ.get(variable) and environ[variable] != dump_prefix(directory)]
    if not given:
        return None
    return (f"{', '.join(given)} replaced: the job's flight-recorder dumps go to the run directory "
            f"{os.path.abspath(directory)} ({DUMP_FOLDER}/{DUMP_NAME}<rank>; one {DUMP_FOLDER}/ per side of an A/B "
            "run), so no run or side overwrites another's")


def earlier_run(directory: str) -> list[str]:
    """What an earlier run left in ``directory`` (its report, dumps and launcher's logs), which a
    new run would mix with its own: `fr` would show an old failure as this run's."""
    found = sorted(glob.glob(os.path.join(directory, REPORT_NAME.replace("{rank}", "*"))))
    found += [path for path in (dump_folder(directory), log_folder(directory)) if os.path.exists(path)]
    return [os.path.relpath(path, directory) for path in found]
