"""A job whose rank LIMITED_RANK may not write files past 16 KiB (RLIMIT_FSIZE, as a full disk or a
quota would stop it): its record file stops growing partway while the job goes on. LIMITED_RANK
unset: no limit."""

import os
import resource

import torch
import torch.distributed as dist

dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"))
if os.environ.get("LIMITED_RANK") == str(dist.get_rank()):
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 10, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
t = torch.ones(8)
for _ in range(int(os.environ.get("JOB_STEPS", "200"))):
    dist.all_reduce(t)
    t /= dist.get_world_size()
dist.destroy_process_group()
print(f"rank {dist.get_rank() if dist.is_initialized() else os.environ['RANK']} finished")
