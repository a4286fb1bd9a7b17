"""The rank side of tests/gpu/gpu_check.py: what the probes share (a report written a line at a
time, so a rank that hangs or dies still leaves what it checked; expected values computed on the
host; a GPU sleep measured in seconds) and the probes of values, stream order, batches, capture,
timeouts, subgroups, errors and the A/B recorder, one function each, run by every rank of a
world. gpu_probes_async.py has the rest; gpu_probe_table.py lists them all.

Nothing here imports nccl_migrate at module level. Importing it activates the shim, which asks the
CUDA driver for devices; the driver's fork server preloads this module, and children forked from
a process that touched the driver cannot use CUDA. Ranks of torch's own backends import it only
after their group exists (the recording probe), because the shim re-routes torch's NCCL names:
on torch 2.11 it would send ``nccl`` to our rewritten backend, and we would compare ours with ours.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import NamedTuple

import torch
import torch.distributed as dist

# Our backends and the behaviour each runs (python/nccl_migrate/_registration.py's BACKEND_NAMES,
# repeated here because importing it would activate the shim; see the module docstring).
OUR_BACKENDS = {"migrate-legacy": "legacy", "migrate-nccl2": "rewritten", "migrate-lazy": "rewritten-lazy-p2p"}

SLEEP_S = 1.0  # how long the timing probes stall the GPU before an op
HOST_FAST_S = 0.2  # "returns at once": far below SLEEP_S, far above the cost of issuing an op
GROUP_TIMEOUT_S = 5.0  # the timeout probe's group timeout
N = 37  # elements of the value probes' tensors: small, odd, not a multiple of any vector width
# Why a check of an unchanged value proves nothing on one rank: NCCL's one-rank path
# (ncclLaunchOneRank) copies, scales for PREMUL_SUM, or does nothing.
IDENTITY = "NCCL leaves one rank's data as it is (SUM, PRODUCT, MIN, MAX, AVG, broadcast and reduce in place)"

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
ALL_DTYPES = FLOAT_DTYPES + (torch.int32, torch.int64, torch.int8, torch.uint8, torch.bool)


# ---------------------------------------------------------------------------------------------
# What a rank reports, and the helpers every probe uses


class Report:
    """One rank's findings, one JSON object a line, flushed as written: the driver reads them
    even when it had to kill the rank."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - open for the rank's whole life

    def write(self, **entry) -> None:
        self._file.write(json.dumps(entry, default=str) + "\n")
        self._file.flush()


def describe(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:240] if lines else ''}"


def _same(got, expected) -> tuple[bool, str]:
    """Whether ``got`` equals ``expected`` exactly (tensors, lists of them, or Python objects),
    and where it first differs."""
    if isinstance(expected, torch.Tensor):
        got = got.detach().cpu()
        if got.dtype != expected.dtype or got.shape != expected.shape:
            return False, f"got {got.dtype}{list(got.shape)}, expected {expected.dtype}{list(expected.shape)}"
        if torch.equal(got, expected):
            return True, ""
        # NaN (the float sentinel) differs from everything, so a skipped write shows here too.
        index = int((got != expected).flatten().nonzero()[0])
        return False, f"[{index}] = {got.flatten()[index].item()}, expected {expected.flatten()[index].item()}"
    if isinstance(expected, list) and expected and isinstance(expected[0], torch.Tensor):
        if len(got) != len(expected):
            return False, f"{len(got)} tensors, expected {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            ok, where = _same(g, e)
            if not ok:
                return False, f"tensor {i}: {where}"
        return True, ""
    return got == expected, "" if got == expected else f"got {str(got)[:120]}, expected {str(expected)[:120]}"


class GpuSleep:
    """``torch.cuda._sleep`` spins for GPU clock cycles; this turns seconds into cycles, measured
    once with events around a known spin (the clock differs between GPUs and boost states)."""

    def __init__(self) -> None:
        torch.cuda._sleep(1_000_000)  # the first launch loads the kernel; keep it out of the measurement
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 50_000_000
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        self.cycles_per_s = cycles / (start.elapsed_time(end) / 1e3)

    def __call__(self, seconds: float) -> None:
        torch.cuda._sleep(int(seconds * self.cycles_per_s))


class Rank:
    """One rank of a probe run: who it is, its group, and the ways it records findings."""

    def __init__(self, spec: dict, report: Report) -> None:
        self.rank, self.world, self.backend = spec["rank"], spec["world"], spec["backend"]
        self.ours = self.backend in OUR_BACKENDS
        self.settings = spec["settings"]
        self.run_dir = spec["run_dir"]
        self.report = report
        self.skip_teardown = False  # set by a probe whose rank must leave without a collective teardown
        self.probe: str | None = None  # the probe running now: every finding is filed under it
        gpus = torch.cuda.device_count()
        # No GPU: only probes that touch none can run (the check refuses to start without one).
        self.device = torch.device("cuda", self.rank % gpus) if gpus else None
        self._sleep: GpuSleep | None = None

    # -- the group
    def join_group(self, timeout_s: float | None) -> None:
        if self.ours:
            import nccl_migrate  # noqa: F401 - registers migrate-*
        torch.cuda.set_device(self.device)
        kwargs = {} if timeout_s is None else {"timeout": timedelta(seconds=timeout_s)}
        # Bound to the device, as jobs run: torch connects the world eagerly and subgroups split it.
        dist.init_process_group(self.backend, rank=self.rank, world_size=self.world, device_id=self.device, **kwargs)
        if self.rank == 0:
            self.note("device", torch.cuda.get_device_name(self.device))
        self._sleep = GpuSleep()  # measured now, not inside a probe's stream-ordered section

    def sleep(self, seconds: float) -> None:
        """Stalls the current stream for ``seconds`` without blocking the host."""
        if self._sleep is None:
            self._sleep = GpuSleep()
        self._sleep(seconds)

    def peer_done(self, peer: int, limit_s: float) -> bool:
        """Waits (on the host) until rank ``peer`` has reported its probe done."""
        path = os.path.join(self.run_dir, f"rank{peer}.jsonl")
        end = time.monotonic() + limit_s
        while time.monotonic() < end:
            if os.path.exists(path):
                with open(path) as f:
                    if '"k": "done"' in f.read():
                        return True
            time.sleep(0.1)
        return False

    # -- findings
    def check(self, name: str, ok: bool, detail: str = "", sig: str | None = None, weak: str = "") -> bool:
        """One assertion. ``sig`` is what the comparison with torch's backend compares (default
        ok/wrong); ``weak`` says why the check cannot fail at this rank count (empty: it can)."""
        self.report.write(k="check", probe=self.probe, name=name, ok=bool(ok), detail=detail,
                          sig=sig or ("ok" if ok else "wrong"), weak=weak)
        return bool(ok)

    def at_one_rank(self, why: str) -> str:
        """``why`` where this run has one rank, else nothing: the ``weak`` of a check that only a
        second rank can make fail."""
        return why if self.world == 1 else ""

    def note(self, name: str, value) -> None:
        self.report.write(k="note", probe=self.probe, name=name, value=value)

    def headline(self, text: str) -> None:
        """The short text of this run's table cell when it passes (rank 0's)."""
        if self.rank == 0:
            self.note("headline", text)

    def attempt(self, name: str, action: Callable[[], object], got, expected, weak: str = "") -> bool:
        """Runs ``action`` (the ops), then compares what ``got`` (their output tensors, or any
        object they fill in) holds with ``expected``. An exception is the check's outcome."""
        try:
            action()
        except Exception as error:  # noqa: BLE001 - the exception is the finding
            return self.check(name, False, describe(error), sig=f"raised {type(error).__name__}")
        return self.expect(name, got, expected, weak)

    def expect(self, name: str, got, expected, weak: str = "") -> bool:
        """Compares ``got`` with ``expected``. No synchronize: reading a tensor on the host orders
        after the current stream, which is all torch promises about an op's result."""
        try:
            ok, where = _same(got, expected)
        except Exception as error:  # noqa: BLE001 - a sticky CUDA error surfaces here
            return self.check(name, False, describe(error), sig=f"raised {type(error).__name__}")
        return self.check(name, ok, where, weak=weak if ok else "")

    def fast(self, name: str, seconds: float) -> bool:
        return self.check(name, seconds < HOST_FAST_S, f"{seconds * 1e3:.2f} ms")

    def slow(self, name: str, seconds: float) -> bool:
        return self.check(name, seconds >= 0.5 * SLEEP_S, f"{seconds:.2f} s")


def finishes_within(fn: Callable[[], object], seconds: float) -> tuple[bool, str]:
    """Runs ``fn`` on a thread; whether it returned within ``seconds`` (a call stuck in CUDA must
    not hang the probe), and its error if it raised."""
    outcome: dict = {}

    def run() -> None:
        try:
            fn()
            outcome["ok"] = True
        except Exception as error:  # noqa: BLE001
            outcome["error"] = describe(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        return False, f"still running after {seconds:.0f} s"
    return "ok" in outcome, outcome.get("error", "")


# ---------------------------------------------------------------------------------------------
# Host-side values


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def pattern(rank: int, dtype: torch.dtype, n: int = N, salt: int = 0) -> torch.Tensor:
    """Rank-dependent values (on the host) small enough that every reduction below is exact in
    every dtype: -4..4 (0..8 for uint8), so sums, products of two and x3 stay within int8/bf16."""
    i = torch.arange(n)
    if dtype == torch.bool:
        return (i + rank + salt) % 3 == 0
    base = (i * 3 + rank * 5 + salt * 7) % 9
    return (base if dtype == torch.uint8 else base - 4).to(dtype)


def sentinel_like(expected: torch.Tensor) -> torch.Tensor:
    """An output's prefill that no correct result contains, so an op that writes nothing fails."""
    if expected.dtype == torch.bool:
        return ~expected
    if expected.dtype.is_floating_point:
        return torch.full_like(expected, float("nan"))
    return torch.full_like(expected, 177 if expected.dtype == torch.uint8 else -77)


def host_reduce(inputs: list[torch.Tensor], op: str, factor: float | None = None) -> torch.Tensor:
    """What NCCL computes for reduction ``op`` over the ranks' ``inputs`` (bool SUM and MAX are
    logical or, PRODUCT and MIN logical and, as torch maps them)."""
    dtype = inputs[0].dtype
    stacked = torch.stack(inputs)
    if dtype == torch.bool:
        return stacked.any(0) if op in ("SUM", "MAX") else stacked.all(0)
    wide = stacked.double()
    value = {
        "SUM": lambda: wide.sum(0),
        "PRODUCT": lambda: wide.prod(0),
        "MIN": lambda: wide.min(0).values,
        "MAX": lambda: wide.max(0).values,
        "AVG": lambda: wide.mean(0),
        "PREMUL_SUM": lambda: wide.sum(0) * factor,
        "PREMUL_SUM tensor": lambda: wide.sum(0) * factor,
    }[op]()
    return value.to(dtype)


def reductions_for(dtype: torch.dtype) -> list[str]:
    ops = ["SUM", "PRODUCT", "MIN", "MAX"]
    if dtype.is_floating_point:
        ops += ["AVG", "PREMUL_SUM", "PREMUL_SUM tensor"]
    return ops


def reduce_op(op: str, dtype: torch.dtype, device: torch.device):
    """The ReduceOp for ``op`` and its factor: PREMUL_SUM by 3.0 (a host float) or by 2.0 (a
    one-element tensor of the input's dtype on the device, as torch requires)."""
    if op == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(3.0), 3.0
    if op == "PREMUL_SUM tensor":
        return dist._make_nccl_premul_sum(torch.full((1,), 2.0, dtype=dtype, device=device)), 2.0
    return getattr(dist.ReduceOp, op), None


class Reduction(NamedTuple):
    label: str
    op: Callable[[], object]  # a fresh ReduceOp per call (a PREMUL_SUM op is used once)
    host: Callable[[list[torch.Tensor]], torch.Tensor]


def changing_reduction(world: int) -> Reduction:
    """An all_reduce that changes its input, with its host-side value. SUM needs a second rank
    to change anything (as do AVG, MIN and MAX); on one rank only PREMUL_SUM (x3) does."""
    if world > 1:
        return Reduction("SUM", lambda: dist.ReduceOp.SUM, lambda inputs: host_reduce(inputs, "SUM"))
    return Reduction("PREMUL_SUM x3", lambda: dist._make_nccl_premul_sum(3.0),
                     lambda inputs: host_reduce(inputs, "PREMUL_SUM", 3.0))


# ---------------------------------------------------------------------------------------------
# The probes. Each runs in every rank; the ranks of one run issue the same collectives in the
# same order. A check's name is the same on every backend, so the driver can compare them.


def probe_two_ranks(r: Rank) -> None:
    """Two ranks share the GPU: a SUM all_reduce and an all_gather of rank-dependent values."""
    r.note("nccl_version", ".".join(map(str, torch.cuda.nccl.version())))
    inputs = [pattern(q, torch.float32) for q in range(r.world)]
    t = inputs[r.rank].to(r.device, copy=True)
    r.attempt("all_reduce SUM float32", partial(dist.all_reduce, t), t, host_reduce(inputs, "SUM"))
    out = sentinel_like(torch.cat(inputs)).to(r.device, copy=True)
    mine = inputs[r.rank].to(r.device, copy=True)
    r.attempt("all_gather_into_tensor float32", partial(dist.all_gather_into_tensor, out, mine), out,
              torch.cat(inputs))
    r.headline(f"{r.world} ranks on {torch.cuda.get_device_name(r.device)}")


def probe_values(r: Rank) -> None:
    """Every op, dtype and reduction with rank-dependent inputs and sentinel-filled outputs."""
    _values_reductions(r)
    _values_gathers(r)
    _values_all_to_all(r)
    _values_p2p(r)
    _values_large(r)


def _values_reductions(r: Rank) -> None:
    # Root and source are the last rank, not rank 0, so a backend that ignores them shows.
    root = r.world - 1
    for dtype in ALL_DTYPES:
        name = dtype_name(dtype)
        inputs = [pattern(q, dtype) for q in range(r.world)]
        for op in reductions_for(dtype):
            red, factor = reduce_op(op, dtype, r.device)
            t = inputs[r.rank].to(r.device, copy=True)
            # On one rank only PREMUL_SUM changes its input: the others pass by doing nothing.
            weak = "" if op.startswith("PREMUL") else r.at_one_rank(IDENTITY)
            r.attempt(f"all_reduce {op} {name}", partial(dist.all_reduce, t, op=red), t,
                      host_reduce(inputs, op, factor), weak=weak)
        for op in ["SUM", "MAX"] + (["PREMUL_SUM"] if dtype.is_floating_point else []):
            red, factor = reduce_op(op, dtype, r.device)
            t = inputs[r.rank].to(r.device, copy=True)
            # NCCL leaves a non-root's buffer alone (torch's Gloo does not): checked apart.
            if r.rank == root:
                check, expected = f"reduce {op} {name} to last rank", host_reduce(inputs, op, factor)
            else:
                check, expected = f"reduce {op} {name}: non-root buffer untouched", inputs[r.rank]
            r.attempt(check, partial(dist.reduce, t, root, op=red), t, expected,
                      weak="" if op == "PREMUL_SUM" else r.at_one_rank(IDENTITY))
        t = pattern(r.rank, dtype, salt=1).to(r.device, copy=True)
        r.attempt(f"broadcast {name} from last rank", partial(dist.broadcast, t, root), t,
                  pattern(root, dtype, salt=1), weak=r.at_one_rank(IDENTITY))


def _values_gathers(r: Rank) -> None:
    root = r.world - 1
    for dtype in ALL_DTYPES:
        name = dtype_name(dtype)
        inputs = [pattern(q, dtype, salt=2) for q in range(r.world)]
        mine = inputs[r.rank].to(r.device, copy=True)
        outs = [sentinel_like(e).to(r.device, copy=True) for e in inputs]
        r.attempt(f"all_gather list {name}", partial(dist.all_gather, outs, mine), outs, inputs)
        flat = sentinel_like(torch.cat(inputs)).to(r.device, copy=True)
        r.attempt(f"all_gather_into_tensor {name}", partial(dist.all_gather_into_tensor, flat, mine), flat,
                  torch.cat(inputs))
        # Rank q contributes chunk j to rank j; rank j receives the SUM of its chunk over q.
        chunks = [[pattern(q, dtype, salt=10 + j) for j in range(r.world)] for q in range(r.world)]
        expected = host_reduce([chunks[q][r.rank] for q in range(r.world)], "SUM")
        out = sentinel_like(expected).to(r.device, copy=True)
        mine = [c.to(r.device, copy=True) for c in chunks[r.rank]]
        r.attempt(f"reduce_scatter list SUM {name}", partial(dist.reduce_scatter, out, mine), out, expected)
        out_single = sentinel_like(expected).to(r.device, copy=True)
        r.attempt(f"reduce_scatter_tensor SUM {name}",
                  partial(dist.reduce_scatter_tensor, out_single, torch.cat(mine)), out_single, expected)
    for dtype in (torch.float32, torch.bfloat16, torch.int8, torch.bool):
        name = dtype_name(dtype)
        inputs = [pattern(q, dtype, salt=3) for q in range(r.world)]
        gathered = [sentinel_like(e).to(r.device, copy=True) for e in inputs] if r.rank == root else None
        mine = inputs[r.rank].to(r.device, copy=True)
        r.attempt(f"gather {name} to last rank", partial(dist.gather, mine, gathered, dst=root), gathered,
                  inputs if r.rank == root else None)
        parts = [pattern(root, dtype, salt=20 + j) for j in range(r.world)]
        out = sentinel_like(parts[r.rank]).to(r.device, copy=True)
        scattered = [p.to(r.device, copy=True) for p in parts] if r.rank == root else None
        r.attempt(f"scatter {name} from last rank", partial(dist.scatter, out, scattered, src=root), out,
                  parts[r.rank])


def _values_all_to_all(r: Rank) -> None:
    def split(src: int, dst: int) -> int:
        return 1 + src + 2 * dst  # uneven both ways: every pair sends a different count

    def chunk(src: int, dst: int, dtype: torch.dtype) -> torch.Tensor:
        # Values name their sender, receiver and position; at most 114, exact in bfloat16.
        return (src * 100 + dst * 10 + torch.arange(split(src, dst))).to(dtype)

    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        inp = torch.cat([chunk(r.rank, j, dtype) for j in range(r.world)]).to(r.device, copy=True)
        expected = torch.cat([chunk(q, r.rank, dtype) for q in range(r.world)])
        out = sentinel_like(expected).to(r.device, copy=True)
        receive = [split(q, r.rank) for q in range(r.world)]
        send = [split(r.rank, j) for j in range(r.world)]
        r.attempt(f"all_to_all_single uneven {dtype_name(dtype)}",
                  partial(dist.all_to_all_single, out, inp, output_split_sizes=receive, input_split_sizes=send),
                  out, expected)


def _values_p2p(r: Rank) -> None:
    if r.world < 2:
        r.note("p2p", "not run: send/recv need two ranks")
        return
    sent = [pattern(q, torch.float32, salt=30) for q in range(r.world)]
    buf = sentinel_like(sent[0]).to(r.device, copy=True)
    # Rank 0 sends first and rank 1 receives first: both sending first could deadlock a backend
    # that runs a pair's sends and receives on one stream, which is not what this checks.
    mine = sent[r.rank].to(r.device, copy=True)
    if r.rank == 0:
        r.attempt("send 0 to 1", partial(dist.send, mine, 1), None, None)
        r.attempt("recv 1 to 0", partial(dist.recv, buf, 1), buf, sent[1])
    elif r.rank == 1:
        r.attempt("recv 0 to 1", partial(dist.recv, buf, 0), buf, sent[0])
        r.attempt("send 1 to 0", partial(dist.send, mine, 0), None, None)
    nxt, prv = (r.rank + 1) % r.world, (r.rank - 1) % r.world
    ring = [pattern(q, torch.int32, salt=40) for q in range(r.world)]
    recv = sentinel_like(ring[prv]).to(r.device, copy=True)
    ops = [dist.P2POp(dist.isend, ring[r.rank].to(r.device, copy=True), nxt), dist.P2POp(dist.irecv, recv, prv)]
    r.attempt("batch_isend_irecv ring int32", lambda: [w.wait() for w in dist.batch_isend_irecv(ops)], recv,
              ring[prv])


def _values_large(r: Rank) -> None:
    """32 MiB: NCCL splits it into many chunks and channels, unlike the 37-element tensors."""
    n = 1 << 23
    red = changing_reduction(r.world)
    inputs = [(torch.arange(n) % 251 + q).float() for q in range(r.world)]
    t = inputs[r.rank].to(r.device, copy=True)
    r.attempt("all_reduce 32 MiB float32", partial(dist.all_reduce, t, op=red.op()), t, red.host(inputs))
    out = torch.full((n * r.world,), float("nan"), device=r.device)
    mine = inputs[r.rank].to(r.device, copy=True)
    r.attempt("all_gather_into_tensor 32 MiB float32", partial(dist.all_gather_into_tensor, out, mine), out,
              torch.cat(inputs))


def probe_host_blocking(r: Rank) -> None:
    """torch's contract: an op, and wait() on its work, return to the host at once, and the
    caller's stream waits for the op; only barrier() and wait(timeout=...) block the host."""
    red = changing_reduction(r.world)
    values = [torch.full((1 << 20,), 1.0 + q) for q in range(r.world)]
    t = values[r.rank].to(r.device, copy=True)
    warm = t.clone()
    dist.all_reduce(warm)  # connect (and create any lazy communicator) before timing anything
    torch.cuda.synchronize()

    r.sleep(SLEEP_S)
    start = time.perf_counter()
    work = dist.all_reduce(t, op=red.op(), async_op=True)
    issued = time.perf_counter()
    work.wait()
    issue_s, wait_s = issued - start, time.perf_counter() - issued
    r.note("is_completed() right after wait()", work.is_completed())
    r.fast("all_reduce(async_op=True) returns at once", issue_s)
    r.fast("work.wait() returns at once (the stream waits, not the host)", wait_s)
    values = [red.host(values)] * r.world

    r.sleep(SLEEP_S)
    start = time.perf_counter()
    dist.all_reduce(t, op=red.op())
    r.fast("all_reduce() returns at once", time.perf_counter() - start)
    values = [red.host(values)] * r.world

    r.sleep(SLEEP_S)
    work = dist.all_reduce(t, op=red.op(), async_op=True)
    start = time.perf_counter()
    work.wait(timeout=timedelta(seconds=30))
    blocked = time.perf_counter() - start
    r.slow("work.wait(timeout=...) blocks until the op is done", blocked)
    values = [red.host(values)] * r.world

    r.sleep(SLEEP_S)
    start = time.perf_counter()
    dist.barrier()
    barrier_s = time.perf_counter() - start
    r.slow("barrier() blocks until the GPU is done", barrier_s)
    r.expect("values after the timed ops", t, values[r.rank])
    r.headline(f"issue {issue_s * 1e3:.1f} ms, wait() {wait_s * 1e3:.1f} ms, wait(timeout) {blocked:.2f} s, "
               f"barrier {barrier_s:.2f} s")


def probe_stream_order(r: Rank) -> None:
    """Ops order against the caller's stream with no synchronize(): inputs written by a kernel
    queued behind a GPU sleep, results read by later kernels, one synchronize() at the end."""
    red = changing_reduction(r.world)
    n = 1 << 20
    src = [(torch.arange(n) % 13 + 1 + q).float() for q in range(r.world)]
    mine = src[r.rank].to(r.device, copy=True)
    a, b, d = (torch.full((n,), float("nan"), device=r.device) for _ in range(3))
    c_in = torch.full((n,), float("nan"), device=r.device)
    c_out, e_out = (torch.full((n * r.world,), float("nan"), device=r.device) for _ in range(2))
    side = torch.cuda.Stream()
    torch.cuda.synchronize()  # the only synchronize before the end: everything below is stream-ordered
    current = torch.cuda.current_stream()

    r.sleep(SLEEP_S / 2)
    a.copy_(mine)
    dist.all_reduce(a, op=red.op())
    read_a = a * 2 + 1

    r.sleep(SLEEP_S / 2)
    b.copy_(mine)
    dist.all_reduce(b, op=red.op(), async_op=True).wait()
    read_b = b * 2 + 1

    r.sleep(SLEEP_S / 2)
    c_in.copy_(mine)
    dist.all_gather_into_tensor(c_out, c_in)
    read_c = c_out + 0

    # An op issued on another stream orders against that stream, not the default one.
    side.wait_stream(current)
    with torch.cuda.stream(side):
        r.sleep(SLEEP_S / 2)
        d.copy_(mine)
        dist.all_reduce(d, op=red.op())
        read_d = d * 2 + 1
    current.wait_stream(side)

    # An input freed right after issue: the allocator may give its memory to the next tensor of
    # this stream, which overwrites it unless the backend kept the input alive for the op. Rank 1
    # stalls longer, so rank 0's op is still waiting for it when the overwrite runs.
    r.sleep(SLEEP_S / 2 + 0.3 * r.rank)
    e_in = mine.clone()
    freed_at = e_in.data_ptr()
    work = dist.all_gather_into_tensor(e_out, e_in, async_op=True)
    del e_in
    overwrite = torch.full_like(mine, -5.0)
    r.note("freed input's memory reused by the next tensor", overwrite.data_ptr() == freed_at)
    work.wait()
    read_e = e_out + 0

    torch.cuda.synchronize()
    reduced = red.host(src)
    r.expect("sync all_reduce, input written after a GPU sleep", read_a, reduced * 2 + 1)
    r.expect("async all_reduce + wait()", read_b, reduced * 2 + 1)
    r.expect("all_gather_into_tensor, input written after a GPU sleep", read_c, torch.cat(src))
    r.expect("all_reduce issued on a side stream", read_d, reduced * 2 + 1)
    r.expect("input freed right after issue", read_e, torch.cat(src))


def probe_coalescing(r: Rank) -> None:
    """Ops of one coalesced batch order against the work queued between them. torch defers
    all_reduces in a batch to its end (one allreduce_coalesced), so the mid-batch write is
    tested there, and again with ops torch issues one by one (all_to_all_single, a list
    all_gather) inside the backend's start/endCoalescing."""
    from torch.distributed.distributed_c10d import _coalescing_manager

    red = changing_reduction(r.world)
    src = [[pattern(q, torch.float32, salt=50 + i) for i in range(2)] for q in range(r.world)]
    first = src[r.rank][0].to(r.device, copy=True)
    second = torch.full_like(first, float("nan"))
    # Device-resident before the batch: the mid-batch write is then a device-to-device copy queued
    # behind the GPU sleep, which the host does not wait for (a copy from pageable host memory
    # synchronizes the stream, and with it drains the sleep before the later ops are issued).
    second_src = src[r.rank][1].to(r.device, copy=True)
    torch.cuda.synchronize()
    try:
        with _coalescing_manager(async_ops=True) as cm:
            dist.all_reduce(first, op=red.op())
            r.sleep(SLEEP_S / 2)
            second.copy_(second_src)
            dist.all_reduce(second, op=red.op())
        cm.wait()
        read = [first + 0, second + 0]
        torch.cuda.synchronize()
        r.expect("all_reduce batch: first op", read[0], red.host([s[0] for s in src]))
        r.expect("all_reduce batch: input written mid-batch", read[1], red.host([s[1] for s in src]))
    except Exception as error:  # noqa: BLE001
        r.check("all_reduce batch", False, describe(error), sig=f"raised {type(error).__name__}")

    m = N  # elements each rank sends each peer
    a2a_in = [pattern(q, torch.float32, n=m * r.world, salt=60) for q in range(r.world)]
    late_in = [pattern(q, torch.float32, n=m * r.world, salt=61) for q in range(r.world)]

    def a2a_expected(inputs):
        return torch.cat([inputs[q][r.rank * m:(r.rank + 1) * m] for q in range(r.world)])

    in1 = a2a_in[r.rank].to(r.device, copy=True)
    in2 = torch.full((m * r.world,), float("nan"), device=r.device)
    out1, out2 = (torch.full((m * r.world,), float("nan"), device=r.device) for _ in range(2))
    gather_in = torch.full((N,), float("nan"), device=r.device)
    gathered = [torch.full((N,), float("nan"), device=r.device) for _ in range(r.world)]
    gather_src = [pattern(q, torch.float32, salt=62) for q in range(r.world)]
    late_mine = late_in[r.rank].to(r.device, copy=True)
    gather_mine = gather_src[r.rank].to(r.device, copy=True)
    torch.cuda.synchronize()
    try:
        # async_op=True inside the batch, as batch_isend_irecv does: a synchronous op's wait()
        # inside a batch is checked on its own below.
        with _coalescing_manager(device=r.device, async_ops=True) as cm:
            dist.all_to_all_single(out1, in1, async_op=True)
            r.sleep(SLEEP_S / 2)
            in2.copy_(late_mine)
            gather_in.copy_(gather_mine)
            dist.all_to_all_single(out2, in2, async_op=True)
            dist.all_gather(gathered, gather_in, async_op=True)
        cm.wait()
        read = [out1 + 0, out2 + 0] + [g + 0 for g in gathered]
        torch.cuda.synchronize()
        r.expect("batch: all_to_all_single before the write", read[0], a2a_expected(a2a_in))
        r.expect("batch: all_to_all_single of an input written mid-batch", read[1], a2a_expected(late_in))
        r.expect("batch: list all_gather", read[2:], gather_src)
    except Exception as error:  # noqa: BLE001
        r.check("batch of all_to_all_single and all_gather", False, describe(error),
                sig=f"raised {type(error).__name__}")

    # A synchronous op inside a batch: torch's backends return no work for it (the batch's work
    # comes from endCoalescing), so the Python API has nothing to wait on.
    t = pattern(r.rank, torch.float32, salt=63).to(r.device, copy=True)

    def sync_broadcast_in_batch():
        with _coalescing_manager(device=r.device, async_ops=True) as cm:
            dist.broadcast(t, r.world - 1)
        cm.wait()

    r.attempt("synchronous broadcast inside a batch", sync_broadcast_in_batch, t,
              pattern(r.world - 1, torch.float32, salt=63), weak=r.at_one_rank(IDENTITY))


def probe_list_forms(r: Rank) -> None:
    """dist.all_gather(list) and dist.reduce_scatter(list) outside any batch, their inputs written
    by device-to-device copies queued behind a GPU sleep, which the host does not wait for. A
    backend may run a list form as a group of NCCL calls; at one rank NCCL launches each call
    when it is made (taskAppend's ncclLaunchOneRank), so a backend that orders its stream after
    the caller's only at the group's end reads the inputs before the copies wrote them."""
    sources = [pattern(q, torch.float32, salt=70) for q in range(r.world)]
    chunks = [[pattern(q, torch.float32, salt=80 + j) for j in range(r.world)] for q in range(r.world)]
    gather_src = sources[r.rank].to(r.device, copy=True)
    chunk_src = [c.to(r.device, copy=True) for c in chunks[r.rank]]
    gather_in = torch.full((N,), float("nan"), device=r.device)
    gathered = [torch.full((N,), float("nan"), device=r.device) for _ in range(r.world)]
    scatter_in = [torch.full((N,), float("nan"), device=r.device) for _ in range(r.world)]
    scattered = torch.full((N,), float("nan"), device=r.device)
    # A staging buffer the backend allocates comes from the caching allocator: freed NaN blocks of
    # its size are there to be reused, so stale memory cannot hold the right values by chance.
    poison = [torch.full((N * r.world,), float("nan"), device=r.device) for _ in range(2)]
    del poison
    torch.cuda.synchronize()  # the only synchronize before the reads: everything below is stream-ordered

    r.sleep(SLEEP_S / 2)
    gather_in.copy_(gather_src)
    dist.all_gather(gathered, gather_in)
    read_gather = [g + 0 for g in gathered]

    r.sleep(SLEEP_S / 2)
    for dst, src in zip(scatter_in, chunk_src):
        dst.copy_(src)
    dist.reduce_scatter(scattered, scatter_in)
    read_scatter = scattered + 0

    torch.cuda.synchronize()
    r.expect("all_gather(list), input written behind a GPU sleep", read_gather, sources)
    r.expect("reduce_scatter(list) SUM, inputs written behind a GPU sleep", read_scatter,
             host_reduce([chunks[q][r.rank] for q in range(r.world)], "SUM"))
    r.headline("inputs written device to device behind a GPU sleep, results right")


def probe_graph(r: Rank) -> None:
    """An all_reduce captured in a CUDA graph (warmed up on a side stream first, as torch's docs
    require), replayed 3 times; the watchdog must survive the captured work (2 s of it) and the
    group must still run an ordinary op."""
    red = changing_reduction(r.world)
    n = 1 << 16
    start = [torch.full((n,), 1.0 + q) for q in range(r.world)]
    t = start[r.rank].to(r.device, copy=True)
    warm = t.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            dist.all_reduce(warm, op=red.op())
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            dist.all_reduce(t, op=red.op())
    except Exception as error:  # noqa: BLE001
        r.check("capture", False, describe(error), sig=f"raised {type(error).__name__}")
        return
    r.check("capture", True)
    t.copy_(start[r.rank])  # capture records the op without running it; start replays from here
    values = start
    for _ in range(3):
        graph.replay()
        values = [red.host(values)] * r.world
    r.attempt("3 replays", torch.cuda.synchronize, t, values[r.rank])
    time.sleep(2.0)  # the watchdog polls the captured work meanwhile
    u = start[r.rank].to(r.device, copy=True)
    r.attempt("an ordinary op after the replays", partial(dist.all_reduce, u, op=red.op()), u, red.host(start))


def probe_timeout(r: Rank) -> None:
    """A group with a 5 s timeout whose op cannot complete: with two ranks rank 1 stalls on the
    host and never joins; with one, the stream is stalled past the timeout. Rank 0's
    wait(timeout=30 s) must raise DistBackendError within about 5 s, and the process must go on."""
    t = torch.ones(1024, device=r.device)
    dist.all_reduce(t)  # every rank connected before one of them stalls
    torch.cuda.synchronize()
    if r.rank > 0:
        # The stalled rank: wait for rank 0's verdict, then leave without a collective teardown
        # (its peer's communicator is aborted; its own destroy could wait for that peer).
        r.note("rank 0 finished while this rank stalled", r.peer_done(0, limit_s=40))
        r.skip_teardown = True
        return
    if r.world == 1:
        r.sleep(GROUP_TIMEOUT_S + 4)  # the op is queued behind this and cannot finish in time
    start = time.perf_counter()
    error = None
    try:
        work = dist.all_reduce(t, async_op=True)
        work.wait(timeout=timedelta(seconds=30))
    except Exception as caught:  # noqa: BLE001 - the expected outcome
        error = caught
    elapsed = time.perf_counter() - start
    kind = type(error).__name__ if error is not None else "no error"
    r.note("error", describe(error) if error is not None else None)
    r.check("the op fails", error is not None, f"{kind} after {elapsed:.1f} s", sig=f"raised {kind}")
    r.check("the error is DistBackendError", isinstance(error, dist.DistBackendError), kind, sig=f"raised {kind}")
    r.check("it fails within the group timeout", GROUP_TIMEOUT_S - 1 <= elapsed <= GROUP_TIMEOUT_S + 10,
            f"{elapsed:.1f} s (timeout {GROUP_TIMEOUT_S:.0f} s)")
    # The aborted op's kernel must end, or the caller's stream stays blocked for good.
    ok, why = finishes_within(torch.cuda.synchronize, 15)
    r.check("the stream comes free after the failure", ok, why,
            weak=r.at_one_rank("the stall is a GPU sleep that ends by itself; no NCCL kernel waits for a peer"))
    dumps = [f for f in os.listdir(r.run_dir) if f.startswith(("fr_", "nccl_trace"))]
    r.note("flight recorder dumps", dumps)
    r.headline(f"{kind} after {elapsed:.1f} s")


def probe_subgroups(r: Rank) -> None:
    """Device memory and communicators of new subgroups before and after their first op (free
    memory is the whole device's: with two ranks on one GPU it counts both)."""
    count = r.settings["groups"]
    members = list(range(r.world))
    t = torch.ones(1024, device=r.device)
    dist.all_reduce(t)
    dist.barrier()
    torch.cuda.synchronize()

    def free_mib() -> float:
        dist.barrier()  # every rank is done with the step before anyone measures
        torch.cuda.synchronize()
        return torch.cuda.mem_get_info(r.device)[0] / (1 << 20)

    base = free_mib()
    groups = [dist.new_group(members) for _ in range(count)]
    created = base - free_mib()
    before = _communicator_counts(r, groups)
    for group in groups:
        dist.all_reduce(t, group=group)
    used = base - free_mib()
    after = _communicator_counts(r, groups)
    r.note("MiB after new_group", round(created, 1))
    r.note("MiB after one op each", round(used, 1))
    r.note("communicators per subgroup before / after first op", [before, after])
    # One SUM on the world, then one on each subgroup (all of the world's ranks).
    r.expect("subgroup ops give the right values", t, torch.full((1024,), float(r.world ** (count + 1))),
             weak=r.at_one_rank(IDENTITY))
    if r.ours:
        r.check("a communicator per subgroup after its first op", all(c >= 1 for c in after), str(after))
        if OUR_BACKENDS[r.backend] != "legacy":
            # Lazy subgroups are the rewritten behaviours' documented default (docs/backends.md).
            r.check("no communicator before first use", all(c == 0 for c in before), str(before))
            r.check("no device memory before first use", created < 16, f"{created:.0f} MiB")
    r.headline(f"{count} groups: {created:.0f} MiB at creation, {used:.0f} MiB after one op each")


def _communicator_counts(r: Rank, groups) -> list[int] | None:
    if not r.ours:
        return None
    import nccl_migrate

    return [len(nccl_migrate.communicators(group, r.device)) for group in groups]


def probe_exceptions(r: Rank) -> None:
    """The same invalid calls on every backend; the exception type of each is compared with
    torch's. "either" cases are recorded, not judged (our backends serve CPU tensors on purpose).
    Only calls that reach the backend: torch's Python layer rejects others (complex MAX, a bad
    root given to dist.broadcast) the same way whatever the backend."""
    dev = r.device
    world = dist.group.WORLD

    def backend_broadcast_root():
        opts = dist.BroadcastOptions()
        opts.rootRank = r.world  # past the last rank; on the group itself, below torch's Python checks
        world.broadcast([torch.ones(4, device=dev)], opts).wait()

    def backend_reduce_root():
        opts = dist.ReduceOptions()
        opts.rootRank = r.world
        world.reduce([torch.ones(4, device=dev)], opts).wait()

    cases: list[tuple[str, str, Callable[[], object]]] = [
        ("CPU tensor", "either", lambda: dist.all_reduce(torch.ones(4))),
        ("non-contiguous tensor", "raises", lambda: dist.all_reduce(torch.ones(4, 4, device=dev).t())),
        ("ReduceOp.BAND", "raises", lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32, device=dev),
                                                             op=dist.ReduceOp.BAND)),
        ("AVG on bool", "raises", lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool, device=dev),
                                                          op=dist.ReduceOp.AVG)),
        ("AVG on int32", "either", lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32, device=dev),
                                                           op=dist.ReduceOp.AVG)),
        ("broadcast root past the last rank (backend call)", "raises", backend_broadcast_root),
        ("reduce root past the last rank (backend call)", "raises", backend_reduce_root),
    ]
    if torch.cuda.device_count() > 1:
        other = torch.device("cuda", (dev.index + 1) % torch.cuda.device_count())
        cases.append(("tensor on another GPU than the bound one", "raises",
                      lambda: dist.all_reduce(torch.ones(4, device=other))))
    else:
        r.note("tensor on another GPU than the bound one", "not run: one GPU")
    for name, expect, call in cases:
        try:
            call()
            torch.cuda.synchronize()
            outcome, raised = "no error", False
        except Exception as error:  # noqa: BLE001 - the exception is the finding
            outcome, raised = f"raised {type(error).__name__}", True
            r.note(f"{name}: text", describe(error))
        ok = expect == "either" or raised == (expect == "raises")
        r.check(name, ok, outcome if expect != "either" else f"{outcome} (either is accepted)", sig=outcome)
    if r.world > 1:
        # Uneven lists: torch gathers them (legacy by a broadcast per rank, nccl2 since 2.14).
        sizes = [3 + 2 * q for q in range(r.world)]
        inputs = [torch.arange(s, dtype=torch.float32) + 10 * q for q, s in enumerate(sizes)]
        outs = [torch.full((s,), float("nan"), device=dev) for s in sizes]
        mine = inputs[r.rank].to(dev, copy=True)
        r.attempt("all_gather of uneven sizes", partial(dist.all_gather, outs, mine), outs, inputs)
    red = changing_reduction(r.world)
    values = [torch.full((4,), 1.0 + q) for q in range(r.world)]
    t = values[r.rank].to(dev, copy=True)
    r.attempt("the group still works after the errors", partial(dist.all_reduce, t, op=red.op()), t,
              red.host(values))


def probe_objects(r: Rank) -> None:
    """Object collectives on a device-bound world: they must work, over CUDA as torch's do."""
    import torch.distributed.distributed_c10d as c10d

    try:
        device_type = c10d._get_object_coll_device(dist.group.WORLD)
    except Exception as error:  # noqa: BLE001
        device_type = describe(error)
    r.check("object collectives go over cuda", device_type == "cuda", device_type, sig=device_type)
    root = r.world - 1
    objects = [{"rank": q, "payload": "x" * (1000 * (q + 1))} for q in range(r.world)]
    gathered: list = [None] * r.world
    r.attempt("all_gather_object", partial(dist.all_gather_object, gathered, objects[r.rank]), gathered, objects)
    box = [objects[root]] if r.rank == root else [None]
    r.attempt("broadcast_object_list", partial(dist.broadcast_object_list, box, src=root), box, [objects[root]])
    at_root: list | None = [None] * r.world if r.rank == root else None
    r.attempt("gather_object", partial(dist.gather_object, objects[r.rank], at_root, dst=root), at_root,
              objects if r.rank == root else None)
    mine: list = [None]
    to_scatter = [{"to": q} for q in range(r.world)] if r.rank == root else None
    r.attempt("scatter_object_list", partial(dist.scatter_object_list, mine, to_scatter, src=root), mine,
              [{"to": r.rank}])
    r.attempt("barrier", dist.barrier, None, None)
    r.headline(f"over {device_type}")


def probe_digest(r: Rank) -> None:
    """The A/B recorder's word digest on the GPU against the host reference (also of an
    unaligned view), and its time against the recorder's fallback: a copy to the host hashed there."""
    from nccl_migrate._native import native
    from nccl_migrate.ab.digest import digest_of

    torch.cuda.set_device(r.device)

    def best_of(fn, repeats: int = 5) -> float:
        fn()
        times = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times) * 1e3

    rows = {}
    for mib in (1, 64, 1024):
        t = torch.randint(-(2**31), 2**31 - 1, (mib << 18,), dtype=torch.int32, device=r.device)
        host = t.cpu()
        gpu_ms = best_of(lambda t=t: native.word_digest(t))
        copy_ms = best_of(lambda t=t: digest_of([t.cpu()]))
        # Also an unaligned view (offset by one element), which the kernel reads differently.
        equal = (native.word_digest(t) == native.word_digest(host)
                 and native.word_digest(t[1:]) == native.word_digest(host[1:]))
        r.check(f"{mib} MiB: GPU digest equals the host reference", equal)
        rows[f"{mib} MiB"] = {"gpu_ms": gpu_ms, "copy_and_host_hash_ms": copy_ms,
                              "gpu_GBps": mib * (1 << 20) / gpu_ms / 1e6}
        del t, host
    r.note("digest", rows)
    big = rows["1024 MiB"]
    r.headline(f"1 GiB: {big['gpu_ms']:.2f} ms on the GPU ({big['gpu_GBps']:.0f} GB/s), "
               f"{big['copy_and_host_hash_ms']:.0f} ms copied and hashed on the host")


def probe_recording(r: Rank) -> None:
    """What A/B recording adds to all_reduce: per size, 20 ops back to back with the recorder
    off, then on, alternating 5 times; the best of each, in ms per op."""
    # Installed after the group exists: importing nccl_migrate activates the shim, which must not
    # re-route torch's name for this group (see the module docstring).
    from nccl_migrate.ab import active, recorder

    rec = recorder.install(tempfile.mkdtemp(dir=r.run_dir))
    rows = {}
    for mib in (1, 64, 1024):
        t = torch.ones(mib << 18, device=r.device)
        best = {"off": float("inf"), "on": float("inf")}
        for _ in range(5):
            for mode in ("off", "on"):
                active.recorder = rec if mode == "on" else None
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(20):
                    dist.all_reduce(t)
                torch.cuda.synchronize()
                best[mode] = min(best[mode], (time.perf_counter() - start) / 20 * 1e3)
        rows[f"{mib} MiB"] = {**best, "on/off": best["on"] / best["off"]}
        del t
    active.recorder = None
    r.note("recording", rows)
    r.check("recorded every size", len(rows) == 3)
    r.headline(", ".join(f"{size} x{row['on/off']:.2f}" for size, row in rows.items()))
