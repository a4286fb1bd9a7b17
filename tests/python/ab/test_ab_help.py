"""What `nccl-migrate ab`, `ab record` and `ab compare --help` say: the words a user reads to
choose options, at a fixed terminal width."""

import argparse

import pytest
from nccl_migrate import cli
from nccl_migrate.ab import command

# The SPEC epilog both `ab` and `ab record` end with, as a user reads it.
SPEC_TEXT = (
        'SPEC, one side: items joined by commas, applied left to right (later ones win):\n'
        '\n'
        '  legacy|rewritten|lazy[:toolkit|:torch|:auto]\n'
        '      a behaviour, as an unmodified job gets it (backend "nccl", and torch\n'
        "      2.15's TORCH_DIST_USE_NCCL2; lazy also forces nccl-lazy), served by the\n"
        "      toolkit's backends (:toolkit, the default), torch's own (:torch), or\n"
        "      torch's where this torch and machine can run it, else the toolkit's (:auto)\n"
        '  backend=NAME\n'
        "      the backend init_process_group gets instead of the job's (gloo,\n"
        "      nccl-legacy, migrate-nccl2, ...); torch's NCCL names run torch's own\n"
        '  KEY=VALUE\n'
        '      any environment variable of the job (KEY= sets it empty)\n'
        '\n'
        'Quote an item that holds a comma, CSV style. Examples:\n'
        '\n'
        "  --b 'rewritten,NCCL_MIGRATE_EAGER_SUBGROUPS=1'\n"
        '  --a backend=gloo --b backend=migrate-nccl2\n'
        '  --a \'"backend=cpu:gloo,cuda:nccl"\'\n'
)

HELP = {
    'ab': (
        'usage: nccl-migrate ab [OPTIONS] [--a SPEC] [--b SPEC] [--shadow] -- COMMAND [ARGS...]\n'
        '       nccl-migrate ab record --side SPEC --dir DIR [OPTIONS] -- COMMAND [ARGS...]\n'
        '       nccl-migrate ab compare DIR_A DIR_B [OPTIONS]\n'
        '\n'
        'Runs COMMAND once per side, changing only environment variables, records every collective and p2p\n'
        'op on every rank (those DDP issues from C++ included), and compares the runs op by op; with\n'
        '--shadow, runs it once and executes every op on both backends. Writes report.json and report.html\n'
        'into the run directory (docs/ab.md). `nccl-migrate ab record --side SPEC --dir DIR -- COMMAND`\n'
        'records one side (on every node of a multi-node job; `ab record --help`), `nccl-migrate ab compare\n'
        'DIR_A DIR_B` compares two recorded sides (`ab compare --help`). Exit 0 identical, 1 divergent or\n'
        'missing ops, 2 a side failed or could not be compared.\n'
        '\n'
        'positional arguments:\n'
        "  COMMAND               after --, the job: a .py script (run as --nproc ranks through torch's\n"
        '                        launcher, with this Python), a program run as each rank, or a launch\n'
        '                        command that starts the ranks itself (torchrun, srun, a shell script), run\n'
        '                        once as given\n'
        '\n'
        'options:\n'
        '  -h, --help            show this help message and exit\n'
        '  --a SPEC              side a (SPEC below; default: legacy); with --shadow, the primary, whose\n'
        '                        outputs the job sees\n'
        '  --b SPEC              side b (SPEC below; default: rewritten); with --shadow, the shadow: a\n'
        '                        behaviour or backend=NAME only\n'
        "  --shadow              one run: every op the job issues (from Python, and DDP's from C++) also\n"
        "                        runs on a shadow group with side b's backend, on clones of its tensors,\n"
        '                        and is compared live (for jobs too costly to run twice)\n'
        '  --nproc N             ranks per side for a script (default 2)\n'
        '  --timeout TIMEOUT     seconds each side may run (default 600)\n'
        '  --tolerance TOLERANCE\n'
        '                        accept |a-b| <= T*max(1,|a|) element-wise; needs --keep-tensors, or\n'
        '                        --shadow (default 0: bitwise)\n'
        '  --keep-tensors MAX_BYTES\n'
        '                        keep whole tensors of ops up to MAX_BYTES so errors are measured (default\n'
        '                        0)\n'
        '  --allow-job-nondeterminism\n'
        '                        exit 0 when every divergence traces back to inputs the job itself made\n'
        '                        differ between runs (per-run ids in object collectives, unseeded\n'
        '                        randomness) and no backend computed differently from identical inputs\n'
        "  --format {text,json}  the report on stdout: text for a person (default), or json (report.json's\n"
        '                        content)\n'
        '  --quiet               no progress lines on stderr while a long comparison runs\n'
        '  --html PATH           also write the HTML report (plots included) to PATH; it is always written\n'
        '                        to the run directory as report.html\n'
        "  --run-dir DIR         where records and the job's output go (default: a new temporary folder)\n"
        '\n'
        + SPEC_TEXT
    ),
    'ab compare': (
        'usage: nccl-migrate ab compare [-h] [--tolerance TOLERANCE] [--allow-job-nondeterminism]\n'
        '                               [--format {text,json}] [--quiet] [--html PATH] [--run-dir DIR]\n'
        '                               DIR_A DIR_B\n'
        '\n'
        'Compares two sides recorded before (`ab record`, the environment alone, or the a/ and b/ of\n'
        'earlier `ab` runs) op by op and gives the verdict, as `ab` does. Exit 0 identical, 1 divergent or\n'
        'missing ops, 2 a side failed or the records could not be compared.\n'
        '\n'
        'positional arguments:\n'
        "  DIR_A                 side a's records\n"
        "  DIR_B                 side b's records\n"
        '\n'
        'options:\n'
        '  -h, --help            show this help message and exit\n'
        '  --tolerance TOLERANCE\n'
        '                        accept |a-b| <= T*max(1,|a|) element-wise; needs kept tensors (default 0:\n'
        '                        bitwise)\n'
        '  --allow-job-nondeterminism\n'
        '                        exit 0 when every divergence traces back to inputs the job itself made\n'
        '                        differ\n'
        "  --format {text,json}  the report on stdout: text for a person (default), or json (report.json's\n"
        '                        content)\n'
        '  --quiet               no progress lines on stderr while a long comparison runs (they never go to\n'
        '                        stdout)\n'
        '  --html PATH           also write the HTML report to PATH\n'
        '  --run-dir DIR         where report.json and report.html go (default: not written)\n'
    ),
    'ab record': (
        'usage: nccl-migrate ab record --side SPEC --dir DIR [OPTIONS] -- COMMAND [ARGS...]\n'
        '\n'
        "Runs COMMAND as one side of an A/B run, recording every rank's ops into DIR (a folder all nodes\n"
        'share); run it on every node of the side, then `nccl-migrate ab compare DIR_A DIR_B`. A launch\n'
        'command (torchrun ..., srun python job.py, a shell script, python -m torch.distributed.run ...)\n'
        'runs once, as given: it starts the ranks, and the launcher options do not apply; any other COMMAND\n'
        "(job.py ARGS, python job.py, a program) is one rank, started through torch's launcher (--nproc per\n"
        'node, --nnodes and --rdzv-* for many nodes). With --print-env, prints the environment that records\n'
        'a job instead, for jobs started by SLURM or Kubernetes. Exit 0 when the job succeeded, 2\n'
        'otherwise.\n'
        '\n'
        'positional arguments:\n'
        '  COMMAND               after --, the job: a .py script or a program (one rank, run through\n'
        "                        torch's launcher, --nproc ranks per node) or a launch command, run once as\n"
        '                        given (torchrun ..., srun ..., a shell script)\n'
        '\n'
        'options:\n'
        '  -h, --help            show this help message and exit\n'
        '  --side SPEC           the side recorded (SPEC below)\n'
        "  --dir DIR             where this side's records go (empty, or this run's own)\n"
        '  --nproc N             ranks per node for a .py COMMAND (default 2)\n'
        '  --timeout TIMEOUT     seconds the job may run before it is ended (default: no limit, as for any\n'
        '                        training job)\n'
        '  --keep-tensors MAX_BYTES\n'
        '                        keep whole tensors of ops up to MAX_BYTES so a comparison measures errors\n'
        '                        (default 0)\n'
        "  --print-env           print the job's environment (shell exports) instead of running anything\n"
        "  --nnodes NNODES       torchrun's --nnodes (N or MIN:MAX); with --rdzv-endpoint, one command per\n"
        '                        node\n'
        '  --node-rank NODE_RANK\n'
        "                        torchrun's --node-rank\n"
        '  --rdzv-backend RDZV_BACKEND\n'
        "                        torchrun's --rdzv-backend (default c10d with --rdzv-endpoint)\n"
        '  --rdzv-endpoint RDZV_ENDPOINT\n'
        "                        torchrun's --rdzv-endpoint HOST:PORT (default: a local standalone\n"
        '                        rendezvous)\n'
        "  --rdzv-id RDZV_ID     torchrun's --rdzv-id (the same on every node)\n"
        '  --max-restarts MAX_RESTARTS\n'
        "                        torchrun's --max-restarts (default 0)\n"
        '\n'
        + SPEC_TEXT
    ),
}


def _parsers():
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    # `ab compare` shows the defaults `ab` gave before the word compare: here, ab's own.
    outer = sub.choices["ab"].parse_args(["--", "job.py"])
    return {"ab": sub.choices["ab"], "ab record": command._record_parser(), "ab compare": command._compare_parser(outer)}


@pytest.mark.parametrize("name", sorted(HELP))
def test_each_ab_commands_help(monkeypatch, name):
    monkeypatch.setenv("COLUMNS", "100")
    assert _parsers()[name].format_help() == HELP[name]


def test_the_command_list_says_what_ab_does(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert "    ab                compare a job's collectives under two backends" in cli.build_parser().format_help().splitlines()


@pytest.mark.parametrize("name", sorted(HELP))
def test_every_option_says_what_it_does_and_the_usage_shows_where_the_command_goes(monkeypatch, name):
    monkeypatch.setenv("COLUMNS", "100")
    parser = _parsers()[name]
    undescribed = [action.option_strings or action.dest for action in parser._actions if not action.help]
    assert undescribed == [], undescribed
    usage = parser.format_usage()
    assert "..." not in usage.replace("[ARGS...]", "")  # argparse's word for a remainder, which says nothing
    if name != "ab compare":
        assert "-- COMMAND [ARGS...]" in usage


def test_the_help_says_what_a_spec_is_in_forms_the_parser_takes():
    from nccl_migrate.ab.spec import BEHAVIOURS, IMPLEMENTATIONS, SPEC_HELP, parse

    text = HELP["ab"]
    assert text.index("SPEC, one side: items joined by commas") > text.index("--run-dir DIR")
    for behaviour in BEHAVIOURS:
        for implementation in IMPLEMENTATIONS:
            assert parse("a", f"{behaviour}:{implementation}").env["NCCL_MIGRATE_IMPL"] == implementation
    for form in ("backend=NAME", "KEY=VALUE", f"{'|'.join(BEHAVIOURS)}[:{'|:'.join(IMPLEMENTATIONS)}]"):
        assert f"\n  {form}\n" in SPEC_HELP
    examples = [line.split() for line in SPEC_HELP.split("Examples:\n\n")[1].splitlines()]
    for words in examples:  # each example's SPECs parse (the shell's quotes taken off)
        for option, spec in zip(words[::2], words[1::2]):
            assert option in ("--a", "--b")
            parse(option[2:], spec.strip("'"))
