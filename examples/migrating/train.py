"""A small tensor- and data-parallel training job as stacks wrote it for torch 2.14: groups from
parallel_state, gradients averaged by grad_sync, launched by launch.sh (torchrun). It runs on GPUs
with any NCCL backend and on CPU through nccl-migrate's backends, so `nccl-migrate ab` can compare
its collectives under the legacy and the rewritten behaviour (docs/migrating.md).

    nccl-migrate ab -- examples/migrating/train.py
"""

import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import grad_sync  # noqa: E402
import parallel_state  # noqa: E402

STEPS = int(os.environ.get("JOB_STEPS", "3"))


def main() -> None:
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dist.init_process_group(backend="nccl")
    rank = dist.get_rank()
    on_gpu = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if on_gpu else torch.device("cpu")
    parallel_state.initialize_model_parallel(tensor_parallel_size=1)
    group = parallel_state.get_data_parallel_group()

    torch.manual_seed(0)  # the same initial weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(100 + rank)
    for step in range(STEPS):
        x = torch.randn(32, 8, generator=data).to(device)
        loss = torch.nn.functional.mse_loss(model(x), x.mean(dim=1, keepdim=True))
        optimizer.zero_grad()
        loss.backward()
        grad_sync.average_gradients(model.parameters(), group)
        optimizer.step()
        if rank == 0:
            print(f"step {step}: loss {loss.item():.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
