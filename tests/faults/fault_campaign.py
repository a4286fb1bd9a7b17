"""Fault-injection campaign: real 3- and 4-rank worlds of each behaviour (legacy, rewritten,
lazy) on each transport CI runs (Gloo on CPU-bound ranks; the NCCL communicator over the
simulated device, in blocking mode, and, for the faults the mode decides, in nonblocking mode:
"sim-nb"), a mixed workload (a DDP training step and one-rank groups among its ops), one fault per run at
a random op and rank, and every survivor judged: raised DistBackendError within timeout + 2 s,
abort hook ran, flight-recorder dump within 1 s and readable by torchfrtrace, shrink_group
without the faulty rank working; no process dead by a signal, no hang (each run has an outer
deadline). A slow rank (delayed below the timeout) must fail nothing. In blocking mode a survivor
whose call itself was held in NCCL's connect by a stopped peer until it resumed is counted apart
(the limit docs/backends.md states), never as raised in time. Prints the table kept in
docs/backends.md.

A program, not a timed test: tests/python/backends/test_fault_campaign.py runs a seeded subset.

    .venv/bin/python tests/faults/fault_campaign.py --runs 50 --jobs 2     # the full campaign
    .venv/bin/python tests/faults/fault_campaign.py --runs 2 --fault kill --transport gloo --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# This folder and the test suite's worlds (tests/python/worlds.py) first; tools/ (_tree_package.py)
# appended, so it shadows nothing.
sys.path[:0] = [HERE, os.path.join(ROOT, "tests", "python")]
sys.path.append(os.path.join(ROOT, "tools"))
from _tree_package import use_tree_package

use_tree_package()

from fault_ranks import RankPlan, run_rank, workload
from fault_verdicts import DISRUPTIVE, RankOutcome, held_until, judge, percentile

BEHAVIOURS = {"legacy": "migrate-legacy", "rewritten": "migrate-nccl2", "lazy": "migrate-lazy"}
# Each transport's world kind and the environment its ranks add. "sim-nb" is the simulated
# device with NCCL's communicators in nonblocking mode (NCCL_COMM_BLOCKING=0, read as NCCL reads
# it), where NCCL's own thread connects and the group's timeout bounds the caller.
TRANSPORTS = {"gloo": "cpu-bound", "sim": "sim-bound", "sim-nb": "sim-bound"}
TRANSPORT_ENV = {"sim-nb": {"NCCL_COMM_BLOCKING": "0"}}
NONBLOCKING_TRANSPORTS = ("sim-nb",)
# Where a call itself may block past the timeout (NCCL's connect on first use, in blocking mode).
BLOCKING_CONNECT = ("sim",)
FAULTS = ("kill", "kill_store", "stop", "slow", "sim_stall", "sim_error")
SIM_ONLY = ("sim_stall", "sim_error")
# The faults whose outcome the communicator's mode decides: the rest run blocking only.
NONBLOCKING_FAULTS = ("kill", "stop", "sim_error")
OPS_PER_RUN = 16
# A stopped rank is resumed this long after the survivors' timeout: they must have raised by then.
RESUME_AFTER_TIMEOUT_S = 1.5
# In nonblocking mode no call may be held: it returns by the timeout, or by a member meeting's
# give-up a second after it at the latest (docs/backends.md), well before the stopped rank resumes.
NONBLOCKING_CALL_PAST_TIMEOUT_S = 1.2


@dataclass(frozen=True)
class Run:
    fault: str
    behaviour: str
    transport: str
    index: int
    seed: int
    timeout_s: float
    number: int = 0  # its place in the whole campaign: picks its ports


def plan_rows(faults, behaviours, transports):
    def runs(fault, transport):
        if transport == "sim-nb":
            return fault in NONBLOCKING_FAULTS
        return transport == "sim" or fault not in SIM_ONLY
    return [(f, b, t) for f in faults for t in transports for b in behaviours if runs(f, t)]


# Each run's two ports (its store, and the store a kill_store run's survivors re-form on): a
# pair of its own below Linux's ephemeral range (32768 up). Ports the kernel hands out (bind to
# port 0, a client's outgoing side) could go to another run between being picked and being
# bound, seconds later for the re-formed store: two runs at once then met on one store.
PORT_BASE, PORT_PAIRS = 20000, 5000


# Where this campaign's pairs start: another campaign just before (its ports in TIME_WAIT) most
# likely used others.
PORT_OFFSET = os.getpid() % PORT_PAIRS


def _bindable(port: int) -> bool:
    """Whether a TCPStore could listen on the port now: it binds the IPv6 wildcard, dual-stack."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            s.bind(("::", port))
        return True
    except OSError:
        return False


def _run_ports(number: int) -> tuple[int, int]:
    """The first free pair from the run's own place on: free unless something outside the
    campaign holds it, which the bind check skips."""
    for step in range(PORT_PAIRS):
        first = PORT_BASE + 2 * ((PORT_OFFSET + number + step) % PORT_PAIRS)
        if _bindable(first) and _bindable(first + 1):
            return first, first + 1
    raise RuntimeError(f"no free port pair in {PORT_BASE}-{PORT_BASE + 2 * PORT_PAIRS}")


def _world_collectives(ops: tuple[str, ...] | list[str]) -> int:
    """How many NCCL collectives the workload surely issues on the world's communicator: one per
    all_reduce, broadcast, all_gather, reduce_scatter and DDP step (its gradients' bucket; the
    first step's model building adds more), two per coalesced batch (all_to_all and the rings
    are sends and receives; the subgroup's ops have a communicator of their own)."""
    return sum(1 for op in ops if op in ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "ddp_step")) + \
        2 * sum(1 for op in ops if op == "coalesced")


def _rank_plans(run: Run, directory: str) -> tuple[list[RankPlan], dict[int, dict[str, str]]]:
    """Every rank's plan and the faulty rank's extra environment, drawn from the run's seed."""
    rng = random.Random(run.seed)
    world = rng.choice((3, 4))
    ops = workload(rng.randrange(1 << 30), OPS_PER_RUN)
    # Rank 0 hosts the store: its death is its own fault (kill_store); the others strike another
    # rank (a faulty rank leaves, and with it would go the store). A slow rank may be any.
    faulty = 0 if run.fault == "kill_store" else rng.randrange(0 if run.fault == "slow" else 1, world)
    fault_at = rng.randrange(1, len(ops) - 1)  # an op follows that every rank needs
    delay = rng.uniform(0.0, 0.02)
    if run.fault == "slow":
        delay = rng.uniform(0.2, 0.6) * run.timeout_s
    extra: dict[int, dict[str, str]] = {}
    # The simulated device counts its faults in collectives of one communicator (1-based): n is
    # drawn among those the faulty rank surely runs on the world's (a larger n would never strike).
    last = min(8, max(2, _world_collectives(ops)))
    if run.fault == "sim_stall":
        fault_at = rng.randrange(2, last + 1)
        extra[faulty] = {"NCCL_MIGRATE_SIM_STALL_AT": str(fault_at)}
    elif run.fault == "sim_error":
        fault_at = rng.randrange(2, last + 1)
        extra[faulty] = {"NCCL_MIGRATE_SIM_ASYNC_ERROR_AT": str(fault_at)}
    plans = [RankPlan(r, world, BEHAVIOURS[run.behaviour], TRANSPORTS[run.transport], run.timeout_s, ops, run.fault,
                      faulty, fault_at, delay, directory) for r in range(world)]
    return plans, extra


def _rank_process(plan: RankPlan, env: dict[str, str]) -> int:
    """Forks one rank; its output goes to rank<N>.log in the run's directory."""
    pid = os.fork()
    if pid:
        return pid
    try:
        # A stopped rank whose process group is orphaned (the shell that started the campaign
        # exited) gets SIGHUP from the kernel: a campaign run under nohup must not lose it so.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        log = os.open(os.path.join(plan.directory, f"rank{plan.rank}.log"), os.O_WRONLY | os.O_CREAT, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.environ.update(env)
        run_rank(plan)
    except BaseException:  # noqa: BLE001 - a failure outside the workload is a finding, not a lost run
        with contextlib.suppress(Exception):
            path = os.path.join(plan.directory, f"result{plan.rank}.json")
            with open(path, "w") as out:
                json.dump({"rank": plan.rank, "crash": traceback.format_exc(limit=6)[-1500:]}, out)
        os._exit(3)
    os._exit(4)  # run_rank ends the process itself


def _watch(pids: list[int], deadline: float, resume_after: float | None, directory: str) -> list[RankOutcome]:
    """Waits for every rank; resumes a stopped one `resume_after` seconds after its fault struck;
    kills whatever is alive at `deadline` (a hang)."""
    outcomes = [RankOutcome() for _ in pids]
    alive = dict(enumerate(pids))
    stopped_at: dict[int, float] = {}
    while alive:
        for rank, pid in list(alive.items()):
            got, status = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
            if got == 0:
                continue
            if os.WIFSTOPPED(status):
                stopped_at[rank] = time.time()
                continue
            del alive[rank]
            if os.WIFSIGNALED(status):
                outcomes[rank].signal = os.WTERMSIG(status)
            else:
                outcomes[rank].exit_code = os.WEXITSTATUS(status)
        for rank, when in list(stopped_at.items()):
            if resume_after is not None and time.time() >= _fault_time(directory, when) + resume_after:
                outcomes[rank].resumed_at = time.time()
                os.kill(alive[rank], signal.SIGCONT)
                del stopped_at[rank]
        if time.time() > deadline:
            for rank, pid in alive.items():
                outcomes[rank].hung = True
                os.kill(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGCONT)
                os.waitpid(pid, 0)
            break
        time.sleep(0.02)
    return outcomes


def _fault_time(directory: str, default: float) -> float:
    try:
        with open(os.path.join(directory, "fault.json")) as f:
            return json.load(f)["at"]
    except (OSError, ValueError, KeyError):
        return default


# torchfrtrace's matching groups a collective with the next entry when that entry's p2p_seq_id
# equals the collective's collective_seq_id (its coalesced-group heuristic mixes the two
# counters), then fails on the collective: "can't get dst of non-p2p op", or on a peer's
# collective met while looking for the p2p op's match: "can't get src of non-p2p op" (both in
# its match_coalesced_groups_with_non_p2p). torch's NCCL backends number p2p entries the same
# way, so the set is read again with -j (every entry, no matching).
MATCHING_HEURISTIC = ("can't get dst of non-p2p op", "can't get src of non-p2p op")


def _frtrace(directory: str) -> tuple[str | None, str]:
    """Runs torch's torchfrtrace over the run's dumps with --allow-incomplete-ranks, as a user
    would after a failure. Returns (why it could not read them or None, how it read them)."""
    if not any(n.startswith("fr_rank_") for n in os.listdir(directory)):
        return "no dumps", "-"
    base = [directory, "-p", "fr_rank_", "--allow-incomplete-ranks"]
    error = _frtrace_run(directory, base + ["-o", os.path.join(directory, "frtrace.pkl")], "frtrace.pkl")
    if error is None:
        return None, "matched"
    if not _matching_heuristic_failed(error, directory):
        return error, "-"
    error = _frtrace_run(directory, base + ["-j"], None)
    return (None, "entries (-j)") if error is None else (error, "-")


def _matching_heuristic_failed(error: str, directory: str) -> bool:
    """Whether torchfrtrace failed in its coalesced-group search (MATCHING_HEURISTIC), or in the
    same search meeting a group whose peer is a rank with no dump (the dead one): it looks that
    rank's entries up and fails with its KeyError despite --allow-incomplete-ranks."""
    if any(symptom in error for symptom in MATCHING_HEURISTIC):
        return True
    rank = error.removeprefix("KeyError: ")
    if rank == error or not rank.isdigit() or os.path.exists(os.path.join(directory, f"fr_rank_{rank}")):
        return False
    with contextlib.suppress(OSError):
        return "match_coalesced_groups_with_non_p2p" in open(os.path.join(directory, "frtrace.err")).read()
    return False


def _frtrace_run(directory: str, args: list[str], output: str | None) -> str | None:
    """torchfrtrace's main in a fork of this pre-imported process (no start-up per run); its
    report goes to frtrace.log in the run's directory. None when it ran through."""
    err = os.path.join(directory, "frtrace.err")
    with contextlib.suppress(OSError):
        os.unlink(err)
    pid = os.fork()
    if pid == 0:
        try:
            from torch.distributed.flight_recorder.fr_trace import main

            log = os.open(os.path.join(directory, "frtrace.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            main(args)
            os._exit(0)
        except SystemExit as done:  # -j ends with sys.exit(0)
            os._exit(0 if done.code in (None, 0) else 1)
        except BaseException:  # noqa: BLE001
            with open(err, "w") as out:
                out.write(traceback.format_exc())
            os._exit(1)
    deadline = time.time() + 60
    while time.time() < deadline:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and (
                    output is None or os.path.exists(os.path.join(directory, output))):
                return None
            with contextlib.suppress(OSError):
                return open(err).read().strip().splitlines()[-1]
            return f"torchfrtrace ended with status {status}"
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "torchfrtrace did not finish within 60 s"


def run_one(run: Run, keep_dir: str | None) -> dict:
    directory = tempfile.mkdtemp(prefix=f"fault_{run.fault}_{run.behaviour}_{run.transport}_")
    plans, extra = _rank_plans(run, directory)
    port, recovery_port = _run_ports(run.number)
    base = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(len(plans)),
            "LOCAL_WORLD_SIZE": str(len(plans)), "TORCH_FR_DUMP_TEMP_FILE": os.path.join(directory, "fr_rank_"),
            "FAULTS_RECOVERY_PORT": str(recovery_port),
            # NCCL's connect to a peer whose process is gone fails after its socket retries, about a
            # minute by default (docs/simulated-nccl.md); here within the groups' timeout.
            "NCCL_SOCKET_RETRY_CNT": "3", "NCCL_SOCKET_RETRY_SLEEP_MSEC": "100"}
    base.update(TRANSPORT_ENV.get(run.transport, {}))
    pids = [_rank_process(p, {**base, "RANK": str(p.rank), "LOCAL_RANK": str(p.rank), **extra.get(p.rank, {})})
            for p in plans]
    started = time.time()
    deadline = started + 4 * run.timeout_s + 30
    resume_after = run.timeout_s + RESUME_AFTER_TIMEOUT_S if run.fault == "stop" else None
    outcomes = _watch(pids, deadline, resume_after, directory)
    for rank, outcome in enumerate(outcomes):
        with contextlib.suppress(OSError, ValueError):
            with open(os.path.join(directory, f"result{rank}.json")) as f:
                outcome.result = json.load(f)
        with contextlib.suppress(OSError):
            outcome.dump_mtime = os.stat(os.path.join(directory, f"fr_rank_{rank}")).st_mtime
    fault_at = _fault_time(directory, 0.0) or None
    frtrace, frtrace_read = _frtrace(directory) if run.fault in DISRUPTIVE else (None, "-")
    faulty = plans[0].faulty_rank
    held_until_s = held_until(outcomes, fault_at, resume_after) if run.transport in BLOCKING_CONNECT else None
    verdict = judge(run.fault, faulty, run.timeout_s, len(plans[0].ops), outcomes, fault_at, frtrace,
                    held_until_s=held_until_s,
                    call_limit_s=run.timeout_s + NONBLOCKING_CALL_PAST_TIMEOUT_S
                    if run.transport in NONBLOCKING_TRANSPORTS else None)
    kept = None
    if not verdict.ok and keep_dir:
        kept = os.path.join(keep_dir, os.path.basename(directory))
        shutil.copytree(directory, kept)
    shutil.rmtree(directory, ignore_errors=True)
    return {"run": asdict(run), "world": len(plans), "faulty_rank": faulty, "fault_op": plans[0].fault_at,
            "seconds": time.time() - started, "verdict": asdict(verdict), "ok": verdict.ok, "kept": kept,
            "frtrace": frtrace_read,
            "survivor_calls": [_longest_call(o) for rank, o in enumerate(outcomes) if rank != faulty]}


def _longest_call(outcome: RankOutcome) -> float:
    """The longest op call a rank made (the one that raised included), in seconds."""
    result = outcome.result or {}
    raising = result.get("op", {}).get("call_seconds", 0.0) if "raised" in result else 0.0
    return max(raising, (result.get("longest_call") or {}).get("call_seconds", 0.0))


def _row_table(rows: list[tuple], results: list[dict]) -> str:
    head = ("| fault | behaviour | transport | runs | survivors raised | s past timeout p50 / p99 / max | hangs "
            "| crashes | dumps readable | shrink ok | DDP steps on a failed op | survivors blocked in a call "
            "| runs failed |")
    lines = [head, "|" + " --- |" * 13]
    for fault, behaviour, transport in rows:
        mine = [r for r in results if (r["run"]["fault"], r["run"]["behaviour"], r["run"]["transport"]) ==
                (fault, behaviour, transport)]
        if not mine:
            continue
        v = [r["verdict"] for r in mine]
        past = [p for x in v for p in x["seconds_past_timeout"]]
        fmt = (lambda x: "-" if x is None else f"{x:+.2f}")
        survivors = sum(x["survivors"] for x in v)
        raised = f"{sum(x['survivors_raised'] for x in v)}/{survivors}" if survivors else "- (none may fail)"
        disruptive = fault in DISRUPTIVE
        lines.append(
            f"| {fault} | {behaviour} | {transport} | {len(mine)} | {raised} | "
            f"{fmt(percentile(past, 50))} / {fmt(percentile(past, 99))} / {fmt(max(past) if past else None)} | "
            f"{sum(x['hang'] for x in v)} | {sum(x['crash'] for x in v)} | "
            f"{_dumps_cell(mine) if disruptive else '-'} | "
            f"{sum(x['shrink_ok'] for x in v) if disruptive else '-'}/{len(mine) if disruptive else '-'} | "
            f"{sum(x.get('read_failed_op', 0) for x in v) if disruptive else '-'} | "
            f"{sum(x.get('blocked_in_call', 0) for x in v) if transport in BLOCKING_CONNECT and disruptive else '-'} | "
            f"{sum(not r['ok'] for r in mine)} |")
    return "\n".join(lines)


def _dumps_cell(runs: list[dict]) -> str:
    ok = sum(r["verdict"]["dumps_ok"] for r in runs)
    unmatched = sum(r["frtrace"] == "entries (-j)" for r in runs)
    return f"{ok}/{len(runs)}" + (f" ({unmatched} read with -j)" if unmatched else "")


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("--runs", type=int, default=3, help="runs per (fault x behaviour x transport) row (default 3)")
    p.add_argument("--seed", type=int, default=1, help="the campaign's seed: every run's draws follow from it")
    p.add_argument("--fault", action="append", choices=FAULTS, help="only these faults (repeatable)")
    p.add_argument("--behaviour", action="append", choices=list(BEHAVIOURS), help="only these behaviours")
    p.add_argument("--transport", action="append", choices=list(TRANSPORTS), help="only these transports")
    p.add_argument("--timeout", type=float, default=3.0, help="the groups' timeout in seconds (default 3)")
    p.add_argument("--jobs", type=int, default=1, help="runs at once (default 1; each run is 3 or 4 processes)")
    p.add_argument("--json", metavar="FILE", help="write every run's verdict to FILE")
    p.add_argument("--keep", metavar="DIR", help="copy the directory of every failed run (logs, dumps) into DIR")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = p.parse_args(argv)
    if args.runs < 1 or args.jobs < 1 or args.timeout <= 0:
        p.error("--runs and --jobs must be at least 1 and --timeout positive")
    return args


def _prepare() -> None:
    """Imports torch and the toolkit once and registers the simulated-device backends, so every
    run's ranks fork from a ready process (no start-up per rank) with no thread yet running."""
    import nccl_migrate  # noqa: F401
    import torch._dynamo  # DDP's construction imports it (some 900 modules): seconds a step must not count
    import torch.distributed
    import torch.distributed.flight_recorder.fr_trace  # noqa: F401
    from worlds import register_simulated, world_missing

    for transport, world in TRANSPORTS.items():
        missing = world_missing(world)
        if missing:
            sys.exit(f"fault_campaign.py: the {transport} transport cannot run here: {missing}")
    for backend in BEHAVIOURS.values():
        register_simulated(backend)


def main(argv=None) -> int:
    args = _parse(argv)
    _prepare()
    rows = plan_rows(args.fault or FAULTS, args.behaviour or list(BEHAVIOURS), args.transport or list(TRANSPORTS))
    if not rows:
        print("fault_campaign.py: the selection names no row (sim_stall and sim_error run on the sim transport only)",
              file=sys.stderr)
        return 2
    seeds = random.Random(args.seed)
    cells = [(f, b, t, i) for f, b, t in rows for i in range(args.runs)]
    runs = [Run(f, b, t, i, seeds.randrange(1 << 31), args.timeout, number=n) for n, (f, b, t, i) in enumerate(cells)]
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    results = []
    started = time.time()
    with mp.get_context("fork").Pool(args.jobs, maxtasksperchild=None) as pool:
        for result in pool.imap_unordered(_run_entry, [(r, args.keep) for r in runs]):
            results.append(result)
            if not args.quiet:
                r = result["run"]
                blocked = result["verdict"]["blocked_in_call"]
                mark = "ok" if result["ok"] else "FAILED: " + "; ".join(result["verdict"]["problems"])[:300]
                if blocked:
                    mark += f" ({blocked} survivor(s) blocked in a call until the stopped rank resumed)"
                print(f"[{len(results)}/{len(runs)} {time.time() - started:.0f}s] {r['fault']} {r['behaviour']} "
                      f"{r['transport']} world {result['world']} rank {result['faulty_rank']} op "
                      f"{result['fault_op']}{' (its communicator collective)' if r['fault'] in SIM_ONLY else ''}: {mark}",
                      file=sys.stderr, flush=True)
    print(f"{len(runs)} runs, seed {args.seed}, timeout {args.timeout:g} s, {time.time() - started:.0f} s\n")
    print(_row_table(rows, results))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"seed": args.seed, "timeout_s": args.timeout, "runs": results}, out, indent=1)
    failed = sum(not r["ok"] for r in results)
    blocked = sum(r["ok"] and r["verdict"]["blocked_in_call"] > 0 for r in results)
    print(f"\n{len(results) - failed} passed, {failed} failed")
    if blocked:
        print(f"{blocked} of the passed runs had survivors whose call blocked in NCCL's connect (blocking mode) until "
              "the stopped rank resumed: the limit docs/backends.md states; nonblocking mode (sim-nb) bounds it")
    return 1 if failed else 0


def _run_entry(item):
    run, keep = item
    return run_one(run, keep)


if __name__ == "__main__":
    sys.exit(main())
