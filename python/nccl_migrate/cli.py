"""The torch-side subcommands of `nccl-migrate`, reached through `python -m nccl_migrate`."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile

from .job_command import launcher_options_problem, starts_own_ranks, unrunnable
from .launch_options import (
    add_launcher_options,
    add_nproc_option,
    launch_option_error,
    launcher_arguments,
    settle_launch_options,
)

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2


def _run(args: argparse.Namespace) -> int:
    from .ab.command import unwritable
    from .launch import run_job, run_launcher
    from .run_files import earlier_run, replaced_locations, report_into

    command = args.command
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("nccl-migrate run: no command given; usage: nccl-migrate run [--nproc N] -- python job.py", file=sys.stderr)
        return EXIT_ERROR
    given = settle_launch_options(args)
    problem = launch_option_error(args) or launcher_options_problem(command, given) or unrunnable(command)
    if problem:
        print(f"nccl-migrate run: {problem}", file=sys.stderr)
        return EXIT_ERROR
    run_dir = os.path.abspath(args.run_dir or tempfile.mkdtemp(prefix="nccl-migrate-run-"))
    problem = unwritable(run_dir, "--run-dir")
    left = earlier_run(run_dir) if not problem else []
    if left:  # refused, never cleared: the folder is the user's, and may hold what they keep
        problem = (f"--run-dir {args.run_dir} holds an earlier run's files ({', '.join(left[:4])}"
                   f"{', ...' if len(left) > 4 else ''}), which this run's would mix with; give a new folder, or "
                   "remove them")
    if problem:
        print(f"nccl-migrate run: {problem}", file=sys.stderr)
        return EXIT_ERROR
    replaced = replaced_locations(os.environ, run_dir)
    if replaced:
        print(f"nccl-migrate run: {replaced}", file=sys.stderr)
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH", "")]))
    if args.activate:
        env["NCCL_MIGRATE_ACTIVATE"] = "1"  # the shim, in jobs that never import nccl_migrate
    report_into(env, run_dir)
    if starts_own_ranks(command):
        print(f"nccl-migrate run: {' '.join(command)} (it starts its own ranks)", file=sys.stderr)
        result = run_launcher(command, env=env, timeout=args.timeout, run_dir=run_dir)
    else:
        print(f"nccl-migrate run: {args.nproc} ranks per node, by torch's launcher: {' '.join(command)}",
              file=sys.stderr)
        # Each rank's output on stdout, its stderr included, prefixed, as a launcher of many ranks
        # always printed it (torch's agent tees a rank's stderr to this process's sys.stderr).
        with contextlib.redirect_stderr(sys.stdout):
            result = run_job(command, args.nproc, env=env, timeout=args.timeout,
                             launcher_args=launcher_arguments(args), run_dir=run_dir)
    print(f"nccl-migrate run: the job's files are in {run_dir}", file=sys.stderr)
    if result.ok:
        print(f"nccl-migrate run: all {len(result.ranks)} ranks finished in {result.seconds:.1f} s", file=sys.stderr)
        return EXIT_OK
    print(f"nccl-migrate run: job failed: {result.describe_failure()}", file=sys.stderr)
    return EXIT_ERROR


def _doctor(args: argparse.Namespace) -> int:
    from .doctor import examine, render_text

    try:
        report = examine()
    except Exception as error:  # noqa: BLE001 - doctor must say why it could not run
        print(f"nccl-migrate doctor: could not examine this environment: {error}", file=sys.stderr)
        return EXIT_ERROR
    print(json.dumps(report, indent=2) if args.format == "json" else render_text(report))
    return EXIT_FOUND if report["conflicts"] else EXIT_OK


def _fr(args: argparse.Namespace) -> int:
    from .fr import dump_paths, render_text, summarize

    try:
        summaries = [summarize(path) for path in dump_paths(args.dumps)]
    except ValueError as error:
        print(f"nccl-migrate fr: {error}", file=sys.stderr)
        return EXIT_ERROR
    print(json.dumps(summaries, indent=2) if args.format == "json" else render_text(summaries))
    # Ops left unfinished are what a dump is read for: say so in the exit status.
    return EXIT_FOUND if any(s["not_completed"] for s in summaries) else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nccl-migrate", description="torch-side commands of nccl-migrate")
    sub = parser.add_subparsers(dest="subcommand", required=True)

    run = sub.add_parser("run", help="run a job's ranks with torch's launcher and the toolkit's backends",
                         description="Runs COMMAND as N ranks per node through torch's own launcher (torchrun's "
                                     "elastic agent, in this process): torchrun's environment per rank, a local "
                                     "rendezvous or the multi-node one given by --nnodes/--rdzv-endpoint; a failing "
                                     "rank ends the others. A launch command (torchrun, srun, a shell script) runs "
                                     "once, as given. What the job writes for itself (reports, flight-recorder dumps, "
                                     "logs) goes to the run directory.")
    add_nproc_option(run, "ranks per node for a .py job or a program")
    add_launcher_options(run)
    run.add_argument("--timeout", type=float, default=600.0, help="seconds before the whole job is ended (default 600)")
    run.add_argument("--run-dir", help="where the job's own files go: the toolkit's reports (report_{rank}.json, "
                                       "unless NCCL_MIGRATE_REPORT names a file), the flight recorder's dumps "
                                       "(fr/comm_lib_trace_rank_<rank>; a TORCH_FR_DUMP_TEMP_FILE of yours is replaced) "
                                       "and each rank's log as torch's launcher keeps it (logs/); default: a new "
                                       "temporary folder, named at the end")
    run.add_argument("--no-activate", dest="activate", action="store_false",
                     help="do not activate the shim in the job (torch then behaves as without nccl-migrate)")
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...] (a .py file runs with this Python)")
    run.set_defaults(handler=_run)

    doctor = sub.add_parser("doctor", help="torch, NCCL, GPUs and what each backend name resolves to here")
    doctor.add_argument("--format", choices=["text", "json"], default="text")
    doctor.set_defaults(handler=_doctor)

    from .ab.command import add_parser as add_ab_parser

    add_ab_parser(sub)

    _add_fr_arguments(sub.add_parser("fr", help=FR_HELP, description=FR_DESCRIPTION))
    return parser


FR_HELP = "summarize flight-recorder dumps, rank by rank"
FR_DESCRIPTION = ("Reads flight-recorder dumps (torch's format, the toolkit's and torch's own) and shows per group the "
                  "last collective each rank enqueued and completed, and every op not completed. Exit 1 when some op "
                  "was not completed. For the cross-rank match analysis run torch's analyzer on the same files: "
                  "torchfrtrace DIR -p PREFIX.")


def _add_fr_arguments(fr: argparse.ArgumentParser) -> argparse.ArgumentParser:
    fr.add_argument("dumps", nargs="+", metavar="DUMP", help="dump files, one per rank, or a directory: the dumps in "
                                                            "it and below (a run directory of `run` or `ab`)")
    fr.add_argument("--format", choices=["text", "json"], default="text")
    fr.set_defaults(handler=_fr)
    return fr


def _parser_for(argv: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """`fr` reads dumps without torch: its own parser (the same as the whole CLI's `fr`, whose
    `ab` would import torch), and the package left unloaded. Every other command gets the whole
    parser and the package loaded as its import loads it (backends registered, shim active),
    which `python -m nccl_migrate` defers (nccl_migrate/__init__.py). Returns the parser and
    the arguments it parses."""
    if argv[:1] == ["fr"]:
        return _add_fr_arguments(argparse.ArgumentParser(prog="nccl-migrate fr", description=FR_DESCRIPTION)), argv[1:]
    from . import _load

    _load()
    return build_parser(), argv


def main(argv: list[str]) -> int:
    parser, arguments = _parser_for(argv)
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exit_:
        return EXIT_OK if exit_.code == 0 else EXIT_ERROR
    return args.handler(args)
