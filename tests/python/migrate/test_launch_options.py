"""The launch options `run`, `ab` and `ab record` share, as a user meets them: each is torchrun's
own flag, typed as torchrun types it, and its help says so and what it defaults to."""

import argparse

import pytest
from nccl_migrate import launch_options


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="p")
    launch_options.add_launcher_options(parser)
    return parser


def test_each_option_says_it_is_torchruns_and_what_it_defaults_to():
    helps = {action.option_strings[0]: action.help for action in _parser()._actions if action.option_strings}
    assert helps == {
        "-h": "show this help message and exit",
        "--nnodes": "torchrun's --nnodes (N or MIN:MAX); with --rdzv-endpoint, one command per node",
        "--node-rank": "torchrun's --node-rank",
        "--rdzv-backend": "torchrun's --rdzv-backend (default c10d with --rdzv-endpoint)",
        "--rdzv-endpoint": "torchrun's --rdzv-endpoint HOST:PORT (default: a local standalone rendezvous)",
        "--rdzv-id": "torchrun's --rdzv-id (the same on every node)",
        "--max-restarts": "torchrun's --max-restarts (default 0)",
    }


def test_the_options_are_typed_as_torchrun_types_them_and_absent_unless_given():
    args = _parser().parse_args(["--nnodes", "1:2", "--node-rank", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                 "h:29500", "--rdzv-id", "7", "--max-restarts", "2"])
    assert vars(args) == {"nnodes": "1:2", "node_rank": 1, "rdzv_backend": "c10d", "rdzv_endpoint": "h:29500",
                          "rdzv_id": "7", "max_restarts": 2}
    assert set(vars(_parser().parse_args([])).values()) == {None}
    for flag in ("--node-rank", "--max-restarts"):
        with pytest.raises(SystemExit):
            _parser().parse_args([flag, "one"])
