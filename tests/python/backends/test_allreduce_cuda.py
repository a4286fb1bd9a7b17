"""The NCCL communicator path on real GPUs. Skips, visibly, on machines without one; the CPU
suites (test_collectives_cpu.py and the others) cover everything but the NCCL and CUDA calls."""

import pytest
import torch

from ranks import run_ranks

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="no CUDA GPU here: the NCCL communicator cannot run on this machine")


def _cuda_allreduce(backend):
    def run(rank, world_size, store):
        import torch.distributed as dist

        import nccl_migrate

        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, device_id=device)
        t = torch.full((1024,), float(rank + 1), device=device)
        dist.all_reduce(t)
        torch.cuda.synchronize()
        comms = nccl_migrate.communicators(device=device)
        dist.destroy_process_group()
        return t[:4].tolist(), comms

    return run


def _rewritten(rank, world_size, store):
    return _cuda_allreduce("migrate-nccl2")(rank, world_size, store)


def _legacy(rank, world_size, store):
    return _cuda_allreduce("migrate-legacy")(rank, world_size, store)


@needs_gpu
@pytest.mark.parametrize("fn", [_rewritten, _legacy], ids=["rewritten", "legacy"])
def test_nccl_allreduce_one_rank_per_gpu(fn):
    # NCCL rejects two ranks on one GPU, so the world is as large as the GPU count allows.
    world = min(2, torch.cuda.device_count())
    expected = float(sum(range(1, world + 1)))
    for values, comms in run_ranks(fn, world_size=world):
        assert values == [expected] * 4
        assert [c["implementation"] for c in comms] == ["nccl"]
        assert comms[0]["device"].startswith("cuda:")
