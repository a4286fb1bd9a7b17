"""The bundled example job: a small model trained for a few steps, data-parallel over ranks.

It is written for torch 2.15 and knows nothing of nccl-migrate: backend "nccl" (JOB_BACKEND
overrides it), so the environment alone decides which behaviour and implementation run it, and
the same file serves both sides of an A/B run. The way DDP does, rank 0's initial weights are
broadcast and gradients all-reduced by hand, so every collective is visible; each step also
all-gathers the ranks' losses and passes a token around the ranks with send/recv. It runs on CPU
through the toolkit's backends and on GPUs with any NCCL backend.

    nccl-migrate run --nproc 2 -- examples/ddp_job.py
    nccl-migrate ab -- examples/ddp_job.py          # legacy vs rewritten, op by op
"""

import os

import torch
import torch.distributed as dist

STEPS = int(os.environ.get("JOB_STEPS", "5"))


def pass_token(token: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Sends this rank's token to the next rank and receives the previous rank's (a ring)."""
    received = torch.empty_like(token)
    if world == 1:
        return token.clone()
    if rank % 2 == 0:
        dist.send(token, (rank + 1) % world)
        dist.recv(received, (rank - 1) % world)
    else:
        dist.recv(received, (rank - 1) % world)
        dist.send(token, (rank + 1) % world)
    return received


def main() -> None:
    backend = os.environ.get("JOB_BACKEND", "nccl")
    dist.init_process_group(backend=backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    on_gpu = torch.cuda.is_available() and not backend.startswith(("migrate", "gloo"))
    device = torch.device("cuda", rank % torch.cuda.device_count()) if on_gpu else torch.device("cpu")

    torch.manual_seed(rank)  # different weights per rank: the broadcast below makes them agree
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(device)
    for p in model.parameters():
        dist.broadcast(p.data, src=0)
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
        losses = [torch.empty_like(loss) for _ in range(world)]
        dist.all_gather(losses, loss.detach().reshape(()))
        token = pass_token(loss.detach().reshape(1), rank, world)
        if rank == 0:
            mean = sum(v.item() for v in losses) / world
            print(f"step {step}: mean loss {mean:.6f} (token from rank {world - 1}: {token.item():.6f})", flush=True)

    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    print(f"rank {rank}: final parameter checksum {checksum:.12f} on backend {backend}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
