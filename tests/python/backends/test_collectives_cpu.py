"""Every collective and p2p op of the toolkit's backends, with 2 to 4 real processes, unbound and
device-bound (CPU worlds with device_id, and the NCCL communicator on the simulated device):
each dtype torch's NCCL backends carry and each reduce op, checked element-wise against the
exact expectation and against torch's own Gloo backend in the same run."""

import functools

import pytest
import torch

from collective_cases import FLOATS, Case, cases, expected, run_case
from ranks import run_ranks
from worlds import init, world_missing

BACKENDS = ["migrate-legacy", "migrate-nccl2", "migrate-lazy"]


def _run_all(backend, kind, rank, world, store):
    import torch.distributed as dist

    init(kind, backend, rank, world, store)
    gloo = dist.new_group(backend="gloo")
    results = {}
    for case in cases():
        ours = run_case(case, rank, world, None)
        try:
            peer = run_case(case, rank, world, gloo)
        except (RuntimeError, ValueError):
            peer = None  # Gloo lacks this op or type (AVG, PREMUL_SUM, ...)
        results[case.key] = (ours, peer)
    dist.destroy_process_group()
    return results


# Unbound CPU worlds of 2 and 4 ranks; device-bound worlds (CPU with device_id, and the NCCL
# communicator on the simulated device) of 3 ranks, odd on purpose, and 4.
WORLDS = [("cpu", 2), ("cpu", 4), ("cpu-bound", 4), ("sim-bound", 3), ("sim-bound", 4)]


@pytest.mark.parametrize("kind,world", WORLDS, ids=[f"{k}-{n}" for k, n in WORLDS])
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_op_type_and_reduction_is_exact(backend, kind, world):
    if world == 4 and backend == "migrate-lazy" and kind != "sim-bound":
        pytest.skip("4 ranks run for legacy and rewritten; nccl-lazy's collectives are the rewritten ones")
    if why := world_missing(kind):
        pytest.skip(why)
    per_rank = run_ranks(functools.partial(_run_all, backend, kind), world_size=world, timeout=300)
    failures, compared_with_gloo = [], 0
    by_key = {c.key: c for c in cases()}
    nccl = kind.startswith("sim")  # the simulated device's groups run over (simulated) NCCL
    for rank, results in enumerate(per_rank):
        for key, (ours, peer) in results.items():
            case = by_key[key]
            want = expected(case, rank, world, nccl)
            if ours != want:
                failures.append(f"rank {rank} {key}: got {ours}, expected {want}")
            # Gloo's AVG divides the exact sum, NCCL's multiplies each rank's part by 1/n first: on
            # NCCL their float averages differ by rounding, as they do between the real two.
            rounds_unlike_gloo = nccl and case.reduce == "AVG" and case.dtype in FLOATS
            if peer is not None and not rounds_unlike_gloo:
                compared_with_gloo += 1
                if ours != peer:
                    failures.append(f"rank {rank} {key}: differs from gloo: ours {ours}, gloo {peer}")
    assert not failures, "\n".join(failures[:20]) + f"\n({len(failures)} mismatches)"
    assert compared_with_gloo > len(by_key) * world // 2, "gloo should run most cases side by side"
