"""The NCCL path on the GPU, against torch's own NCCL backends on the same machine.

Each probe (gpu_probe_table.py) runs once per backend: our migrate-legacy, migrate-nccl2
and migrate-lazy first, then torch's backends of the same behaviours as the reference, in the
time ours leave (torch 2.13 and older: `nccl`, the legacy backend; 2.14 and later:
`nccl-legacy`, `nccl2`, `nccl-lazy`). Ranks are bound with device_id, as jobs run. Probes that
can share a world run in one (one process start, CUDA context and NCCL init per backend for all
of them); a probe that changes its process for good gets a world of its own, and the teardown
probes fresh interpreters. The worlds of one stage run side by side, except the timings.

Two ranks share the GPU only where the NCCL torch loaded is 2.30 or later (checked at run time;
2.28 refuses two ranks on one GPU), confirmed by the two_ranks probe under torch's backend, or
run one per GPU on two GPUs. Otherwise every probe runs on one rank, where NCCL copies, scales or
does nothing in place of a collective: a probe whose every check could not have failed there
says so in its cell ("cannot fail at 1 rank: why") instead of passing. The table's first line
says how many ranks ran, whether they shared a GPU, and what that cannot show.

Each probe has its own limit, and the whole check a deadline (--deadline seconds from the start)
less a margin (--margin, 2 minutes): a probe starts only if its estimate ends before the margin
("not run: deadline: ..." otherwise, with the seconds it needed), and one the deadline ends is
"cut", never passed. --list prints the plan at the estimates. gpu_check.json and gpu_check.md
(the table, ready for docs/backends.md) in --out are rewritten after every probe, and
gpu_check_logs.txt gathers the logs of what did not pass; the table is printed at the end.

    python3 tests/gpu/gpu_check.py [--probe NAME]... [--backend NAME]... [--deadline S] [--out DIR]
    python3 tests/gpu/gpu_check.py --list

Exit: 0 every probe of ours passed, could not fail, or was not run for a reason other than the
deadline; 1 one of ours failed, timed out or crashed (torch's results are the reference and never
fail the check); 2 no CUDA device or a usage error; 3 nothing of ours failed but the deadline
left some of it unrun or cut.
"""

from __future__ import annotations

import argparse
import glob
import importlib.machinery
import importlib.util
import json
import mmap
import multiprocessing as mp
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

STARTED = time.monotonic()  # the deadline counts from here: importing torch and starting ranks is part of it
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
sys.path.append(os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools"))  # _tree_package.py
from _tree_package import child_pythonpath, use_tree_package

use_tree_package()

# After the path set-up above:
import gpu_plan as plan
import gpu_probe_table as table
import gpu_sessions as sessions
from gpu_probes import OUR_BACKENDS

TORCH_NCCL_NAMES = {"nccl-legacy": "legacy", "nccl2": "rewritten", "nccl-lazy": "rewritten-lazy-p2p"}
MULTI_RANK_SWITCH = "NCCL_MULTI_RANK_GPU_ENABLE"
TEARDOWN_CHILD = os.path.join(HERE, "gpu_teardown_child.py")

# Run alone, the check has what tools/gpu-check.sh leaves it after the build at its estimate.
DEFAULT_DEADLINE_S = plan.CHECK_DEADLINE_S - plan.BUILD_S
RESERVE_S = 5.0  # kept back at the deadline to write the report
LOG_TAIL_BYTES = 32 << 10  # of each rank log of a run that did not pass

# The caller's settings that would change what is measured; the check sets what it needs itself.
CALLER_VARIABLES = ("TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                    "TORCH_DIST_USE_NCCL2", "TORCH_NCCL_USE_COMM_NONBLOCKING", "NCCL_COMM_BLOCKING",
                    MULTI_RANK_SWITCH)
CALLER_PREFIXES = ("NCCL_MIGRATE_",)  # activation, implementation choice, eager subgroups, A/B recording


# ---------------------------------------------------------------------------------------------
# What this machine has


def discover() -> dict:
    """torch, CUDA, NCCL and the backends here; creates no CUDA context (the parent must not
    hold GPU memory or count as a rank on the GPU)."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    library = nccl_library()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpus": gpus,
        "gpu": gpu_name() if gpus else None,
        "nccl": nccl_version(),
        "libnccl": library,
        "multi_rank_switch": file_contains(library, MULTI_RANK_SWITCH.encode()) if library else None,
        "torch_backends": torch_backends(),
        "ours_built": ours_built(),
    }


def nccl_version() -> str | None:
    import torch

    try:
        return ".".join(map(str, torch.cuda.nccl.version()))  # also makes torch load its libnccl
    except Exception:  # noqa: BLE001 - a torch without NCCL
        return None


def nccl_library() -> str | None:
    """The libnccl torch loaded, else the nvidia-nccl wheel's, else libtorch_cuda (a torch with
    NCCL linked in). Call after nccl_version(), which makes torch load it."""
    nccl_version()
    with open("/proc/self/maps") as maps:
        paths = [line.split()[-1] for line in maps if "/" in line]
    for path in paths:
        if os.path.basename(path).startswith("libnccl"):
            return path
    try:
        import nvidia.nccl  # the wheel torch depends on; a namespace package

        for folder in nvidia.nccl.__path__:
            found = sorted(glob.glob(os.path.join(folder, "lib", "libnccl.so*")))
            if found:
                return found[0]
    except ImportError:
        pass
    return next((p for p in paths if os.path.basename(p).startswith("libtorch_cuda")), None)


def file_contains(path: str, needle: bytes) -> bool:
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return data.find(needle) >= 0


def gpu_name() -> str | None:
    """From nvidia-smi: asking torch would create a CUDA context in this process."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20, check=False)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def torch_backends() -> dict[str, str]:
    """torch's own NCCL backends here, name -> behaviour. torch 2.14 and later register
    nccl-legacy, nccl2 and nccl-lazy (through entry points); `nccl` is then one of them (nccl2,
    or nccl-legacy with TORCH_DIST_USE_NCCL2=0) and is not run twice. Before 2.14 `nccl` alone
    exists, and is the legacy backend."""
    from importlib.metadata import entry_points

    import torch.distributed as dist

    if not dist.is_available() or not dist.is_nccl_available():
        return {}
    names = set(dist.Backend.backend_list)
    names |= {ep.name for ep in entry_points(group="torch.distributed.backends") if ep.value.startswith("torch.")}
    found = {name: behaviour for name, behaviour in TORCH_NCCL_NAMES.items() if name in names}
    if not found and "nccl" in names:
        found["nccl"] = "legacy"
    return found


def ours_built() -> bool:
    """Whether nccl_migrate's native module is there, found without importing the package (the
    import would activate the shim in this process)."""
    spec = importlib.util.find_spec("nccl_migrate")
    folders = list(spec.submodule_search_locations or []) if spec else []
    return any(os.path.exists(os.path.join(folder, "_C" + suffix))
               for folder in folders for suffix in importlib.machinery.EXTENSION_SUFFIXES)


def peer_of(backend: str, torch_names: dict[str, str]) -> tuple[str | None, bool]:
    """torch's backend of the same behaviour as ours, and whether it is the same behaviour
    (False: this torch lacks it and its legacy backend stands in; torch's contract on values,
    streams and errors is the same for every behaviour)."""
    same = [name for name, behaviour in torch_names.items() if behaviour == OUR_BACKENDS[backend]]
    if same:
        return same[0], True
    legacy = [name for name, behaviour in torch_names.items() if behaviour == "legacy"]
    return (legacy[0], False) if legacy else (None, False)


# ---------------------------------------------------------------------------------------------
# Rank processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_environment(rank: int, world: int, port: int, run_dir: str, shares_gpu: bool, env: dict) -> dict:
    variables = {
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "NCCL_DEBUG": os.environ.get("NCCL_DEBUG", "WARN"),  # NCCL's own warnings land in the rank's log
        # Flight-recorder dumps go to the run's folder, not the home directory.
        "TORCH_FR_DUMP_TEMP_FILE": os.path.join(run_dir, "fr_rank"),
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": os.path.join(run_dir, "nccl_trace_rank_"),
    }
    if shares_gpu:
        variables[MULTI_RANK_SWITCH] = "1"
    variables.update(env)
    return variables


# ---------------------------------------------------------------------------------------------
# The whole check


class Check:
    """One whole check: the plan (ranks per run, backends, worlds), running it under the deadline,
    the results, and the report rewritten after every probe."""

    def __init__(self, args, env: dict, backends: list[str], selected: list[plan.ProbeSpec],
                 started: float = STARTED) -> None:
        """`started`: where the deadline counts from (the process's start, for the check itself)."""
        self.args, self.env, self.backends, self.selected = args, env, backends, selected
        self.started = started
        self.deadline = started + args.deadline - RESERVE_S  # when a world still running is ended
        # After the horizon nothing starts (plan.MARGIN_S); never later than the deadline itself.
        self.horizon = started + args.deadline - max(args.margin, RESERVE_S)
        self.work_dir = tempfile.mkdtemp(prefix="gpu_check.")
        self.out_dir = args.out
        self.results: list[dict] = []
        self.world_checks: list[dict] = []  # destroy_process_group and exits, per world
        self.world, self.shares_gpu, self.world_reason = 1, False, ""
        self.lock = threading.RLock()  # concurrent worlds report from their own threads
        self.ctx = mp.get_context(args.start_method)
        if args.start_method == "forkserver":
            # Ranks fork from a server that imported torch and the probes once (no CUDA touched):
            # a world starts in well under a second instead of importing torch in every rank.
            self.ctx.set_forkserver_preload(["gpu_probe_table", "torch", "torch.distributed"])
            warm_up = self.ctx.Process(target=time.sleep, args=(0,))
            warm_up.start()
            warm_up.join()

    def remaining(self) -> float:
        """Seconds left before the plan's margin: what a probe's estimate must fit in to start."""
        return self.horizon - time.monotonic()

    @property
    def ours(self) -> list[str]:
        return [b for b in self.backends if b in OUR_BACKENDS]

    @property
    def theirs(self) -> list[str]:
        return [b for b in self.backends if b not in OUR_BACKENDS]

    # -- the plan
    def decide_world(self) -> None:
        """Two ranks on two GPUs, or on one where this NCCL is 2.30 or later (confirmed by the
        two_ranks probe under torch's backend: ours are what is being tested); else one rank."""
        env = self.env
        self.world, self.shares_gpu, self.world_reason = plan.ranks_decision(
            env["nccl"], env["gpus"], env["multi_rank_switch"], self.args.world)
        if not self.shares_gpu:
            return
        reference = next(iter(self.theirs), self.backends[0])
        result = self.run_session(plan.Session(reference, ["two_ranks"]), 2, sharing=2)
        if result.get("two_ranks", {}).get("verdict") == plan.PASS:
            self.world_reason += f" (works under {reference})"
        else:
            outcome = result.get("two_ranks", {})
            self.world, self.shares_gpu = 1, False
            self.world_reason = (f"one rank: two ranks on one GPU failed under {reference} "
                                 f"({outcome.get('verdict')}: {outcome.get('detail')})")

    def run_all(self) -> None:
        self.decide_world()
        for spec in (s for s in self.selected if s.two_ranks and self.world < 2):
            for backend in self.backends:
                self.record({"probe": spec.name, "backend": backend, "world": self.world, "verdict": plan.NOT_RUN,
                             "detail": "needs two ranks (see the ranks line)", "seconds": 0.0})
        runnable = [s for s in self.selected if self.world >= 2 or not s.two_ranks]
        done = frozenset((r["probe"], r["backend"]) for r in self.results)  # two_ranks under the reference
        steps = plan.schedule(runnable, self.ours, self.theirs, done)
        while steps:
            step = steps.pop(0)
            if step.children:
                self.run_children(step.children, step.backends)
                continue
            sharing = plan.ranks_on_gpu(step, self.world, self.shares_gpu)
            why = plan.why_not_start(self.remaining(), table.PROBES[step.sessions[0].probes[0]], sharing,
                                     self.world, in_new_world=True)
            if why:
                for session in step.sessions:
                    for name in session.probes:
                        self.record({"probe": name, "backend": session.backend, "world": self._world_of(session),
                                     "verdict": plan.NOT_RUN, "detail": why, "seconds": 0.0,
                                     "session": session.label})
                continue
            retries: list[plan.Session] = []

            def run_one(session: plan.Session, retries: list = retries, sharing: int = sharing) -> None:
                unreached = self.run_session(session, self._world_of(session), sharing)
                retry = plan.retry_session(session, unreached.get("", []))
                if retry:
                    retries.append(retry)

            threads = [threading.Thread(target=run_one, args=(session,)) for session in step.sessions]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            steps[:0] = [plan.Step(sessions=batch) for batch in plan.batches(retries, table.PROBES)]

    def _world_of(self, session: plan.Session) -> int:
        return self.world if session.backend else 1

    def run_session(self, session: plan.Session, world: int, sharing: int = 1) -> dict:
        """Runs one world; returns its results by probe, and under "" the probes it never reached
        (the caller may give them a fresh world)."""
        run_dir = tempfile.mkdtemp(prefix=session.label + ".", dir=self.work_dir)
        port = free_port()
        shares_gpu = world > self.env["gpus"]
        settled: dict = {}

        def rank_spec(rank: int) -> dict:
            return {"settings": {"groups": self.args.groups},
                    "env": rank_environment(rank, world, port, run_dir, shares_gpu, session.env)}

        def on_result(result: dict) -> None:
            settled[result["probe"]] = result
            self.record(result)

        run = sessions.SessionRun(self.ctx, table.rank_main, table.PROBES, session, world, self.deadline, run_dir,
                                  rank_spec, on_result, horizon=self.horizon, sharing=sharing)
        unreached = run.run()
        if run.session_checks:
            with self.lock:
                self.world_checks.append({"session": session.label, "backend": session.backend,
                                          "checks": run.session_checks, "ended_by": run.ended_by or None})
        if any(r["verdict"] in (*plan.FAILED, plan.CUT) for r in settled.values()) or run.ended_by:
            self._keep_logs(run_dir, session.label)
        self.write_report()
        settled[""] = unreached
        return settled

    def run_children(self, specs: list[plan.ProbeSpec], backends: list[str]) -> None:
        """The teardown probes: the fresh interpreters of every backend given at once (nothing in
        them is timed), each judged on how its interpreter ends."""
        why = plan.why_not_start(self.remaining(), max(specs, key=lambda s: s.expected_s), 1, self.world,
                                 in_new_world=True)
        if why:
            for spec in specs:
                for backend in backends:
                    self.record({"probe": spec.name, "backend": backend, "world": self.world,
                                 "verdict": plan.NOT_RUN, "detail": why, "seconds": 0.0})
            return
        limit = plan.probe_limit(max(specs, key=lambda s: s.limit_s), self.deadline - time.monotonic())
        jobs = []
        for spec in specs:
            for backend in backends:
                run_dir = tempfile.mkdtemp(prefix=f"{spec.name}.{backend}.", dir=self.work_dir)
                port = free_port()
                base = {**os.environ, "PYTHONPATH": child_pythonpath()}
                argv = [sys.executable, TEARDOWN_CHILD, "--backend", backend]
                if spec.name == "teardown_in_flight":
                    argv.append("--in-flight")
                jobs.append({"spec": spec, "backend": backend, "run_dir": run_dir,
                             "argv": [argv] * self.world,
                             "env": [{**base, **rank_environment(rank, self.world, port, run_dir,
                                                                 self.world > self.env["gpus"], dict(spec.env))}
                                     for rank in range(self.world)],
                             "log": [os.path.join(run_dir, f"rank{rank}.log") for rank in range(self.world)]})
        for job, outcome in zip(jobs, sessions.run_children(jobs, limit)):
            logs = [sessions.text_of(path) for path in job["log"]]
            verdict, detail = plan.judge_children(outcome["exit_codes"], outcome["seconds"], logs, limit)
            if verdict == plan.TIMEOUT and limit < job["spec"].limit_s:
                verdict, detail = plan.CUT, f"deadline, {limit:.0f} s after start: {detail}"
            self.record({"probe": job["spec"].name, "backend": job["backend"], "world": self.world,
                         "verdict": verdict, "detail": detail, "seconds": max(outcome["seconds"]),
                         "exit_codes": outcome["exit_codes"]})
            if verdict != plan.PASS:
                self._keep_logs(job["run_dir"], f"{job['spec'].name}.{job['backend']}")

    # -- results
    def record(self, result: dict) -> None:
        with self.lock:
            self.results = [r for r in self.results
                            if (r["probe"], r["backend"]) != (result["probe"], result["backend"])]
            self.results.append(result)
            elapsed = time.monotonic() - self.started
            print(f"[{elapsed:5.0f} s] {result['probe']:<20}{result['backend'] or '(no group)':<16}"
                  f"{plan.cell(result, width=110)}", file=sys.stderr, flush=True)
            self.write_report()

    def _keep_logs(self, run_dir: str, label: str) -> None:
        """Appends the end of each rank log of a run that did not pass to one file in the output
        folder (a device machine returns few files: one that grows beats a folder of many)."""
        if not self.out_dir:
            return
        os.makedirs(self.out_dir, exist_ok=True)
        with self.lock, open(os.path.join(self.out_dir, "gpu_check_logs.txt"), "a", errors="replace") as kept:
            for path in sorted(glob.glob(os.path.join(run_dir, "rank*.log"))):
                with open(path, errors="replace") as log:
                    log.seek(max(0, os.path.getsize(path) - LOG_TAIL_BYTES))
                    kept.write(f"===== {label}: {os.path.basename(path)} (its last {LOG_TAIL_BYTES >> 10} KiB)\n")
                    kept.write(log.read() + "\n")

    def peers(self) -> dict[str, str]:
        names = {b: self.env["torch_backends"][b] for b in self.backends if b in self.env["torch_backends"]}
        found = {}
        for backend in (b for b in self.backends if b in OUR_BACKENDS):
            peer, same = peer_of(backend, names)
            if peer:
                found[backend] = peer if same else f"~{peer}"
        return found

    def comparisons(self) -> dict[tuple[str, str], str]:
        by_key = {(r["probe"], r["backend"]): r for r in self.results}
        return {(probe, backend): plan.compare(by_key.get((probe, backend)), by_key.get((probe, peer.lstrip("~"))))
                for backend, peer in self.peers().items() for probe in table.PROBES
                if (probe, backend) in by_key}

    def markdown(self) -> str:
        env = self.env
        spent = self.args.spent
        took = time.monotonic() - self.started
        title = (f"### The GPU check on {env['gpu'] or 'a GPU'}\n\n"
                 f"torch {env['torch']} (CUDA {env['cuda']}, NCCL {env['nccl']}, Python {env['python']}); "
                 + (f"build {spent:.0f} s, " if spent else "") + f"probes {took:.0f} s of {self.args.deadline:.0f} s.")
        ranks = plan.ranks_line(self.world, self.shares_gpu, self.world_reason)
        text = plan.markdown(title, ranks, self.selected, self.backends, set(OUR_BACKENDS), self.results,
                             self.comparisons(), self.peers())
        broken = [w for w in self.world_checks if any(not c["ok"] for c in w["checks"])]
        if broken:
            text += "\n\nWorlds that did not end cleanly: " + "; ".join(
                f"{w['session']}: " + ", ".join(f"{c['name']} ({c['detail']})" for c in w["checks"] if not c["ok"])
                for w in broken)
        return text

    def write_report(self) -> None:
        if not self.out_dir:
            return
        with self.lock:
            self._write_report()

    def _write_report(self) -> None:
        os.makedirs(self.out_dir, exist_ok=True)
        report = {"environment": self.env, "world": self.world, "shares_gpu": self.shares_gpu,
                  "world_reason": self.world_reason, "margin_s": self.args.margin,
                  "deadline_s": self.args.deadline, "spent_before_s": self.args.spent,
                  "elapsed_s": round(time.monotonic() - self.started, 1), "backends": self.backends,
                  "runs": self.results, "worlds": self.world_checks,
                  "comparisons": [{"probe": p, "backend": b, "result": c} for (p, b), c in self.comparisons().items()]}
        for name, content in (("gpu_check.json", json.dumps(report, indent=1, default=str)),
                              ("gpu_check.md", self.markdown() + "\n")):
            path = os.path.join(self.out_dir, name)
            with open(path + ".tmp", "w") as f:
                f.write(content)
            os.replace(path + ".tmp", path)

    def status(self) -> int:
        status = plan.exit_status(self.results, set(OUR_BACKENDS))
        ours_broken = any(not c["ok"] for w in self.world_checks if w["backend"] in OUR_BACKENDS for c in w["checks"])
        return 1 if ours_broken else status


# ---------------------------------------------------------------------------------------------
# Command line


def parse_args(argv):
    names = ", ".join(table.PROBES)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="probes, in run order: " + names + " (--list says what each asserts)")
    parser.add_argument("--list", action="store_true", help="print the probes and backends that would run, then exit")
    parser.add_argument("--probe", action="append", metavar="NAME", help="run only this probe (repeatable)")
    parser.add_argument("--backend", action="append", metavar="NAME",
                        help="run only this backend (repeatable): ours (migrate-legacy, migrate-nccl2, migrate-lazy) "
                             "or torch's (nccl, nccl-legacy, nccl2, nccl-lazy, whichever this torch has)")
    parser.add_argument("--deadline", type=positive_seconds, default=DEFAULT_DEADLINE_S, metavar="S",
                        help="seconds for the whole check from its start; a probe starts only with twice its expected "
                             f"time left, and the deadline ends one still running (default {DEFAULT_DEADLINE_S:.0f})")
    parser.add_argument("--margin", type=float, default=plan.MARGIN_S, metavar="S",
                        help="seconds of the deadline the plan keeps spare: no probe starts whose estimate would "
                             f"end inside them (default {plan.MARGIN_S:.0f}; 0 to plan up to the deadline)")
    parser.add_argument("--spent", type=float, default=0.0, metavar="S",
                        help="seconds spent before this check (the build), shown in the table's title")
    parser.add_argument("--out", default=os.environ.get("OUT") or None, metavar="DIR",
                        help="write gpu_check.json, gpu_check.md and gpu_check_logs.txt (the logs of runs that "
                             "did not pass) here (default $OUT)")
    parser.add_argument("--world", choices=("auto", "1", "2"), default="auto",
                        help="ranks per world: auto (two on two GPUs, or where NCCL lets two ranks share one), 1, or 2")
    parser.add_argument("--groups", type=int, default=4, metavar="N",
                        help="subgroups the subgroups probe creates (default 4)")
    parser.add_argument("--start-method", choices=("forkserver", "spawn"), default="forkserver",
                        help="how rank processes start (default forkserver: torch imported once)")
    args = parser.parse_args(argv)
    if not 0 <= args.margin < args.deadline:
        parser.error(f"--margin {args.margin:g} must be at least 0 and less than --deadline {args.deadline:g}, "
                     "or no probe could start; give a smaller --margin (0 plans up to the deadline)")
    return args


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} s leaves no time for any probe; give a positive number of seconds")
    return value


def select(args, env: dict) -> tuple[list[plan.ProbeSpec], list[str]]:
    """The probes and backends to run, in run order; raises SystemExit(2) on an unknown name."""
    wanted = args.probe or list(table.PROBES)
    unknown = [p for p in wanted if p not in table.PROBES]
    torch_names = list(env["torch_backends"])
    # torch's legacy backend first: it decides whether two ranks can share the GPU.
    everything = [n for n in torch_names if env["torch_backends"][n] == "legacy"] + list(OUR_BACKENDS) + \
        [n for n in torch_names if env["torch_backends"][n] != "legacy"]
    backends = args.backend or everything
    unknown += [b for b in backends if b not in everything]
    if unknown:
        print(f"gpu_check: unknown probe or backend: {', '.join(unknown)} (probes: {', '.join(table.PROBES)}; "
              f"backends here: {', '.join(everything)})", file=sys.stderr)
        raise SystemExit(2)
    return [p for p in table.PROBES.values() if p.name in wanted], [b for b in everything if b in backends]


def print_list(env: dict, selected: list[plan.ProbeSpec], backends: list[str], args) -> None:
    print(f"torch {env['torch']}, CUDA {env['cuda']}, NCCL {env['nccl']}, GPUs: {env['gpus']}"
          + ("" if env["gpus"] else " (no CUDA device here: a run would stop at once)"))
    print(f"libnccl: {env['libnccl']}; {MULTI_RANK_SWITCH} in it: {env['multi_rank_switch']}")
    world, shares_gpu, why = plan.ranks_decision(env["nccl"], max(1, env["gpus"]), env["multi_rank_switch"], args.world)
    print(f"ranks per world: {why}" + (" (if two_ranks passes under torch's backend)" if shares_gpu else ""))
    print(f"our backends built: {env['ours_built']}\n\nbackends:")
    torch_names = {b: env["torch_backends"][b] for b in backends if b in env["torch_backends"]}
    for backend in backends:
        if backend in OUR_BACKENDS:
            peer, same = peer_of(backend, torch_names)
            against = (f"compared with {peer}" + ("" if same else " (this torch lacks the behaviour)")) if peer \
                else "no torch peer"
            print(f"  {backend:<16}ours, {OUR_BACKENDS[backend]}; {against}")
        else:
            print(f"  {backend:<16}torch's, {env['torch_backends'][backend]}")
    print("\nprobes (expected seconds at one rank, of them on the GPU, limit):")
    for spec in selected:
        where = ("2 ranks" if spec.two_ranks else "children" if spec.children else "no group" if not spec.group
                 else "own world" if spec.alone else "shared")
        print(f"  {spec.name:<22}stage {spec.stage} {where:<10}{spec.expected_s:>5.1f} s {spec.gpu_s:>4.1f} s "
              f"{spec.limit_s:>4.0f} s  {spec.asserts}")
    ours = [b for b in backends if b in OUR_BACKENDS]
    runs = plan.simulate(selected, ours, [b for b in backends if b not in OUR_BACKENDS], world, shares_gpu,
                         plan.DRIVER_START_S, args.deadline, args.margin)
    print(f"\nthe plan at the estimates (deadline {args.deadline:.0f} s, nothing starts in its last "
          f"{args.margin:.0f} s; seconds from the check's start):")
    for run in runs:
        when = f"{run['start_s']:5.0f}-{run['end_s']:<5.0f}" if run["verdict"] != plan.NOT_RUN else " " * 11
        print(f"  {when} {run['probe']:<22}{run['backend'] or '(no group)':<16}"
              + (f"not run: {run['detail']}" if run["verdict"] == plan.NOT_RUN else ""))


def clean_environment() -> list[str]:
    """Removes the caller's settings that would change what is measured (children inherit the
    rest); returns their names."""
    removed = [k for k in os.environ if k in CALLER_VARIABLES or k.startswith(CALLER_PREFIXES)]
    for key in removed:
        del os.environ[key]
    return removed


def main(argv=None) -> int:
    args = parse_args(argv)
    env = discover()
    selected, backends = select(args, env)
    if args.list:
        print_list(env, selected, backends, args)
        return 0
    if env["gpus"] == 0:
        print("gpu_check: no CUDA device: this check needs a GPU and ran nothing (torch "
              f"{env['torch']}, CUDA {env['cuda'] or 'none'}); run it on a machine with one", file=sys.stderr)
        return 2
    if not env["ours_built"] and any(b in OUR_BACKENDS for b in backends):
        print(f"gpu_check: nccl_migrate's native module for this Python is not built (python/nccl_migrate/_C"
              f"{importlib.machinery.EXTENSION_SUFFIXES[0]}); build it first (tools/gpu-check.sh), or run only "
              "torch's backends (--backend)", file=sys.stderr)
        return 2
    env["removed_caller_variables"] = clean_environment()
    check = Check(args, env, backends, selected)
    try:
        check.run_all()
    finally:
        check.write_report()
        shutil.rmtree(check.work_dir, ignore_errors=True)
    print("\n<!-- gpu_check.md: paste into docs/backends.md -->")
    print(check.markdown())
    return check.status()


if __name__ == "__main__":
    sys.exit(main())
