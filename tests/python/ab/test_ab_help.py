"""What `nccl-migrate ab`, `ab record` and `ab compare --help` say: the words a user reads to
choose options, at a fixed terminal width."""

import argparse

import pytest
from nccl_migrate import cli
from nccl_migrate.ab import command

HELP = {
    'ab': (
        'usage: nccl-migrate ab [-h] [--a SPEC] [--b SPEC] [--shadow] [--nproc NPROC] [--timeout TIMEOUT]\n'
        '                       [--tolerance TOLERANCE] [--keep-tensors MAX_BYTES]\n'
        '                       [--allow-job-nondeterminism] [--format {text,json}] [--quiet] [--html PATH]\n'
        '                       [--run-dir RUN_DIR]\n'
        '                       ...\n'
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
        '  command               -- COMMAND [ARGS...] (a .py file runs with this Python)\n'
        '\n'
        'options:\n'
        '  -h, --help            show this help message and exit\n'
        '  --a SPEC              side a (default: legacy); with --shadow, the primary, whose outputs the\n'
        '                        job sees\n'
        '  --b SPEC              side b (default: rewritten); with --shadow, the shadow: a behaviour or\n'
        '                        backend=NAME only\n'
        "  --shadow              one run: every op the job issues (from Python, and DDP's from C++) also\n"
        "                        runs on a shadow group with side b's backend, on clones of its tensors,\n"
        '                        and is compared live (for jobs too costly to run twice)\n'
        '  --nproc NPROC         ranks per side for a script (default 2)\n'
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
        '  --format {text,json}\n'
        '  --quiet               no progress lines on stderr while a long comparison runs\n'
        '  --html PATH           also write the HTML report (plots included) to PATH; it is always written\n'
        '                        to the run directory as report.html\n'
        "  --run-dir RUN_DIR     where records and the job's output go (default: a new temporary folder)\n"
    ),
    'ab record': (
        'usage: nccl-migrate ab record [-h] --side SPEC --dir DIR [--nproc NPROC] [--timeout TIMEOUT]\n'
        '                              [--keep-tensors MAX_BYTES] [--print-env] [--nnodes NNODES]\n'
        '                              [--node-rank NODE_RANK] [--rdzv-backend RDZV_BACKEND]\n'
        '                              [--rdzv-endpoint RDZV_ENDPOINT] [--rdzv-id RDZV_ID]\n'
        '                              [--max-restarts MAX_RESTARTS]\n'
        '                              ...\n'
        '\n'
        "Runs COMMAND as one side of an A/B run, recording every rank's ops into DIR (a folder all nodes\n"
        'share); run it on every node of the side, then `nccl-migrate ab compare DIR_A DIR_B`. A .py\n'
        "COMMAND (job.py ARGS) runs through torch's launcher (--nproc per node, --nnodes and --rdzv-* for\n"
        'many nodes); any other COMMAND is a launch command (torchrun ..., srun python job.py, a shell\n'
        'script, python -m ...) and runs once, as given: it starts the ranks, and the launcher options do\n'
        'not apply. With --print-env, prints the environment that records a job instead, for jobs started\n'
        'by SLURM or Kubernetes. Exit 0 when the job succeeded, 2 otherwise.\n'
        '\n'
        'positional arguments:\n'
        '  command               -- COMMAND [ARGS...]\n'
        '\n'
        'options:\n'
        '  -h, --help            show this help message and exit\n'
        '  --side SPEC           the side: legacy, rewritten, backend=NAME, KEY=VALUE, ... (as --a/--b)\n'
        "  --dir DIR             where this side's records go (empty, or this run's own)\n"
        '  --nproc NPROC         ranks per node for a .py COMMAND (default 2)\n'
        '  --timeout TIMEOUT     seconds the job may run before it is ended (default: no limit, as for any\n'
        '                        training job)\n'
        '  --keep-tensors MAX_BYTES\n'
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
    ),
    'ab compare': (
        'usage: nccl-migrate ab compare [-h] [--tolerance TOLERANCE] [--allow-job-nondeterminism]\n'
        '                               [--format {text,json}] [--quiet] [--html PATH] [--run-dir RUN_DIR]\n'
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
        '  --format {text,json}\n'
        '  --quiet               no progress lines on stderr while a long comparison runs (they never go to\n'
        '                        stdout)\n'
        '  --html PATH           also write the HTML report to PATH\n'
        '  --run-dir RUN_DIR     where report.json and report.html go (default: not written)\n'
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
