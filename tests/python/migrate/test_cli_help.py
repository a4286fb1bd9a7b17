"""What `nccl-migrate run`, `doctor` and `fr --help` say: the words a user reads to choose options,
at a fixed terminal width."""

import pytest

from nccl_migrate import cli


HELP = {
    'run': (
        'usage: nccl-migrate run [-h] [--nproc N] [--nnodes NNODES] [--node-rank NODE_RANK]\n'
        '                        [--rdzv-backend RDZV_BACKEND] [--rdzv-endpoint RDZV_ENDPOINT]\n'
        '                        [--rdzv-id RDZV_ID] [--max-restarts MAX_RESTARTS] [--timeout TIMEOUT]\n'
        '                        [--run-dir RUN_DIR] [--no-activate]\n'
        '                        ...\n'
        '\n'
        "Runs COMMAND as N ranks per node through torch's own launcher (torchrun's elastic agent, in this\n"
        "process): torchrun's environment per rank, a local rendezvous or the multi-node one given by\n"
        '--nnodes/--rdzv-endpoint; a failing rank ends the others. A launch command (torchrun, srun, a\n'
        'shell script) runs once, as given. What the job writes for itself (reports, flight-recorder dumps,\n'
        'logs) goes to the run directory.\n'
        '\n'
        'positional arguments:\n'
        '  command               -- COMMAND [ARGS...] (a .py file runs with this Python)\n'
        '\n'
        'options:\n'
        '  -h, --help            show this help message and exit\n'
        '  --nproc N             ranks per node for a .py job or a program (default 2)\n'
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
        '  --timeout TIMEOUT     seconds before the whole job is ended (default 600)\n'
        "  --run-dir RUN_DIR     where the job's own files go: the toolkit's reports (report_{rank}.json,\n"
        "                        unless NCCL_MIGRATE_REPORT names a file), the flight recorder's dumps\n"
        '                        (fr/comm_lib_trace_rank_<rank>; a TORCH_FR_DUMP_TEMP_FILE of yours is\n'
        "                        replaced) and each rank's log as torch's launcher keeps it (logs/);\n"
        '                        default: a new temporary folder, named at the end\n'
        '  --no-activate         do not activate the shim in the job (torch then behaves as without nccl-\n'
        '                        migrate)\n'
    ),
    'doctor': (
        'usage: nccl-migrate doctor [-h] [--format {text,json}]\n'
        '\n'
        'options:\n'
        '  -h, --help            show this help message and exit\n'
        '  --format {text,json}\n'
    ),
    'fr': (
        'usage: nccl-migrate fr [-h] [--format {text,json}] DUMP [DUMP ...]\n'
        '\n'
        "Reads flight-recorder dumps (torch's format, the toolkit's and torch's own) and shows per group\n"
        'the last collective each rank enqueued and completed, and every op not completed. Exit 1 when some\n'
        "op was not completed. For the cross-rank match analysis run torch's analyzer on the same files:\n"
        'torchfrtrace DIR -p PREFIX.\n'
        '\n'
        'positional arguments:\n'
        '  DUMP                  dump files, one per rank, or a directory: the dumps in it and below (a run\n'
        '                        directory of `run` or `ab`)\n'
        '\n'
        'options:\n'
        '  -h, --help            show this help message and exit\n'
        '  --format {text,json}\n'
    ),
}


def _subcommands():
    return next(a for a in cli.build_parser()._actions if a.__class__.__name__ == "_SubParsersAction").choices


@pytest.mark.parametrize("name", sorted(HELP))
def test_each_commands_help(monkeypatch, name):
    monkeypatch.setenv("COLUMNS", "100")
    assert _subcommands()[name].format_help() == HELP[name]


def test_the_command_list_says_what_each_does(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    listed = cli.build_parser().format_help().splitlines()
    for line in ["    run               run a job's ranks with torch's launcher and the toolkit's backends", '    doctor            torch, NCCL, GPUs and what each backend name resolves to here', '    fr                summarize flight-recorder dumps, rank by rank']:
        assert line in listed, line
