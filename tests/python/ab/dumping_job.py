"""A small unmodified job that dumps the flight recorder on every rank, through torch's own
writer, which names the file TORCH_FR_DUMP_TEMP_FILE<rank> (torch's default location when unset):
where a launched job's dumps land. A few all-reduces first, so the dump holds ops."""

import os

import torch
import torch.distributed as dist

dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"))
for _ in range(2):
    dist.all_reduce(torch.ones(4))
torch._C._distributed_c10d._dump_fr_trace_file(dist.get_rank())
dist.destroy_process_group()
