"""The NCCL path on one GPU, against torch's own NCCL backends on the same machine.

Each probe (bench/_gpu_probes.py) runs once per backend, in a fresh group of rank processes with
a short limit: our migrate-legacy, migrate-nccl2 and migrate-lazy, and torch's backends of the
same behaviours (torch 2.13 and older: `nccl`, the legacy backend; 2.14 and later: `nccl-legacy`,
`nccl2`, `nccl-lazy`). Ranks are bound with device_id, as jobs run.

Two ranks share the GPU where its NCCL has NCCL_MULTI_RANK_GPU_ENABLE (looked up in the libnccl
torch loads, then confirmed by the two_ranks probe under torch's backend). Otherwise every probe
runs on one rank, where SUM, AVG, PRODUCT, MIN and MAX are identities: those checks still run but
cannot fail (the table says how many), PREMUL_SUM stands in where a value must change, and
two-rank-only checks (send/recv, uneven all_gather, a stalled peer) are replaced or left out.

Results: a Markdown table (probe x backend, then ours vs torch's) on stdout, progress on stderr,
and gpu_check.json (plus the logs of runs that did not pass) in --out (default $OUT), rewritten
after every run. Runs still due at the deadline are reported as skipped.

    .venv/bin/python bench/gpu_check.py [--probe NAME]... [--backend NAME]... [--deadline S] [--out DIR]
    .venv/bin/python bench/gpu_check.py --list

Exit: 0 every run of ours passed (or was not run, saying why); 1 one of ours failed, timed out or
crashed (torch's results are the reference and never fail the check); 2 no CUDA device or a
usage error; 3 nothing of ours failed but the deadline skipped some of it.
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
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(HERE), "python")]

import _gpu_probes as probes  # after the path set-up above

OUR_BACKENDS = probes.OUR_BACKENDS
TORCH_NCCL_NAMES = {"nccl-legacy": "legacy", "nccl2": "rewritten", "nccl-lazy": "rewritten-lazy-p2p"}
MULTI_RANK_SWITCH = "NCCL_MULTI_RANK_GPU_ENABLE"

DEFAULT_DEADLINE_S = 450.0
MIN_RUN_S = 15.0  # a run is not started with less time than this left
RESERVE_S = 5.0  # kept back at the deadline to write the report
CRASH_GRACE_S = 10.0  # a rank failed: its peers get this long before they are ended (they may be stuck in an op)
EXIT_GRACE_S = 15.0  # every rank reported its exit: the processes get this long to end
NOT_RUN = ("not run", "skipped")
FAILED = ("fail", "timeout", "crash")

# The caller's settings that would change what is measured; the check sets what it needs itself.
CALLER_VARIABLES = ("TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_DIST_USE_NCCL2",
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
# One run: a probe on one backend, in fresh rank processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_environment(rank: int, world: int, port: int, run_dir: str, shares_gpu: bool, probe) -> dict:
    env = {
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "NCCL_DEBUG": os.environ.get("NCCL_DEBUG", "WARN"),  # NCCL's own warnings land in the rank's log
        # Flight-recorder dumps go to the run's folder, not the home directory.
        "TORCH_FR_DUMP_TEMP_FILE": os.path.join(run_dir, "fr_rank"),
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": os.path.join(run_dir, "nccl_trace_rank_"),
    }
    if shares_gpu:
        env[MULTI_RANK_SWITCH] = "1"
    env.update(probe.env or {})
    return env


def read_rank(path: str) -> dict:
    """What one rank reported (a killed rank's last line may be cut short)."""
    rank = {"checks": [], "notes": {}, "error": None, "done": False, "exited": False, "last": None}
    if not os.path.exists(path):
        return rank
    with open(path) as f:
        for line in f:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            kind = entry.pop("k")
            if kind == "check":
                rank["checks"].append(entry)
                rank["last"] = entry["name"]
            elif kind == "note":
                rank["notes"][entry["name"]] = entry["value"]
            elif kind == "error":
                rank["error"] = entry
            else:
                rank[kind] = True
    return rank


def supervise(procs, limit_s: float, result_paths: list[str]) -> str:
    """Waits for the ranks and ends all of them (SIGKILL) when the run overruns its limit, when
    one failed and the others outlive CRASH_GRACE_S, or when every rank reported its exit and a
    process still runs EXIT_GRACE_S later. Returns why it ended them, or "" if they all ended."""
    start = time.monotonic()
    failed_at = exited_at = None
    while any(p.is_alive() for p in procs):
        now = time.monotonic()
        if failed_at is None and any(p.exitcode not in (None, 0) for p in procs):
            failed_at = now
        if exited_at is None and all('"k": "exited"' in _text(path) for path in result_paths):
            exited_at = now
        reason = ("timeout" if now - start > limit_s
                  else "peer failed" if failed_at is not None and now - failed_at > CRASH_GRACE_S
                  else "hung at exit" if exited_at is not None and now - exited_at > EXIT_GRACE_S
                  else "")
        if reason:
            for p in procs:
                if p.is_alive():
                    p.kill()
            for p in procs:
                p.join(10)
            return reason
        time.sleep(0.2)
    return ""


def _text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def exit_text(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def judge(ranks: list[dict], reason: str, exit_codes: list, limit_s: float) -> tuple[str, str]:
    """The run's verdict (pass, fail, timeout, crash) and a short detail for the table."""
    checks = [c for rank in ranks for c in rank["checks"]]
    failed = [c for c in checks if not c["ok"]]
    # What failed before a hang says more than the hang.
    before = f"; {len(failed)}/{len(checks)} failed first: {failed[0]['name']}: {failed[0]['detail']}" if failed else ""
    if reason == "timeout":
        if all(rank["done"] for rank in ranks):
            return "fail", "hung in destroy_process_group or at exit" + before
        stuck = "; ".join(f"rank {i} after {rank['last'] or 'group set-up'}" for i, rank in enumerate(ranks)
                          if not rank["done"])
        return "timeout", f"{limit_s:.0f} s: {stuck}{before}"
    if reason == "hung at exit":
        return "fail", "every rank finished, a process did not exit" + before
    # A rank killed by a signal (not ours: the supervisor's is SIGKILL) explains its peers'
    # errors; a rank that raised explains its own exit code 3.
    signalled = [(i, code) for i, code in enumerate(exit_codes) if code is not None and code < 0
                 and code != -signal.SIGKILL]
    errors = [(i, rank["error"]) for i, rank in enumerate(ranks) if rank["error"]]
    other = [(i, code) for i, code in enumerate(exit_codes) if code != 0 and not ranks[i]["error"]]
    if signalled or (other and not errors):
        i, code = (signalled or other)[0]
        return "crash", f"rank {i} {exit_text(code)} after {ranks[i]['last'] or 'group set-up'}"
    if errors:
        i, error = errors[0]
        return "fail", f"rank {i}: {error['detail']}"
    if failed:
        first = failed[0]
        return "fail", f"{len(failed)}/{len(checks)}: {first['name']}: {first['detail']}"
    weak = sum(c["weak"] for c in checks)
    text = ranks[0]["notes"].get("headline") if ranks else None
    text = text or f"{len(checks)} checks"
    return "pass", text + (f" ({weak} of {len(checks)} checks are identities on one rank)" if weak else "")


# ---------------------------------------------------------------------------------------------
# The whole check


class Check:
    """One whole check: the plan (ranks per run, backends), the runs, their results, the report."""

    def __init__(self, args, env: dict, backends: list[str]) -> None:
        self.args, self.env, self.backends = args, env, backends
        self.started = time.monotonic()
        self.deadline = self.started + args.deadline
        self.work_dir = tempfile.mkdtemp(prefix="gpu_check.")
        self.out_dir = args.out
        self.results: list[dict] = []
        self.broken: dict[str, str] = {}  # backend -> why its remaining runs are not started
        self.world, self.world_reason = 1, ""
        self.ctx = mp.get_context(args.start_method)
        if args.start_method == "forkserver":
            # Ranks fork from a server that imported torch once (no CUDA touched): a run starts in
            # well under a second instead of importing torch in every rank.
            self.ctx.set_forkserver_preload(["__main__", "_gpu_probes", "torch", "torch.distributed"])
            # Start the server now, so that its import of torch is not charged to the first run.
            warm_up = self.ctx.Process(target=time.sleep, args=(0,))
            warm_up.start()
            warm_up.join()

    # -- running
    def run(self, probe, backend: str | None, world: int) -> dict:
        result = {"probe": probe.name, "backend": backend, "world": world if probe.group else 1}
        remaining = self.deadline - time.monotonic()
        why_not = self._why_not(probe, backend, world)
        if why_not:
            result.update(verdict="not run", detail=why_not)
        elif remaining < MIN_RUN_S:
            result.update(verdict="skipped", detail="deadline")
        else:
            result.update(self._execute(probe, backend, world if probe.group else 1,
                                        min(probe.limit_s, remaining - RESERVE_S)))
        # A backend that hangs, dies or cannot even form the group with two ranks would do the
        # same in every later run: its time goes to the others.
        set_up_failed = result["verdict"] == "fail" and not any(rank["checks"] for rank in result.get("ranks", []))
        if probe.name == "two_ranks" and backend and (result["verdict"] in ("timeout", "crash") or set_up_failed):
            self.broken[backend] = f"two_ranks: {result['verdict']}: {result['detail'][:80]}"
        self.results.append(result)
        self._progress(result)
        self.write_json()
        return result

    def _why_not(self, probe, backend: str | None, world: int) -> str:
        if probe.two_ranks and world < 2:
            return self.world_reason
        if backend in self.broken:
            return self.broken[backend]
        return ""

    def _execute(self, probe, backend: str | None, world: int, limit_s: float) -> dict:
        run_dir = tempfile.mkdtemp(prefix=f"{probe.name}.{backend or 'none'}.", dir=self.work_dir)
        port = free_port()
        shares_gpu = world > self.env["gpus"]
        paths = [os.path.join(run_dir, f"rank{rank}.jsonl") for rank in range(world)]
        procs = []
        started = time.monotonic()
        for rank in range(world):
            spec = {"probe": probe.name, "backend": backend, "rank": rank, "world": world,
                    "settings": {"groups": self.args.groups}, "run_dir": run_dir,
                    "env": rank_environment(rank, world, port, run_dir, shares_gpu, probe),
                    "log": os.path.join(run_dir, f"rank{rank}.log"), "result": paths[rank],
                    "stack_dump_after_s": max(1.0, limit_s - 3)}
            proc = self.ctx.Process(target=probes.rank_main, args=(spec,), name=f"{probe.name}:{backend}:{rank}")
            proc.start()
            procs.append(proc)
        reason = supervise(procs, limit_s, paths)
        ranks = [read_rank(path) for path in paths]
        exit_codes = [p.exitcode for p in procs]
        verdict, detail = judge(ranks, reason, exit_codes, limit_s)
        if verdict == "timeout" and limit_s < probe.limit_s:
            detail += f" (limit cut from {probe.limit_s:.0f} s by the deadline)"
        result = {"verdict": verdict, "detail": detail, "seconds": round(time.monotonic() - started, 1),
                  "limit_s": round(limit_s, 1), "ended_by_check": reason or None, "exit_codes": exit_codes,
                  "ranks": ranks, "files": sorted(os.listdir(run_dir))}
        if verdict != "pass":
            result["log_tails"] = [_text(os.path.join(run_dir, f"rank{rank}.log"))[-2000:] for rank in range(world)]
            self._keep_logs(run_dir, f"{probe.name}.{backend or 'none'}")
        return result

    def _keep_logs(self, run_dir: str, label: str) -> None:
        if not self.out_dir:
            return
        folder = os.path.join(self.out_dir, "gpu_check_logs")
        os.makedirs(folder, exist_ok=True)
        for path in glob.glob(os.path.join(run_dir, "rank*.log")):
            with open(path, "rb") as src, open(os.path.join(folder, f"{label}.{os.path.basename(path)}"), "wb") as dst:
                src.seek(max(0, os.path.getsize(path) - (64 << 10)))  # the last 64 KiB of each
                dst.write(src.read())

    def _progress(self, result: dict) -> None:
        elapsed = time.monotonic() - self.started
        print(f"[{elapsed:5.0f} s] {result['probe']:<14}{result['backend'] or '(no group)':<16}"
              f"{result['verdict']}: {result['detail'][:110]}", file=sys.stderr, flush=True)

    # -- the plan
    def decide_world(self, selected: list) -> None:
        """Two ranks on the GPU where NCCL allows it, confirmed by the two_ranks probe under
        torch's backend (ours are what is being tested); else one rank."""
        env, choice = self.env, self.args.world
        library = f"{os.path.basename(env['libnccl'] or 'libnccl (not found)')} (NCCL {env['nccl']})"
        if choice == "1":
            self.world, self.world_reason = 1, "one rank: --world 1"
            return
        if env["gpus"] >= 2:
            self.world, self.world_reason = 2, f"two ranks on {env['gpus']} GPUs, one GPU each"
            return
        if choice != "2" and not env["multi_rank_switch"]:
            self.world, self.world_reason = 1, f"one rank: {library} has no {MULTI_RANK_SWITCH}"
            return
        why = "--world 2" if choice == "2" else f"{library} has {MULTI_RANK_SWITCH}"
        two_ranks = probes.PROBES["two_ranks"]
        if two_ranks not in selected:
            self.world, self.world_reason = 2, f"two ranks on one GPU ({why}; two_ranks not run to confirm it)"
            return
        reference = next((b for b in self.backends if b not in OUR_BACKENDS), self.backends[0])
        result = self.run(two_ranks, reference, 2)
        if result["verdict"] == "pass":
            self.world = 2
            self.world_reason = f"two ranks on one GPU, {MULTI_RANK_SWITCH}=1 ({why}; works under {reference})"
        else:
            self.world = 1
            self.world_reason = (f"one rank: two ranks on one GPU failed under {reference} "
                                 f"({result['verdict']}: {result['detail']})")
            self.broken.pop(reference, None)  # it failed with two ranks; the one-rank runs ahead are another matter

    def run_all(self, selected: list) -> None:
        self.decide_world(selected)
        done = {(r["probe"], r["backend"]) for r in self.results}
        for probe in selected:
            for backend in (self.backends if probe.group else [None]):
                if (probe.name, backend) not in done:
                    self.run(probe, backend, self.world)

    # -- reporting
    def write_json(self) -> None:
        if not self.out_dir:
            return
        os.makedirs(self.out_dir, exist_ok=True)
        report = {"environment": self.env, "world": self.world, "world_reason": self.world_reason,
                  "deadline_s": self.args.deadline, "elapsed_s": round(time.monotonic() - self.started, 1),
                  "backends": self.backends, "runs": self.results, "comparisons": self.comparisons()}
        path = os.path.join(self.out_dir, "gpu_check.json")
        with open(path + ".tmp", "w") as f:
            json.dump(report, f, indent=1, default=str)
        os.replace(path + ".tmp", path)

    def result_of(self, probe: str, backend: str | None) -> dict | None:
        return next((r for r in self.results if r["probe"] == probe and r["backend"] == backend), None)

    def comparisons(self) -> list[dict]:
        rows = []
        for backend in (b for b in self.backends if b in OUR_BACKENDS):
            peer, same_behaviour = peer_of(backend, {b: self.env["torch_backends"][b] for b in self.backends
                                                     if b in self.env["torch_backends"]})
            ran = {r["probe"] for r in self.results if r["backend"] == backend}
            for probe in (name for name in probes.PROBES if name in ran):
                rows.append({"probe": probe, "backend": backend, "peer": peer, "same_behaviour": same_behaviour,
                             "result": compare(self.result_of(probe, backend), self.result_of(probe, peer))})
        return rows

    def markdown(self, selected: list) -> str:
        env = self.env
        gpu = env["gpu"] or next((r["ranks"][0]["notes"]["device"] for r in self.results
                                  if r.get("ranks") and "device" in r["ranks"][0]["notes"]), "GPU")
        title = (f"GPU check, {gpu}: torch {env['torch']} (CUDA {env['cuda']}, NCCL {env['nccl']}), "
                 f"{self.world_reason}; {time.monotonic() - self.started:.0f} s.")
        lines = [title, ""]
        grouped = [p for p in selected if p.group]
        labels = [b if b in OUR_BACKENDS else f"{b} (torch)" for b in self.backends]
        lines += ["| probe | " + " | ".join(labels) + " |", "| --- |" + " --- |" * len(labels)]
        for probe in grouped:
            cells = [cell(self.result_of(probe.name, b)) for b in self.backends]
            lines.append(f"| {probe.name} | " + " | ".join(cells) + " |")
        for probe in (p for p in selected if not p.group):
            lines += ["", f"- {probe.name} (no group): {cell(self.result_of(probe.name, None), width=200)}"]
        by_key = {(c["probe"], c["backend"]): c for c in self.comparisons()}
        ours = [b for b in self.backends if b in OUR_BACKENDS]
        if ours and any(c["peer"] for c in by_key.values()):
            heads = []
            for backend in ours:
                peer, same = peer_of(backend, {b: env["torch_backends"][b] for b in self.backends
                                               if b in env["torch_backends"]})
                heads.append(f"{backend} vs {'' if same else '~'}{peer}" if peer else f"{backend} (no torch peer)")
            legend = ("Ours against torch's backend of the same behaviour (~: this torch lacks that behaviour; "
                      "its legacy backend stands in, under the same contract for values, streams and errors).")
            lines += ["", legend, "", "| probe | " + " | ".join(heads) + " |", "| --- |" + " --- |" * len(heads)]
            for probe in grouped:
                cells = [_escape(by_key.get((probe.name, b), {}).get("result", "–"))[:110] for b in ours]
                lines.append(f"| {probe.name} | " + " | ".join(cells) + " |")
        return "\n".join(lines)


def _escape(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def cell(result: dict | None, width: int = 90) -> str:
    if result is None:
        return "–"
    text = f"{result['verdict']}: {result['detail']}" if result["detail"] else result["verdict"]
    text = _escape(text)
    return text if len(text) <= width else text[:width - 1] + "…"


def signatures(result: dict) -> dict:
    return {(i, c["name"]): c["sig"] for i, rank in enumerate(result.get("ranks", [])) for c in rank["checks"]}


def compare(ours: dict | None, theirs: dict | None) -> str:
    """Whether our run came out as torch's did: same verdict, and the same outcome (ok, wrong,
    or the exception type) for every check both made."""
    if ours is None or theirs is None:
        return "–"
    if ours["verdict"] in NOT_RUN or theirs["verdict"] in NOT_RUN:
        return f"– (ours {ours['verdict']}, torch {theirs['verdict']})"
    mine, other = signatures(ours), signatures(theirs)
    differing: dict[str, str] = {}
    for key in sorted(mine.keys() & other.keys()):
        if mine[key] != other[key] and key[1] not in differing:
            differing[key[1]] = f"{key[1]}: ours {mine[key]}, torch {other[key]}"
    parts = []
    if ours["verdict"] != theirs["verdict"]:
        parts.append(f"ours {ours['verdict']}, torch {theirs['verdict']}")
    parts += list(differing.values())[:2]
    if not parts:
        return "same"
    more = len(differing) - 2
    return "differs: " + "; ".join(parts) + (f" (+{more} more checks)" if more > 0 else "")


# ---------------------------------------------------------------------------------------------
# Command line


def parse_args(argv):
    names = ", ".join(probes.PROBES)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="probes, in run order: " + names + " (--list says what each asserts)")
    parser.add_argument("--list", action="store_true", help="print the probes and backends that would run, then exit")
    parser.add_argument("--probe", action="append", metavar="NAME", help="run only this probe (repeatable)")
    parser.add_argument("--backend", action="append", metavar="NAME",
                        help="run only this backend (repeatable): ours (migrate-legacy, migrate-nccl2, migrate-lazy) "
                             "or torch's (nccl, nccl-legacy, nccl2, nccl-lazy, whichever this torch has)")
    parser.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE_S, metavar="S",
                        help="seconds for the whole check; runs still due then are reported skipped "
                             f"(default {DEFAULT_DEADLINE_S:.0f})")
    parser.add_argument("--out", default=os.environ.get("OUT") or None, metavar="DIR",
                        help="write gpu_check.json and the logs of runs that did not pass here (default $OUT)")
    parser.add_argument("--world", choices=("auto", "1", "2"), default="auto",
                        help="ranks per run: auto (two where NCCL lets two ranks share the GPU), 1, or 2")
    parser.add_argument("--groups", type=int, default=4, metavar="N",
                        help="subgroups the subgroups probe creates (default 4)")
    parser.add_argument("--start-method", choices=("forkserver", "spawn"), default="forkserver",
                        help="how rank processes start (default forkserver: torch imported once)")
    return parser.parse_args(argv)


def select(args, env: dict) -> tuple[list, list[str]]:
    """The probes and backends to run, in run order; raises SystemExit(2) on an unknown name."""
    wanted = args.probe or list(probes.PROBES)
    unknown = [p for p in wanted if p not in probes.PROBES]
    torch_names = list(env["torch_backends"])
    # torch's legacy backend first: it decides whether two ranks can share the GPU.
    everything = [n for n in torch_names if env["torch_backends"][n] == "legacy"] + list(OUR_BACKENDS) + \
        [n for n in torch_names if env["torch_backends"][n] != "legacy"]
    backends = args.backend or everything
    unknown += [b for b in backends if b not in everything]
    if unknown:
        print(f"gpu_check: unknown probe or backend: {', '.join(unknown)} (probes: {', '.join(probes.PROBES)}; "
              f"backends here: {', '.join(everything)})", file=sys.stderr)
        raise SystemExit(2)
    return [p for p in probes.PROBES.values() if p.name in wanted], [b for b in everything if b in backends]


def print_list(env: dict, selected: list, backends: list[str], args) -> None:
    print(f"torch {env['torch']}, CUDA {env['cuda']}, NCCL {env['nccl']}, GPUs: {env['gpus']}"
          + ("" if env["gpus"] else " (no CUDA device here: a run would stop at once)"))
    print(f"libnccl: {env['libnccl']}; {MULTI_RANK_SWITCH} in it: {env['multi_rank_switch']}")
    if args.world != "auto":
        print(f"ranks per run: {args.world} (--world)")
    elif env["multi_rank_switch"] or env["gpus"] >= 2:
        print("ranks per run: two (if two_ranks passes under torch's backend), else one")
    else:
        print("ranks per run: one (this NCCL cannot put two ranks on one GPU)")
    print(f"our backends built: {env['ours_built']}\n\nbackends:")
    torch_names = {b: env["torch_backends"][b] for b in backends if b in env["torch_backends"]}
    for backend in backends:
        if backend in OUR_BACKENDS:
            peer, same = peer_of(backend, torch_names)
            if peer:
                against = f"compared with {peer}" + ("" if same else " (this torch lacks the behaviour)")
            else:
                against = "no torch peer"
            print(f"  {backend:<16}ours, {OUR_BACKENDS[backend]}; {against}")
        else:
            print(f"  {backend:<16}torch's, {env['torch_backends'][backend]}")
    print(f"\nprobes (deadline {args.deadline:.0f} s for all):")
    for probe in selected:
        ranks = "2 ranks" if probe.two_ranks else "1-2 ranks" if probe.group else "no group"
        print(f"  {probe.name:<14}{ranks:<10}{probe.limit_s:>4.0f} s  {probe.asserts}")


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
        print("gpu_check: no CUDA device: this check needs a GPU (nothing was run; the CPU test suites cover the rest)",
              file=sys.stderr)
        return 2
    if not env["ours_built"] and any(b in OUR_BACKENDS for b in backends):
        print(f"gpu_check: nccl_migrate's native module for this Python is not built (python/nccl_migrate/_C"
              f"{importlib.machinery.EXTENSION_SUFFIXES[0]}); build it first, or run only torch's backends "
              "(--backend)", file=sys.stderr)
        return 2
    env["removed_caller_variables"] = clean_environment()
    check = Check(args, env, backends)
    try:
        check.run_all(selected)
    finally:
        check.write_json()
        shutil.rmtree(check.work_dir, ignore_errors=True)
    print(check.markdown(selected))
    ours = [r for r in check.results if r["backend"] in OUR_BACKENDS or r["backend"] is None]
    if any(r["verdict"] in FAILED for r in ours):
        return 1
    return 3 if any(r["verdict"] == "skipped" for r in ours) else 0


if __name__ == "__main__":
    sys.exit(main())
