"""One rank of the GPU check's teardown probe, in a fresh interpreter: joins a device-bound
group of the backend named, runs ops on the world and on a subgroup, prints whether their values
are right, then returns from main WITHOUT destroy_process_group, so the interpreter's own exit
(atexit handlers, garbage collection, C++ static destructors) meets the live communicators, as
in a job that forgets the teardown. `--in-flight` returns with an op still queued behind a GPU
sleep. tests/gpu/gpu_check.py starts it (RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set) and
judges the exit: code 0, within its limit, no abort printed.
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", required=True)
    parser.add_argument("--in-flight", action="store_true", help="return with an op still queued on the GPU")
    args = parser.parse_args()
    import torch
    import torch.distributed as dist

    if args.backend.startswith("migrate-"):
        import nccl_migrate  # noqa: F401 - registers migrate-*
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group(args.backend, rank=rank, world_size=world, device_id=device)
    # One rank: only PREMUL_SUM changes a value (x3); two ranks: SUM does.
    op = dist._make_nccl_premul_sum(3.0) if world == 1 else dist.ReduceOp.SUM
    t = torch.full((1 << 16,), 1.0 + rank, device=device)
    dist.all_reduce(t, op=op)
    expected = 3.0 if world == 1 else float(sum(1 + q for q in range(world)))
    subgroup = dist.new_group(list(range(world)))
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(3.0) if world == 1 else dist.ReduceOp.SUM, group=subgroup)
    expected *= 3.0 if world == 1 else world
    right = bool(torch.equal(t.cpu(), torch.full_like(t, expected).cpu()))
    print(f"[teardown] values {'right' if right else 'wrong: ' + str(t[0].item()) + ', expected ' + str(expected)}",
          flush=True)
    if not right:
        return 4
    if args.in_flight:
        torch.cuda._sleep(2_000_000_000)  # about a second on current GPUs; the op below waits behind it
        dist.all_reduce(t, async_op=True)
        print("[teardown] main returns with an op queued, without destroy_process_group", flush=True)
    else:
        torch.cuda.synchronize()
        print("[teardown] main returns without destroy_process_group", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
