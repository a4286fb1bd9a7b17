"""A job that starts its own ranks by fork, without exec: FORK_WITH=fork (default) or forkserver
uses torch.multiprocessing with that start method (children end with os._exit, after
multiprocessing's own exit handlers), FORK_WITH=os_exit forks with os.fork and ends each child with os._exit (no exit
handler at all runs). The parent never joins a group."""

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2


def rank_main(rank: int, port: int) -> None:
    dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"), init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=WORLD)
    t = torch.arange(4.0) + rank
    for _ in range(3):
        dist.all_reduce(t)
        t /= WORLD
    dist.barrier()
    dist.destroy_process_group()


def by_os_fork(port: int) -> None:
    children = []
    for rank in range(WORLD):
        pid = os.fork()
        if pid == 0:
            rank_main(rank, port)
            os._exit(0)
        children.append(pid)
    if any(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children):
        sys.exit(1)


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    method = os.environ.get("FORK_WITH", "fork")
    if method == "os_exit":
        by_os_fork(free_port)
    else:
        mp.start_processes(rank_main, args=(free_port,), nprocs=WORLD, start_method=method)
