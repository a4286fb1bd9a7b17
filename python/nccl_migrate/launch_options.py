"""The launch options `run`, `ab` and `ab record` share (torchrun's multi-node options, --nproc,
--timeout and the like): how they are declared, checked and passed on, in one module both
commands import."""

from __future__ import annotations

import argparse

DEFAULT_RANKS_PER_NODE = 2


def add_nproc_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """--nproc, left None when not given: whether it was given decides whether it may apply to a
    launch command, and its value is set once that is known (settle_launch_options)."""
    parser.add_argument("--nproc", type=int, default=None, metavar="N",
                        help=f"{help_text} (default {DEFAULT_RANKS_PER_NODE})")


def settle_launch_options(args: argparse.Namespace) -> list[str]:
    """The launch options the user gave (flags, not values; --nproc among them when given), read
    before the ones not given are set to their defaults, which this then does: one call, so the
    defaults can never be mistaken for options given."""
    given = (["--nproc"] if args.nproc is not None else []) + launcher_arguments(args)[::2]
    if args.nproc is None:
        args.nproc = DEFAULT_RANKS_PER_NODE
    return given


def launcher_arguments(args: argparse.Namespace) -> list[str]:
    """torchrun's multi-node options, passed on as given (none for a command without them: `ab`)."""
    pairs = (("--nnodes", "nnodes"), ("--node-rank", "node_rank"), ("--rdzv-backend", "rdzv_backend"),
             ("--rdzv-endpoint", "rdzv_endpoint"), ("--rdzv-id", "rdzv_id"), ("--max-restarts", "max_restarts"))
    given = ((flag, getattr(args, name, None)) for flag, name in pairs)
    return [item for flag, value in given if value is not None for item in (flag, str(value))]


def add_launcher_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nnodes", help="torchrun's --nnodes (N or MIN:MAX); with --rdzv-endpoint, one command per node")
    parser.add_argument("--node-rank", type=int, help="torchrun's --node-rank")
    parser.add_argument("--rdzv-backend", help="torchrun's --rdzv-backend (default c10d with --rdzv-endpoint)")
    parser.add_argument("--rdzv-endpoint", help="torchrun's --rdzv-endpoint HOST:PORT (default: a local standalone "
                                                "rendezvous)")
    parser.add_argument("--rdzv-id", help="torchrun's --rdzv-id (the same on every node)")
    parser.add_argument("--max-restarts", type=int, help="torchrun's --max-restarts (default 0)")


def launch_option_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the launch options `run`, `ab` and `ab record` share, or None: one check
    for all three, before anything starts."""
    if args.nproc is not None and args.nproc < 1:
        return f"--nproc {args.nproc}: give at least 1 rank per node"
    if args.timeout is not None and not args.timeout > 0:
        return f"--timeout {args.timeout}: give a positive number of seconds" + (
            " (or leave it out for no limit)" if getattr(args, "timeout_optional", False) else "")
    if getattr(args, "max_restarts", None) is not None and args.max_restarts < 0:
        return f"--max-restarts {args.max_restarts}: give 0 or more"
    if getattr(args, "keep_tensors", 0) < 0:
        return f"--keep-tensors {args.keep_tensors}: give a number of bytes, 0 or more"
    if getattr(args, "tolerance", 0.0) < 0:
        return f"--tolerance {args.tolerance}: give 0 or more"
    return None
