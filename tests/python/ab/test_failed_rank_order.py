"""Which failed rank the launcher names as the cause, from torch's per-rank exit codes: a side's
report says "rank R died by SIGKILL" about the rank that did, never about a survivor torch's agent
ended (SIGTERM, or SIGKILL past its grace) or one whose collective failed with the dead peer."""

import signal

from nccl_migrate.launch import AGENT_GRACE_SECONDS, failed_ranks

KILL, TERM = -signal.SIGKILL, -signal.SIGTERM


def order(failures):
    return [(r.rank, r.returncode) for r in failed_ranks(failures)]


def test_the_killed_rank_comes_before_the_ranks_the_agent_ended():
    assert order({0: (TERM, 100), 1: (TERM, 100), 2: (KILL, 100)}) == [(2, KILL), (0, None), (1, None)]


def test_a_death_by_signal_comes_before_survivors_whose_collective_failed_with_it():
    # Survivors of a dead peer get "Connection closed by peer" and exit with a status of their own.
    assert order({0: (1, 100), 1: (TERM, 100), 2: (KILL, 100)}) == [(2, KILL), (0, 1), (1, None)]


def test_a_rank_killed_past_the_agents_grace_is_not_the_cause():
    late = 100 + AGENT_GRACE_SECONDS
    assert order({1: (3, 100), 0: (KILL, late)}) == [(1, 3), (0, None)]


def test_ranks_all_ended_by_sigterm_are_all_named_earliest_first():
    # Nothing tells a rank a scheduler ended from the ones the agent then ended: all stay named.
    assert order({1: (TERM, 101), 0: (TERM, 100)}) == [(0, TERM), (1, TERM)]


def test_the_grace_is_counted_in_torchs_whole_seconds():
    # torch stamps exits in whole seconds, so a SIGKILL one stamp short of the grace may still be
    # the agent's (its SIGTERM and SIGKILL straddle a second); two short is not.
    one_short = 100 + AGENT_GRACE_SECONDS - 1
    assert order({1: (3, 100), 0: (KILL, one_short)}) == [(1, 3), (0, None)]
    assert order({1: (3, 100), 0: (KILL, one_short - 1)})[0] == (0, KILL)
