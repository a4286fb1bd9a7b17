"""A job that starts its own ranks, as many training scripts do: the parent picks a free port and
mp.spawn starts two ranks that join a group by explicit rank (the environment's RANK, set by a
launcher for the parent, is the same in both). The parent itself never joins a group."""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2


def rank_main(rank: int, port: int) -> None:
    dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"), init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD)
    t = torch.arange(4.0) + rank
    for _ in range(int(os.environ.get("SPAWN_STEPS", "3"))):
        dist.all_reduce(t)
        t /= WORLD
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    mp.spawn(rank_main, args=(free_port,), nprocs=WORLD)
