"""A job whose failing rank says why in its own words, for what an A/B report quotes of it: each
rank prints a line per step and all-reduces, and OWN_RANK=R fails as OWN_FAULT says after its
first all-reduce, while its peers wait in their second (so their own errors, "Connection closed by
peer", come after its words in the job's log):

- raise: an exception of its own (its traceback names "the job's own failure on rank R");
- kill: SIGKILL to itself after printing "rank R is about to be killed" (no traceback at all);
- early: every rank raises before init_process_group (no rank records anything)."""

import os
import signal
import time

import torch
import torch.distributed as dist

fault, me = os.environ.get("OWN_FAULT"), os.environ.get("OWN_RANK")
if fault == "early":
    raise RuntimeError(f"the job's own failure before init_process_group on rank {os.environ['RANK']}")
dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"))
rank = dist.get_rank()
for step in range(3):
    print(f"rank {rank} step {step}", flush=True)
    t = torch.ones(4)
    dist.all_reduce(t)
    if str(rank) == me and step == 0:
        time.sleep(0.3)  # its record of all_reduce #0 is on disk; its peers are inside #1
        if fault == "raise":
            raise RuntimeError(f"the job's own failure on rank {rank}")
        if fault == "kill":
            print(f"rank {rank} is about to be killed", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
dist.destroy_process_group()
