"""The bundled example job: a small model trained for a few steps, data-parallel over ranks.

Gradients are all-reduced by hand, the way DDP does, so every collective is visible. It runs
on CPU with the toolkit's backends (JOB_BACKEND, default migrate-nccl2) and on GPUs with any
NCCL backend. Start it with: nccl-migrate run --nproc 2 -- examples/ddp_job.py
"""

import os

import torch
import torch.distributed as dist

import nccl_migrate  # noqa: F401  registers the toolkit's backends

STEPS = int(os.environ.get("JOB_STEPS", "5"))


def main() -> None:
    backend = os.environ.get("JOB_BACKEND", "migrate-nccl2")
    dist.init_process_group(backend=backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", rank % torch.cuda.device_count()) if torch.cuda.is_available() and "migrate" not in backend else torch.device("cpu")

    torch.manual_seed(0)  # identical initial weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1000 + rank)  # each rank its own shard

    for step in range(STEPS):
        x = torch.randn(64, 16, generator=data).to(device)
        y = x.sum(dim=1, keepdim=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        optimizer.step()
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss)
        if rank == 0:
            print(f"step {step}: mean loss {global_loss.item() / world:.6f}", flush=True)

    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    print(f"rank {rank}: final parameter checksum {checksum:.12f} on backend {backend}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
