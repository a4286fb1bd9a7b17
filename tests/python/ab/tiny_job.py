"""A small unmodified job for A/B failure cases (backend "nccl", routed by the shim): a few
all-reduces of data seeded per rank, with switches that make one rank misbehave.

TINY_STEPS (default 3); TINY_RANDOM_SEED=R: rank R seeds its data from the OS (a run that is not
reproducible); TINY_CRASH=R: rank R exits with status 3 after its first op; TINY_HANG=R: rank R
stops responding after its first op; TINY_FAIL_FIRST_ATTEMPT=R: rank R exits with status 3 after
its first op on the first attempt only (torch's launcher restarts the workers with --max-restarts)."""

import os
import time

import torch
import torch.distributed as dist

dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"))
rank = dist.get_rank()
me = str(rank)
seed = int.from_bytes(os.urandom(4), "little") if os.environ.get("TINY_RANDOM_SEED") == me else rank
data = torch.Generator().manual_seed(seed)
for step in range(int(os.environ.get("TINY_STEPS", "3"))):
    t = torch.randn(8, generator=data)
    dist.all_reduce(t)
    first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
    if os.environ.get("TINY_CRASH") == me or (os.environ.get("TINY_FAIL_FIRST_ATTEMPT") == me and first_attempt):
        raise SystemExit(3)
    if os.environ.get("TINY_HANG") == me:
        time.sleep(600)
dist.destroy_process_group()
