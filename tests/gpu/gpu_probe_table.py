"""The GPU check's probes, in the order they run, with what each needs of its world, and the
entry point of a rank process, which joins one group and runs its session's probes in turn.

Probes that can share one world per backend do (stages 1 and 3); a probe that changes its process
or group for good (a timeout aborts the communicators, an environment variable is read once per
process, a teardown must see a whole interpreter exit) has a world or fresh interpreters of its
own (stages 2 and 4); stage 5 are timings. Ours run first, torch's after; the plan stops starting
probes before the deadline's margin, so what is cut is the tail: torch's reference first.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import time
import traceback

import torch.distributed as dist
from gpu_plan import ProbeSpec, why_not_start
from gpu_probes import (
    GROUP_TIMEOUT_S,
    Rank,
    Report,
    describe,
    finishes_within,
    probe_coalescing,
    probe_digest,
    probe_exceptions,
    probe_graph,
    probe_host_blocking,
    probe_list_forms,
    probe_objects,
    probe_recording,
    probe_stream_order,
    probe_subgroups,
    probe_timeout,
    probe_two_ranks,
    probe_values,
)
from gpu_probes_async import (
    probe_blocking_wait,
    probe_ddp_hooks,
    probe_futures,
    probe_nonblocking,
    probe_nonblocking_config,
)

# The order of the run, stage by stage, our backends' first (torch's run after, as the reference,
# in the time ours leave):
#   1. what needs a GPU most, one shared world per backend: futures, DDP hooks, the one-rank
#      ordering of batches and list forms, values;
#   2. timeout, a world of its own (it aborts the communicators);
#   3. the rest of the shared-world probes;
#   4. worlds of their own for variables read once per process, and the teardown interpreters;
#   5. timings (recording, digest), one world at a time.
# Every probe but the timings is `concurrent`: the worlds of a stage (one per backend) run side by
# side on the GPU. Its checks are of values and of host-side bounds far from any GPU timing (an
# issue that returns within 0.2 s, a wait that blocks behind a sleep), which another process on
# the GPU can only make longer to fail, never make pass.
#
# expected_s: at one rank with the GPU to itself, the probe's GPU sleeps (SLEEP_S = 1 s and its
# halves, counted in gpu_probes*.py) plus its ops and host work, rounded up: the plan's own
# estimates, unchanged since they were made, for an H200; an H100 plans alike (the probes move
# at most 32 MiB per op outside the timings, far from either card's memory speed).
# gpu_s: the part of expected_s the GPU is busy: the sleeps as counted, plus about 0.5 s of
# kernels where a probe runs many ops. limit_s: a few times expected_s, so a slow or shared
# machine is not called hung.
PROBES: dict[str, ProbeSpec] = {p.name: p for p in [
    ProbeSpec("two_ranks", 40, 4, alone=True, two_ranks=True, concurrent=True, gpu_s=1,
              asserts="two ranks share the GPU (NCCL_MULTI_RANK_GPU_ENABLE=1): all_reduce and all_gather values"),
    ProbeSpec("futures", 30, 5, concurrent=True, gpu_s=4,
              asserts="get_future() behind a GPU sleep: issue and wait() return at once; the value is the output; "
                      "wait(), then() and work.wait() on another stream than the op's order the read after it"),
    ProbeSpec("ddp_hooks", 45, 5, concurrent=True, gpu_s=1,
              asserts="a DDP step with allreduce_hook and with a get_future + then() hook (PREMUL_SUM x3, "
                      "/ 3 x world), behind a GPU sleep: gradients equal a one-process reference"),
    ProbeSpec("coalescing", 30, 2, concurrent=True, gpu_s=2,
              asserts="_coalescing_manager: inputs written mid-batch by device-to-device copies behind a GPU sleep "
                      "(all_reduce batch; all_to_all_single and list all_gather batch); at one rank NCCL launches a "
                      "collective when called, so this is the one-rank ordering check"),
    ProbeSpec("list_forms", 30, 1.5, concurrent=True, gpu_s=1,
              asserts="all_gather(list) and reduce_scatter(list) outside a batch, inputs written device to device "
                      "behind a GPU sleep: the one-rank ordering of a list form run as a group of NCCL calls"),
    ProbeSpec("values", 60, 6, concurrent=True, gpu_s=1,
              asserts="all_reduce/reduce (SUM PRODUCT MIN MAX; AVG and PREMUL_SUM float and tensor factor for "
                      "floats), broadcast, all_gather list/tensor, reduce_scatter list/tensor, uneven "
                      "all_to_all_single, gather, scatter, send/recv, batch_isend_irecv, 32 MiB; 9 dtypes, "
                      "rank-dependent inputs, sentinel outputs"),
    ProbeSpec("timeout", 45, 12, stage=2, alone=True, concurrent=True, gpu_s=9, group_timeout_s=GROUP_TIMEOUT_S,
              # 2 = CleanUpOnly: torch aborts the communicators without killing the process, what our
              # backends document. torch's default (3) takes the process down on a timeout.
              env=(("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2"),),
              asserts="5 s group timeout, the peer stalls (one rank: the stream stalls): wait() raises "
                      "DistBackendError within ~5 s, the stream comes free, the process exits 0"),
    ProbeSpec("host_blocking", 30, 5, stage=3, concurrent=True, gpu_s=4,
              asserts="after a 1 s GPU sleep: op issue and work.wait() return in < 0.2 s; wait(timeout=) and "
                      "barrier() block until the GPU is done; values right"),
    ProbeSpec("stream_order", 30, 3.5, stage=3, concurrent=True, gpu_s=3,
              asserts="no synchronize(): inputs written behind a GPU sleep, results read by later kernels (sync, "
                      "async, out-of-place, side stream, input freed after issue)"),
    ProbeSpec("graph", 30, 3, stage=3, concurrent=True, gpu_s=0.5,
              asserts="all_reduce captured in a CUDA graph, 3 replays give the right values; watchdog and process "
                      "survive 2 s more and an ordinary op"),
    ProbeSpec("subgroups", 30, 3, stage=3, concurrent=True, gpu_s=0.5,
              asserts="new_group: device memory and communicators before/after first use; ours lazy (nccl2, lazy): "
                      "none before first use"),
    ProbeSpec("exceptions", 30, 2, stage=3, concurrent=True,
              asserts="invalid calls (CPU tensor, non-contiguous, BAND, AVG bool/int, bad root) raise; types "
                      "compared with torch's; uneven all_gather works; the group works afterwards"),
    ProbeSpec("objects", 30, 1.5, stage=3, concurrent=True,
              asserts="all_gather_object, broadcast_object_list, gather_object, scatter_object_list, barrier on a "
                      "bound world, over cuda"),
    ProbeSpec("nonblocking_config", 40, 2, stage=3, concurrent=True, gpu_s=0.5,
              asserts="a subgroup with ProcessGroupNCCL.Options().config.blocking = 0: all_reduce (input written "
                      "behind a GPU sleep), async all_reduce, all_gather tensor and list, barrier: values right"),
    ProbeSpec("nonblocking_env", 40, 3, stage=4, alone=True, concurrent=True, gpu_s=0.5,
              env=(("TORCH_NCCL_USE_COMM_NONBLOCKING", "1"),),
              asserts="TORCH_NCCL_USE_COMM_NONBLOCKING=1 world: the nonblocking_config ops on the world, values right"),
    ProbeSpec("nccl_comm_blocking_0", 40, 3, stage=4, alone=True, concurrent=True, gpu_s=0.5,
              env=(("NCCL_COMM_BLOCKING", "0"),),
              asserts="NCCL_COMM_BLOCKING=0 (NCCL's own, read once per process) world: the same ops, values right"),
    ProbeSpec("blocking_wait", 30, 4, stage=4, alone=True, concurrent=True, gpu_s=3,
              env=(("TORCH_NCCL_BLOCKING_WAIT", "1"),),
              asserts="TORCH_NCCL_BLOCKING_WAIT=1 world: issue returns at once; wait(), a synchronous op and "
                      "wait(timeout=) block the host behind a 1 s GPU sleep; values right"),
    # The two teardown runs start together; 10 s covers a fresh interpreter's torch import, CUDA
    # context and NCCL init (the review of the budget counts both at about 15 s with the world's start).
    ProbeSpec("teardown", 60, 10, stage=4, children=True,
              asserts="a fresh interpreter runs ops (world and subgroup) and returns from main without "
                      "destroy_process_group: exit code 0 within 60 s, no abort printed"),
    ProbeSpec("teardown_in_flight", 60, 10, stage=4, children=True,
              asserts="the same, returning with an op still queued behind a GPU sleep"),
    ProbeSpec("recording", 60, 8, stage=5, gpu_s=8,
              asserts="A/B recorder off vs on, all_reduce 1 MiB to 1 GiB (ms per op; ratios, nothing judged)"),
    ProbeSpec("digest", 60, 10, stage=5, group=False, gpu_s=10,
              asserts="the A/B word digest on the GPU equals the host reference (1 MiB to 1 GiB); timed against "
                      "copy + host hash"),
]}

FUNCTIONS = {
    "two_ranks": probe_two_ranks, "coalescing": probe_coalescing, "list_forms": probe_list_forms,
    "futures": probe_futures, "ddp_hooks": probe_ddp_hooks, "values": probe_values,
    "host_blocking": probe_host_blocking, "stream_order": probe_stream_order, "graph": probe_graph,
    "subgroups": probe_subgroups, "exceptions": probe_exceptions, "objects": probe_objects,
    "nonblocking_config": probe_nonblocking_config, "timeout": probe_timeout, "nonblocking_env": probe_nonblocking,
    "nccl_comm_blocking_0": probe_nonblocking, "blocking_wait": probe_blocking_wait, "recording": probe_recording,
    "digest": probe_digest,
}
DESTROY_LIMIT_S = 30.0


def _redirect_output(path: str) -> None:
    """This rank's stdout and stderr (NCCL's warnings, torch's logs, faulthandler) go to its log."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _why_not_start(rank: Rank, spec: ProbeSpec, horizon_epoch: float, sharing: int, in_group: bool) -> str:
    """Empty to run the probe, else why not: it must end, at its estimate with ``sharing`` rank
    processes on the GPU, before the plan's margin (``horizon_epoch``). Rank 0 decides for every
    rank (they must issue the same collectives) and tells the others through the group's store."""
    decision = why_not_start(horizon_epoch - time.time(), spec, sharing, rank.world)
    if not in_group or rank.world == 1:
        return decision
    store = dist.distributed_c10d._get_default_store()
    key = f"gpu_check/start/{spec.name}"
    if rank.rank == 0:
        store.set(key, decision or "go")
        return decision
    answer = store.get(key).decode()
    return "" if answer == "go" else answer


def _leave(report: Report, error: BaseException, probe: str | None) -> None:
    """Reports the error and ends the process at once: a peer may be inside a collective this rank
    will never join, so no teardown; the driver ends the world."""
    report.write(k="error", probe=probe, detail=describe(error), trace=traceback.format_exc()[-4000:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(3)


def rank_main(spec: dict) -> None:
    """One rank process of a session; ``spec`` comes from gpu_sessions.SessionRun."""
    _redirect_output(spec["log"])
    faulthandler.enable()
    os.environ.update(spec["env"])
    report = Report(spec["result"])
    probes = [PROBES[name] for name in spec["probes"]]
    in_group = probes[0].group
    try:
        rank = Rank(spec, report)
        if in_group:
            rank.join_group(spec["group_timeout_s"])
    except BaseException as error:  # noqa: BLE001 - the report says what went wrong
        _leave(report, error, None)
    report.write(k="joined")
    for probe in probes:
        why_not = _why_not_start(rank, probe, spec.get("horizon_epoch", spec["deadline_epoch"]),
                                 spec.get("sharing", 1), in_group)
        if why_not:
            report.write(k="skip", probe=probe.name, why=why_not)
            continue
        rank.probe = probe.name
        report.write(k="begin", probe=probe.name)
        # A rank about to be killed for overrunning dumps every thread's stack to its log first.
        faulthandler.dump_traceback_later(max(1.0, probe.limit_s - 3), exit=False)
        try:
            FUNCTIONS[probe.name](rank)
        except BaseException as error:  # noqa: BLE001
            _leave(report, error, probe.name)
        faulthandler.cancel_dump_traceback_later()
        report.write(k="end", probe=probe.name)
        rank.probe = None
    report.write(k="done")
    if rank.skip_teardown:
        sys.stdout.flush()
        os._exit(0)
    if in_group:
        ok, why = finishes_within(dist.destroy_process_group, DESTROY_LIMIT_S)
        report.write(k="check", name="destroy_process_group", ok=ok, detail=why, sig="ok" if ok else "wrong", weak="")
    report.write(k="exited")
