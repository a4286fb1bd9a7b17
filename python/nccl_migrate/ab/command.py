"""`nccl-migrate ab`: run a job once per side, then compare the two runs op by op; or, with
--shadow, run it once with every op also executed on the other side's backend and compared live;
or `ab compare DIR_A DIR_B`: compare two sides recorded before (`ab record`, or the environment
alone). Exit 0 identical (within tolerance), 1 divergent or missing ops, 2 a side failed or the
runs could not be compared (a damaged record included: its file and line are named)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import tempfile

from .. import run_files
from ..job_command import launcher_options_problem, unrunnable
from ..launch_options import (
    add_launcher_options,
    add_nproc_option,
    launch_option_error,
    launcher_arguments,
    settle_launch_options,
)
from ..record_files import write_whole
from . import report, side_behaviour
from .compare import Comparison, compare
from .divergences import ScratchError
from .html import render_html
from .op_map import OpMap
from .progress import Progress
from .runner import SideRun, run_shadowed, run_side
from .side_failure import compare_up_to_failure, explain
from .side_stats import SideStats
from .sides import (
    RecordError,
    incomplete_records,
    load,
    missing_ranks,
    shadow_sides,
    unrecorded_message,
)
from .spec import SPEC_HELP, SpecError, parse

EXIT_IDENTICAL, EXIT_DIVERGENT, EXIT_FAILED = 0, 1, 2


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's own layout, but a paragraph of a description or epilog whose lines are indented
    keeps its lines (a list laid out by hand); every other paragraph is wrapped as usual."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n\n".join("\n".join(indent + line for line in paragraph.splitlines())
                            if any(line.startswith(" ") for line in paragraph.splitlines())
                            else super(_HelpFormatter, self)._fill_text(paragraph, width, indent)
                            for paragraph in text.split("\n\n"))


# argparse writes a remainder of arguments as "...": these say what goes there.
USAGE = ("%(prog)s [OPTIONS] [--a SPEC] [--b SPEC] [--shadow] -- COMMAND [ARGS...]\n"
         "       %(prog)s record --side SPEC --dir DIR [OPTIONS] -- COMMAND [ARGS...]\n"
         "       %(prog)s compare DIR_A DIR_B [OPTIONS]")
COMMAND_HELP = ("after --, the job: a .py script (run as --nproc ranks through torch's launcher, with this "
                "Python), a program run as each rank, or a launch command that starts the ranks itself "
                "(torchrun, srun, a shell script), run once as given")


def add_parser(sub) -> None:
    ab = sub.add_parser(
        "ab", help="compare a job's collectives under two backends", usage=USAGE, epilog=SPEC_HELP,
        formatter_class=_HelpFormatter,
        description="Runs COMMAND once per side, changing only environment variables, records every "
                    "collective and p2p op on every rank (those DDP issues from C++ included), and compares the "
                    "runs op by op; with --shadow, runs it once and executes every op on both backends. Writes "
                    "report.json and report.html into the run directory (docs/ab.md). "
                    "`nccl-migrate ab record --side SPEC --dir DIR -- COMMAND` records one side (on every node "
                    "of a multi-node job; `ab record --help`), `nccl-migrate ab compare DIR_A DIR_B` compares two "
                    "recorded sides (`ab compare --help`). "
                    "Exit 0 identical, 1 divergent or missing ops, 2 a side failed or could not be compared.")
    ab.add_argument("--a", default="legacy", metavar="SPEC", help="side a (SPEC below; default: legacy); with "
                                                                   "--shadow, the primary, whose outputs the job sees")
    ab.add_argument("--b", default="rewritten", metavar="SPEC", help="side b (SPEC below; default: rewritten); with "
                                                                     "--shadow, the shadow: a behaviour or backend=NAME "
                                                                     "only")
    ab.add_argument("--shadow", action="store_true",
                    help="one run: every op the job issues (from Python, and DDP's from C++) also runs on a shadow "
                         "group with side b's backend, on clones of its tensors, and is compared live (for jobs too "
                         "costly to run twice)")
    add_nproc_option(ab, "ranks per side for a script")
    ab.add_argument("--timeout", type=float, default=600.0, help="seconds each side may run (default 600)")
    ab.add_argument("--tolerance", type=float, default=0.0,
                    help="accept |a-b| <= T*max(1,|a|) element-wise; needs --keep-tensors, or --shadow "
                         "(default 0: bitwise)")
    ab.add_argument("--keep-tensors", type=int, default=0, metavar="MAX_BYTES",
                    help="keep whole tensors of ops up to MAX_BYTES so errors are measured (default 0)")
    ab.add_argument("--allow-job-nondeterminism", action="store_true",
                    help="exit 0 when every divergence traces back to inputs the job itself made differ between "
                         "runs (per-run ids in object collectives, unseeded randomness) and no backend computed "
                         "differently from identical inputs")
    ab.add_argument("--format", choices=["text", "json"], default="text",
                    help="the report on stdout: text for a person (default), or json (report.json's content)")
    ab.add_argument("--quiet", action="store_true", help="no progress lines on stderr while a long comparison runs")
    ab.add_argument("--html", metavar="PATH", help="also write the HTML report (plots included) to PATH; it is "
                                                   "always written to the run directory as report.html")
    ab.add_argument("--run-dir", metavar="DIR", help="where records and the job's output go (default: a new temporary folder)")
    ab.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND", help=COMMAND_HELP)
    ab.set_defaults(handler=main)


def unwritable(directory: str, option: str) -> str | None:
    """Why ``directory`` cannot take records or reports (created when missing), or None: found before
    a job starts, not by its ranks."""
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as error:
        return (f"{option} {directory}: cannot be written ({error.strerror or error}); give a directory this user "
                "can create and write (for a job on many nodes, on a filesystem they all share)")
    return None


def _fail(message: str) -> int:
    # `ab record`'s messages start "ab record: ": the program's name, then the subcommand's.
    prefix = "nccl-migrate " if message.startswith("ab record: ") else "nccl-migrate ab: "
    print(prefix + message, file=sys.stderr)
    return EXIT_FAILED


def _tail(path: str, lines: int = 15) -> str:
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def _failed_output(run: SideRun, fault: dict | None, whose: str) -> str:
    """What a failed side's job printed that says why: its failed rank's own output (side_failure),
    or, where no rank is known to have caused it (a hang, the launcher), the log's last lines.
    ``whose``: the job's name in the text ("side b", or "the job" for `ab record`'s one side)."""
    own = (fault or {}).get("own_output")
    if own and own["shows"] != "nothing":
        return (f"--- rank {own['rank']} of {whose}, its own output ({own['shows']}, from "
                f"{' or '.join(own['logs'])}):\n" + "\n".join(own["lines"]))
    return f"--- last lines of {whose}'s output ({run.log}):\n{_tail(run.log)}"


def _shadow_runs(run: SideRun, shadow_side) -> list[SideRun]:
    """A shadow run seen as its two sides: one job, one directory."""
    return [run, dataclasses.replace(run, side=shadow_side)]


def main(args: argparse.Namespace) -> int:
    explicit = args.command[:1] == ["--"]
    command = args.command[1:] if explicit else args.command
    if not explicit and command[:1] == ["compare"]:
        return compare_recorded(args, command[1:])
    if not explicit and command[:1] == ["record"]:
        return record(command[1:])
    if not command:
        return _fail("no command given; usage: nccl-migrate ab [--a SPEC] [--b SPEC] [--shadow] -- job.py [ARGS]")
    settle_launch_options(args)
    problem = launch_option_error(args)
    if problem:
        return _fail(problem)
    try:
        sides = [parse("a", args.a), parse("b", args.b)]
    except SpecError as error:
        return _fail(str(error))
    problem = unrunnable(command)
    if problem:
        return _fail(f"{problem}; no side was run")
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="nccl-migrate-ab-")
    problem = unwritable(run_dir, "--run-dir")
    if problem:
        return _fail(problem)
    note = run_files.replaced_locations(os.environ, run_dir)
    if note:
        print(f"nccl-migrate ab: {note}", file=sys.stderr)

    if args.shadow:
        print(f"nccl-migrate ab: one run, primary a ({sides[0].text}), shadow b ({sides[1].text}): "
              f"{' '.join(command)}", file=sys.stderr)
        try:
            run = run_shadowed(sides[0], sides[1], command, args.nproc, args.timeout, run_dir, args.keep_tensors)
        except SpecError as error:
            return _fail(str(error))
        return conclude(args, run_dir, _shadow_runs(run, sides[1]), shadow=True)
    runs = []
    for side in sides:
        print(f"nccl-migrate ab: side {side.label} ({side.text}): {' '.join(command)}", file=sys.stderr)
        runs.append(run_side(side, command, args.nproc, args.timeout, run_dir, args.keep_tensors))
    return conclude(args, run_dir, runs)


def _record_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nccl-migrate ab record", usage="%(prog)s --side SPEC --dir DIR [OPTIONS] -- COMMAND [ARGS...]",
        epilog=SPEC_HELP, formatter_class=_HelpFormatter,
        description="Runs COMMAND as one side of an A/B run, recording every rank's ops into DIR (a folder all "
                    "nodes share); run it on every node of the side, then `nccl-migrate ab compare DIR_A DIR_B`. "
                    "A launch command (torchrun ..., srun python job.py, a shell script, python -m "
                    "torch.distributed.run ...) runs once, as given: it starts the ranks, and the launcher options "
                    "do not apply; any other COMMAND (job.py ARGS, python job.py, a program) is one rank, started "
                    "through torch's launcher (--nproc per node, --nnodes and --rdzv-* for many nodes). With --print-env, prints the environment that "
                    "records a job instead, for jobs started by SLURM or Kubernetes. Exit 0 when the job "
                    "succeeded, 2 otherwise.")
    parser.add_argument("--side", required=True, metavar="SPEC", help="the side recorded (SPEC below)")
    parser.add_argument("--dir", required=True, help="where this side's records go (empty, or this run's own)")
    add_nproc_option(parser, "ranks per node for a .py COMMAND")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds the job may run before it is ended (default: no limit, as for any training job)")
    parser.add_argument("--keep-tensors", type=int, default=0, metavar="MAX_BYTES",
                        help="keep whole tensors of ops up to MAX_BYTES so a comparison measures errors (default 0)")
    parser.add_argument("--print-env", action="store_true",
                        help="print the job's environment (shell exports) instead of running anything")
    add_launcher_options(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND",
                        help="after --, the job: a .py script or a program (one rank, run through torch's launcher, "
                             "--nproc ranks per node) or a launch command, run once as given (torchrun ..., srun ..., "
                             "a shell script)")
    return parser


def record(argv: list[str]) -> int:
    """`ab record --side SPEC --dir DIR -- COMMAND`: one side, recorded for a later compare."""
    from .runner import job_environment, job_log, record_side

    try:
        args = _record_parser().parse_args(argv)
    except SystemExit as exit_:
        return EXIT_IDENTICAL if exit_.code == 0 else EXIT_FAILED
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    given = settle_launch_options(args)
    problem = launcher_options_problem(command, given) if command else None
    if problem:
        return _fail(f"ab record: {problem}")
    args.timeout_optional = True
    problem = launch_option_error(args)
    if problem:
        return _fail(f"ab record: {problem}")
    try:
        side = parse("side", args.side)
    except SpecError as error:
        return _fail(f"ab record: {error}")
    directory = os.path.abspath(args.dir)
    if args.print_env:
        os.makedirs(run_files.dump_folder(directory), exist_ok=True)  # torch writes a dump only into a folder that exists
        for key, value in sorted(job_environment(side, directory, args.keep_tensors, inherit=False).items()):
            print(f"unset {key}" if value is None else f"export {key}={shlex.quote(value)}")
        return EXIT_IDENTICAL
    if not command:
        return _fail("ab record: no command given; usage: nccl-migrate ab record --side SPEC --dir DIR -- COMMAND")
    problem = unrunnable(command)
    if problem:
        return _fail(f"ab record: {problem}; nothing was run")
    problem = unwritable(directory, "--dir")
    if problem:
        return _fail(f"ab record: {problem}")
    if args.max_restarts:
        # torch's agent otherwise hands every attempt's workers the store the rendezvous used, which
        # still holds the killed attempt's addresses: restarted ranks connect to dead peers.
        os.environ.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    log = job_log(directory)
    print(f"nccl-migrate ab record: side {side.text} into {directory}: {' '.join(command)}\n"
          f"nccl-migrate ab record: the job's output goes to {log}"
          + (f"; it is ended after {args.timeout:g} s" if args.timeout else ""), file=sys.stderr)
    run = record_side(side, command, args.nproc, args.timeout, directory, args.keep_tensors, launcher_arguments(args),
                      log)
    if run.failure:
        fault = explain(run, name_side=False)
        where = f"\nnccl-migrate ab record: {fault['text']}" if fault and fault["text"] != run.failure else ""
        print(f"nccl-migrate ab record: {run.failure}{where}\n{_failed_output(run, fault, 'the job')}", file=sys.stderr)
        return EXIT_FAILED
    incomplete = _incomplete(directory)
    if incomplete:
        print(f"nccl-migrate ab record: the job succeeded but its records are not whole: {'; '.join(incomplete)}",
              file=sys.stderr)
        return EXIT_FAILED
    print(f"nccl-migrate ab record: recorded in {directory} ({run.seconds:.1f} s); compare with "
          f"nccl-migrate ab compare DIR_A DIR_B", file=sys.stderr)
    return EXIT_IDENTICAL


def _incomplete(directory: str) -> list[str]:
    """Why ranks' records in ``directory`` are not whole (a write failed while the job ran); what
    else is wrong with them the comparison reports."""
    try:
        return incomplete_records(load(directory))
    except RecordError:
        return []


def judge(comparison: Comparison, allow_job_nondeterminism: bool) -> tuple[int, str]:
    """The exit status and the verdict: first of all, whether a backend is implicated, then whether
    the job took another path (a different call on each side, both calls named); never "identical"
    or "job nondeterminism" from values that were not compared, nor from different calls."""
    if comparison.compared == 0:
        return EXIT_FAILED, ("nothing compared: neither side recorded an op both could be judged by (did the job "
                             "issue any collective? with --shadow, see not_shadowed)")
    if comparison.identical:
        within = comparison.counts["within_tolerance"]
        return EXIT_IDENTICAL, f"identical within tolerance {comparison.tolerance}" if within else "identical"
    classes = comparison.classes
    if comparison.backend_implicated:
        return EXIT_DIVERGENT, (f"divergent, backend implicated: {classes['backend']} op(s) gave different outputs "
                                "from identical inputs on every rank")
    if comparison.path_differs:
        call = comparison.first_different_call
        where = (f": at rank {call['rank']}, group {call['group']}, seq {call['seq']} side a issued "
                 f"{call['calls']['a']}, side b {call['calls']['b']}") if call else ""
        return EXIT_DIVERGENT, (f"divergent, the job took a different path under each behaviour{where}; "
                                f"{classes['backend_dependent_path']} op(s) diverged at a different call, "
                                f"{classes['propagated']} more followed; no backend computed differently from "
                                "identical inputs")
    if classes["not_compared"]:
        return EXIT_FAILED, (f"values not compared: {classes['not_compared']} op(s) had their tensors on a CUDA device "
                             "on one side and in host memory on the other (the job places them by backend), so their "
                             "digests cannot match; rerun with --keep-tensors MAX_BYTES to compare values")
    if comparison.job_nondeterminism_only:
        inside = comparison.object_collectives
        where = (" (inside object collectives: " + ", ".join(sorted(inside)) + ")") if inside else ""
        verdict = (f"job nondeterminism only: {classes['job_nondeterminism']} op(s) had inputs the job made differ "
                   f"between runs{where}, {classes['propagated']} more followed from them; no backend computed "
                   "differently from identical inputs")
        return (EXIT_IDENTICAL if allow_job_nondeterminism else EXIT_DIVERGENT), verdict
    missing = comparison.counts["missing_in_a"] or comparison.counts["missing_in_b"]
    if comparison.counts["divergent"] and missing:
        return EXIT_DIVERGENT, "divergent, and ops missing on one side: no backend computed differently from identical inputs"
    if comparison.counts["divergent"]:  # every divergence followed from an op equal within tolerance
        return EXIT_DIVERGENT, (f"divergent: {comparison.counts['divergent']} op(s) followed from ops that differed "
                                "within tolerance; no backend computed differently from identical inputs")
    return EXIT_DIVERGENT, "ops missing on one side: one side ran fewer ops"


def compared_up_to_failure(failures: list[str], comparison: Comparison, failed: list[str]) -> str:
    """The verdict of a side that failed, compared as far as it got: the failure first, then
    whether the sides agreed on the ops both recorded."""
    counts = comparison.counts
    agreed = [f"{counts['identical']} identical"]
    if counts["within_tolerance"]:
        agreed.append(f"{counts['within_tolerance']} within tolerance")
    agreed.append(f"{counts['divergent']} divergent" + (" (backend implicated)" if comparison.backend_implicated else
                                                       " (the job took a different path)" if comparison.path_differs
                                                       else ""))
    text = "; ".join(failures) + "; ops compared up to there: " + ", ".join(agreed)
    for label in failed:  # the ops the other side recorded past the failure
        never = counts[f"missing_in_{label}"]
        if never:
            text += f"; {never} op(s) side {label} never reached"
    for label in sorted({"a", "b"} - set(failed)):
        missing = counts[f"missing_in_{label}"]
        if missing:
            text += f"; {missing} op(s) missing on side {label}"
    return text


def _compare_parser(outer: argparse.Namespace) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nccl-migrate ab compare",
        description="Compares two sides recorded before (`ab record`, the environment alone, or the a/ and b/ of "
                    "earlier `ab` runs) op by op and gives the verdict, as `ab` does. Exit 0 identical, 1 divergent "
                    "or missing ops, 2 a side failed or the records could not be compared.")
    parser.add_argument("dir_a", metavar="DIR_A", help="side a's records")
    parser.add_argument("dir_b", metavar="DIR_B", help="side b's records")
    parser.add_argument("--tolerance", type=float, help="accept |a-b| <= T*max(1,|a|) element-wise; needs kept "
                                                        "tensors (default 0: bitwise)")
    parser.add_argument("--allow-job-nondeterminism", action="store_true", default=None,
                        help="exit 0 when every divergence traces back to inputs the job itself made differ")
    parser.add_argument("--format", choices=["text", "json"],
                        help="the report on stdout: text for a person (default), or json (report.json's content)")
    parser.add_argument("--quiet", action="store_true", default=None,
                        help="no progress lines on stderr while a long comparison runs (they never go to stdout)")
    parser.add_argument("--html", metavar="PATH", help="also write the HTML report to PATH")
    parser.add_argument("--run-dir", metavar="DIR", help="where report.json and report.html go (default: not written)")
    # `ab [OPTIONS] compare ...` gave them before the word: they stand unless given again after it.
    parser.set_defaults(**{name: getattr(outer, name) for name in
                           ("tolerance", "allow_job_nondeterminism", "format", "quiet", "html", "run_dir")})
    return parser


def compare_recorded(outer: argparse.Namespace, argv: list[str]) -> int:
    """`ab compare DIR_A DIR_B`: two sides recorded before, compared here."""
    try:
        args = _compare_parser(outer).parse_args(argv)
    except SystemExit as exit_:
        return EXIT_IDENTICAL if exit_.code == 0 else EXIT_FAILED
    if args.tolerance < 0:
        return _fail(f"ab compare: --tolerance {args.tolerance}: give 0 or more")
    problem = unwritable(args.run_dir, "--run-dir") if args.run_dir else None
    if problem:
        return _fail(f"ab compare: {problem}")
    try:
        runs = [SideRun.recorded(directory, label) for directory, label in zip((args.dir_a, args.dir_b), "ab")]
    except RecordError as error:
        return _fail(str(error))
    return conclude(args, args.run_dir, runs, report_dir=args.run_dir)


def _read(runs: list[SideRun], shadow: bool):
    """Each side's records (a shadow run's one directory as its two sides) and what was not shadowed."""
    if shadow:
        a, b, not_shadowed = shadow_sides(load(runs[0].directory))
        return [a, b], not_shadowed
    return [load(run.directory) for run in runs], None


def conclude(args: argparse.Namespace, run_dir: str, runs: list[SideRun], shadow: bool = False,
             report_dir: str | None = "") -> int:
    """Compares the sides' records, writes report.json and report.html, prints the verdict."""
    report_dir = run_dir if report_dir == "" else report_dir
    jobs = runs[:1] if shadow else runs  # a shadow run's two sides are one job
    # A side that failed (a rank died, the job hung) is still compared as far as it got, when it
    # recorded anything: whether the sides agreed up to the failure is what its user asks next.
    faults = {run.side.label: fault for run in jobs if (fault := explain(run)) is not None}
    failures = [fault["text"] for fault in faults.values()]
    unreadable, left_out = [], {}
    data, not_shadowed, comparison, stats, ops = [None, None], None, None, SideStats(), OpMap()
    try:
        data, not_shadowed = _read(runs, shadow)
    except RecordError as error:
        unreadable.append(f"records that cannot be compared: {error}")
    if faults and not unreadable:
        for run, d in zip(runs, data):
            if (runs[0] if shadow else run).side.label in faults:
                left_out[run.side.label] = compare_up_to_failure(d)
    # A side that failed before recording anything leaves nothing to compare (its fault says so,
    # unless the launcher itself failed).
    empty = [run.side.label for run, d in zip(jobs, data) if run.side.label in faults and d is not None and not d.ranks()]
    unreadable += [f"side {label} recorded no op" for label in empty if faults[label]["kind"] == "failed"]
    unrecorded = [f"side {run.side.label}: {unrecorded_message(d, rank)}"
                  for run, d in zip(jobs, data) if not faults and not unreadable for rank in missing_ranks(d)]
    unrecorded += [f"side {run.side.label}: {why}" for run, d in zip(jobs, data) if not faults and not unreadable
                   for why in incomplete_records(d)]
    # Both sides of one behaviour compare identical and prove nothing: not a comparison as asked.
    unrecorded += [why for run, d in zip(jobs, data) if d is not None and not shadow
                   if (why := side_behaviour.overridden(run.side, d.reports))]
    if unreadable or unrecorded or empty:
        exit_code, verdict = EXIT_FAILED, "could not compare: " + "; ".join(failures + unreadable + unrecorded)
    else:
        try:
            progress = [] if args.quiet else [Progress(len(set(data[0].ranks()) | set(data[1].ranks())))]
            comparison = compare(data[0], data[1], args.tolerance, observers=[stats, ops, *progress])
            for observer in progress:
                observer.finished()
            exit_code, verdict = judge(comparison, args.allow_job_nondeterminism)
            if faults:
                exit_code, verdict = EXIT_FAILED, compared_up_to_failure(failures, comparison, sorted(faults))
        except RecordError as error:  # a damaged record met while streaming
            comparison, stats, ops = None, None, None
            exit_code, verdict = EXIT_FAILED, "could not compare: " + "; ".join(
                failures + [f"records that cannot be compared: {error}"])
        except ScratchError as error:
            comparison, stats, ops = None, None, None
            exit_code, verdict = EXIT_FAILED, "could not compare: " + "; ".join(failures + [str(error)])
    result = report.build(runs, data, comparison, exit_code, verdict, stats)
    for label, fault in faults.items():
        result["sides"][label]["fault"] = fault
    for label, count in left_out.items():
        result["sides"][label]["ops_cut_by_failure"] = count["count"]
    result["run_dir"] = report_dir or None  # where report.json went; None: not written
    if shadow:
        if not_shadowed and not_shadowed["first"]:
            not_shadowed["first"].pop("t", None)
        result.update(mode="shadow", not_shadowed=not_shadowed)
        if comparison is not None and not_shadowed and not_shadowed["count"]:  # the verdict covers the shadowed only
            result["verdict"] = verdict = (f"{verdict}; {not_shadowed['count']} op(s) not shadowed, so not compared "
                                           f"(first: {not_shadowed['first']['reason']})")
    page = render_html(result, dict(zip("ab", data)), stats, ops if comparison else None)
    writes = [(os.path.join(report_dir, "report.json"), json.dumps(result, indent=1)),
              (os.path.join(report_dir, "report.html"), page)] if report_dir else []
    writes += [(args.html, page)] if args.html else []
    for path, text in writes:
        try:
            write_whole(path, text)
        except OSError as error:  # the verdict is still printed below; the exit status says a report is missing
            # Named by the path asked for: the error's own file is write_whole's temporary one.
            print(f"nccl-migrate ab: the report could not be written: {path}: {error.strerror or error}",
                  file=sys.stderr)
            exit_code = result["exit_code"] = EXIT_FAILED
            break
    for run in jobs:  # the text report quotes a failed rank's own output; stderr has it for --format json
        fault = faults.get(run.side.label)
        if run.failure and run.log and (args.format == "json" or not (fault and fault.get("own_output"))):
            print(_failed_output(run, fault, f"side {run.side.label}"), file=sys.stderr)
    print(json.dumps(result, indent=1) if args.format == "json" else report.render_text(result))
    if report_dir:
        print(f"nccl-migrate ab: records, the job's output and report.html are in {report_dir}", file=sys.stderr)
    else:
        print("nccl-migrate ab: no report written; give --run-dir DIR to keep report.json and report.html "
              "(or --html PATH for the page alone)", file=sys.stderr)
    return exit_code
