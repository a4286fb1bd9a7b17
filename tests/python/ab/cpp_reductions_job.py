"""Reductions issued the way C++ code issues them (ProcessGroup methods, so only torch's hooks see
them, without their reduce op), with a reduce op other than SUM; and one on tensors made in
inference mode, whose dispatcher call no Autograd-key kernel sees."""

import os

import torch
import torch.distributed as dist

dist.init_process_group(os.environ.get("JOB_BACKEND", "nccl"))
rank, group = dist.get_rank(), dist.group.WORLD
max_all_reduce = dist.AllreduceOptions()
max_all_reduce.reduceOp = dist.ReduceOp.MAX
t = torch.arange(4.0) * (rank + 1)
group.allreduce([t], max_all_reduce).wait()
max_reduce_scatter = dist.ReduceScatterOptions()
max_reduce_scatter.reduceOp = dist.ReduceOp.MAX
out = torch.empty(4)
group._reduce_scatter_base(out, torch.arange(8.0) * (rank + 1), max_reduce_scatter).wait()
with torch.inference_mode():
    u = torch.ones(4) * (rank + 1)
    group.allreduce([u], max_all_reduce).wait()
assert t.tolist() == [0.0, 2.0, 4.0, 6.0] and u.tolist() == [2.0] * 4, (t, u)
dist.destroy_process_group()
