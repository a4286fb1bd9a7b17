"""A job one of whose ranks fails at an op of our choosing, for A/B runs under faults: FAULT_STEPS
all-reduces (default 10) of data seeded per rank, and FAULT_RANK=R failing just before issuing its
all_reduce #FAULT_AT (counting from 0, so its last record is #FAULT_AT - 1) as FAULT says:

- kill: SIGKILL to itself (as the OOM killer ends a rank: no handler, no exit code of its own);
- stop: SIGSTOP to itself (a rank that stops answering; only SIGKILL or SIGCONT move it);
- sleep: sleeps for good inside Python (a rank stuck in its own code);
- term: SIGTERM to itself (as a scheduler ends a rank), with FAULT_SETTLE=0 while its last
  records still wait in the recorder's queue.

The failing rank waits FAULT_SETTLE seconds first (default 0.3, past the recorder's 50 ms write
interval), so every op it finished is on disk and its last record is exactly #FAULT_AT - 1. The
others then wait for it inside all_reduce #FAULT_AT, as a real job's peers do."""

import os
import signal
import time

import torch
import torch.distributed as dist

dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"))
rank = dist.get_rank()
data = torch.Generator().manual_seed(rank)
for step in range(int(os.environ.get("FAULT_STEPS", "10"))):
    if os.environ.get("FAULT_RANK") == str(rank) and os.environ.get("FAULT_AT") == str(step):
        time.sleep(float(os.environ.get("FAULT_SETTLE", "0.3")))
        fault = os.environ["FAULT"]
        if fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif fault == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif fault == "sleep":
            time.sleep(10**6)
        elif fault == "term":
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)  # a handler of SIGTERM ends the process; nothing more may be recorded
        else:
            raise SystemExit(f"fault_job.py: FAULT={fault!r}: give kill, stop, sleep or term")
    t = torch.randn(8, generator=data)
    dist.all_reduce(t)
dist.destroy_process_group()
