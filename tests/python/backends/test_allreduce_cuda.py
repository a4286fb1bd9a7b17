"""The NCCL communicator on real GPUs. Skips, saying why, on machines without one; the
simulated-device suites run the same communicator code everywhere else.

Every check changes values, so a communicator that does nothing fails it: two ranks (on two
GPUs, or sharing one where its NCCL has NCCL_MULTI_RANK_GPU_ENABLE) sum rank-dependent values;
a single rank runs PREMUL_SUM, which scales its own input."""

import glob
import os

import pytest
import torch

from ranks import run_ranks

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="no CUDA GPU here: the NCCL communicator cannot run on this machine")


def _nccl_shares_a_gpu() -> bool:
    """Whether the libnccl torch loads can put two ranks on one GPU."""
    import nvidia.nccl

    for lib in glob.glob(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so*")):
        with open(lib, "rb") as f:
            if b"NCCL_MULTI_RANK_GPU_ENABLE" in f.read():
                return True
    return False


def _world() -> tuple[int, dict]:
    if torch.cuda.device_count() >= 2:
        return 2, {}
    try:
        shares = _nccl_shares_a_gpu()
    except ImportError:
        shares = False
    return (2, {"NCCL_MULTI_RANK_GPU_ENABLE": "1"}) if shares else (1, {})


def _cuda_allreduce(backend):
    def run(rank, world_size, store):
        import torch.distributed as dist

        import nccl_migrate

        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, device_id=device)
        t = torch.full((1024,), float(rank + 1), device=device)
        if world_size == 1:
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(3.0))
        else:
            dist.all_reduce(t)
        values = t[:4].tolist()  # read on the host: ordered after the op by the stream
        comms = nccl_migrate.communicators(device=device)
        dist.destroy_process_group()
        return values, comms

    return run


def _rewritten(rank, world_size, store):
    return _cuda_allreduce("migrate-nccl2")(rank, world_size, store)


def _legacy(rank, world_size, store):
    return _cuda_allreduce("migrate-legacy")(rank, world_size, store)


@needs_gpu
@pytest.mark.parametrize("fn", [_rewritten, _legacy], ids=["rewritten", "legacy"])
def test_nccl_allreduce_changes_every_rank_value(fn):
    world, env = _world()
    expected = 3.0 if world == 1 else float(sum(range(1, world + 1)))
    for values, comms in run_ranks(fn, world_size=world, env=env):
        assert values == [expected] * 4
        assert [c["implementation"] for c in comms] == ["nccl"]
        assert comms[0]["device"].startswith("cuda:")
