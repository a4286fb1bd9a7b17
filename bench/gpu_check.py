"""The NCCL path on one GPU, in one prepared run: every op on a 1-rank group per behaviour
(results checked), then device memory of 16 subgroups, eager vs lazy, against torch's own
`nccl` (nccl2 in 2.15) and `nccl-legacy` in the same run, then the A/B recorder's word digest
on the GPU (its value checked against the host reference, its time against copying the tensor
to the host and hashing it there) and what recording adds to an all_reduce on the GPU. Each configuration runs in a fresh process so CUDA contexts
and NCCL state never leak between them.

    .venv/bin/python bench/gpu_check.py [--groups 16] [--json PATH]

Exits 2 with a message on a machine without a CUDA GPU; exits 1 when an op gave a wrong result.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

OUR_BACKENDS = ["migrate-legacy", "migrate-nccl2", "migrate-lazy"]
# (label, backend, extra environment) for the memory table.
MEMORY_CONFIGS = [
    ("torch nccl (nccl2)", "nccl", {"TORCH_DIST_USE_NCCL2": "1"}),
    ("torch nccl-legacy", "nccl-legacy", {}),
    ("migrate-nccl2, lazy subgroups", "migrate-nccl2", {"NCCL_MIGRATE_EAGER_SUBGROUPS": "0"}),
    ("migrate-nccl2, eager subgroups", "migrate-nccl2", {"NCCL_MIGRATE_EAGER_SUBGROUPS": "1"}),
    ("migrate-legacy", "migrate-legacy", {}),
]


def _init(backend: str, store_path: str):
    import nccl_migrate  # noqa: F401
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    dist.init_process_group(backend, store=dist.FileStore(store_path, 1), rank=0, world_size=1, device_id=device)
    return device


def _every_op(backend: str, store_path: str) -> dict:
    """Runs each op once on a 1-rank group; returns {op: "ok" | what went wrong}."""
    import torch
    import torch.distributed as dist

    device = _init(backend, store_path)
    results: dict[str, str] = {}

    def check(name, fn, expected, got):
        try:
            fn()
            torch.cuda.synchronize()
            value = got()
            results[name] = "ok" if torch.equal(value.cpu(), expected) else f"wrong result {value.cpu().tolist()[:4]}"
        except Exception as error:  # noqa: BLE001 - every failure is a row of the report
            results[name] = f"{type(error).__name__}: {str(error).splitlines()[0]}"

    x = torch.arange(8, dtype=torch.float32, device=device)
    ref = torch.arange(8, dtype=torch.float32)
    for op in ("SUM", "AVG", "PRODUCT", "MIN", "MAX"):
        t = x.clone()
        check(f"all_reduce {op}", lambda t=t, op=op: dist.all_reduce(t, op=getattr(dist.ReduceOp, op)), ref, lambda t=t: t)
    t = x.clone()
    check("all_reduce PREMUL_SUM", lambda: dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0)), ref * 2, lambda: t)
    t = x.clone()
    check("broadcast", lambda: dist.broadcast(t, 0), ref, lambda: t)
    t = x.clone()
    check("reduce", lambda: dist.reduce(t, 0), ref, lambda: t)
    outs = [torch.empty_like(x)]
    check("all_gather", lambda: dist.all_gather(outs, x), ref, lambda: outs[0])
    flat = torch.empty_like(x)
    check("all_gather_into_tensor", lambda: dist.all_gather_into_tensor(flat, x), ref, lambda: flat)
    gathered = [torch.empty_like(x)]
    check("gather", lambda: dist.gather(x, gathered, dst=0), ref, lambda: gathered[0])
    scattered = torch.empty_like(x)
    check("scatter", lambda: dist.scatter(scattered, [x.clone()], src=0), ref, lambda: scattered)
    rs = torch.empty_like(x)
    check("reduce_scatter", lambda: dist.reduce_scatter(rs, [x.clone()]), ref, lambda: rs)
    rst = torch.empty_like(x)
    check("reduce_scatter_tensor", lambda: dist.reduce_scatter_tensor(rst, x.clone()), ref, lambda: rst)
    a2a = torch.empty_like(x)
    check("all_to_all_single", lambda: dist.all_to_all_single(a2a, x.clone()), ref, lambda: a2a)
    a2a_list = [torch.empty_like(x)]
    check("all_to_all", lambda: dist.all_to_all(a2a_list, [x.clone()]), ref, lambda: a2a_list[0])
    check("barrier", lambda: dist.barrier(), torch.zeros(1), lambda: torch.zeros(1))
    coalesced = [x.clone(), x.clone()]
    check("all_reduce_coalesced", lambda: dist.all_reduce_coalesced(coalesced), ref, lambda: coalesced[1])
    half = x.to(torch.bfloat16)
    check("all_reduce bfloat16", lambda: dist.all_reduce(half), ref.to(torch.bfloat16), lambda: half)
    import nccl_migrate

    results["communicators"] = json.dumps([c["key"] for c in nccl_migrate.communicators(device=device)])
    dist.destroy_process_group()
    return results


def _memory(backend: str, store_path: str, groups: int) -> dict:
    """Device memory in use (free-memory difference) after init, after creating the subgroups,
    and after one all_reduce on each."""
    import torch
    import torch.distributed as dist

    device = _init(backend, store_path)
    torch.cuda.synchronize()
    base_free, _ = torch.cuda.mem_get_info(device)
    made = [dist.new_group([0], device_id=device) for _ in range(groups)]
    torch.cuda.synchronize()
    after_create, _ = torch.cuda.mem_get_info(device)
    t = torch.ones(1024, device=device)
    for group in made:
        dist.all_reduce(t, group=group)
    torch.cuda.synchronize()
    after_use, _ = torch.cuda.mem_get_info(device)
    dist.destroy_process_group()
    mib = 1 << 20
    return {"created_mib": (base_free - after_create) / mib, "used_mib": (base_free - after_use) / mib}


def _digest() -> dict:
    """Per size: the word digest on the GPU (ms) and whether it equals the host reference, and
    the recorder's fallback, a copy to the host hashed there (ms)."""
    import time

    import torch
    from nccl_migrate._native import native
    from nccl_migrate.ab.digest import digest_of

    def best_of(fn, repeats: int = 5) -> float:
        fn()
        times = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times) * 1e3

    rows = {}
    for mib in (1, 64, 1024):
        t = torch.randint(-(2**31), 2**31 - 1, (mib << 18,), dtype=torch.int32, device="cuda")
        host = t.cpu()
        rows[f"{mib} MiB"] = {
            "gpu_ms": best_of(lambda t=t: native.word_digest(t)),
            "copy_and_host_hash_ms": best_of(lambda t=t: digest_of([t.cpu()])),
            "equals_host_reference": native.word_digest(t) == native.word_digest(host)
            and native.word_digest(t[1:]) == native.word_digest(host[1:]),
        }
    return rows


def _recording(backend: str, store_path: str) -> dict:
    """Per size: all_reduce on a 1-rank group of ``backend``, 20 ops back to back with the A/B
    recorder off, then on, alternating 5 times; the best of each, in ms per op."""
    import time

    import torch
    from nccl_migrate.ab import active, recorder

    rec = recorder.install(tempfile.mkdtemp())
    device = _init(backend, store_path)
    import torch.distributed as dist

    rows = {}
    for mib in (1, 64, 1024):
        t = torch.ones(mib << 18, device=device)
        best = {"off": float("inf"), "on": float("inf")}
        for _ in range(5):
            for mode in ("off", "on"):
                active.recorder = rec if mode == "on" else None
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(20):
                    dist.all_reduce(t)
                torch.cuda.synchronize()
                best[mode] = min(best[mode], (time.perf_counter() - start) / 20 * 1e3)
        rows[f"{mib} MiB"] = best
    active.recorder = None
    dist.destroy_process_group()
    return rows


def _child(kind: str, backend: str, env: dict, groups: int, queue) -> None:
    os.environ.update(env)
    with tempfile.TemporaryDirectory() as tmp:
        store_path = os.path.join(tmp, "store")
        try:
            if kind == "digest":
                value = _digest()
            elif kind == "recording":
                value = _recording(backend, store_path)
            else:
                value = _every_op(backend, store_path) if kind == "ops" else _memory(backend, store_path, groups)
            queue.put(("ok", value))
        except Exception as error:  # noqa: BLE001
            queue.put(("error", f"{type(error).__name__}: {error}"))


def _run(kind: str, backend: str, env: dict, groups: int, timeout: float = 300):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(kind, backend, env, groups, queue))
    proc.start()
    try:
        status, value = queue.get(timeout=timeout)
    except Exception:  # noqa: BLE001 - a hung or crashed child
        status, value = "error", f"no answer within {timeout} s (exit code {proc.exitcode})"
    proc.join(timeout=30)
    if proc.is_alive():
        proc.kill()
    return status, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=16, help="subgroups per memory configuration (default 16)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: no CUDA GPU here; run it on a machine with one (the CPU suites cover the rest)")
        return 2
    report: dict = {"gpu": torch.cuda.get_device_name(0), "ops": {}, "memory": {}}
    print(f"GPU: {report['gpu']}\n")
    wrong = 0
    for backend in OUR_BACKENDS:
        status, value = _run("ops", backend, {}, args.groups)
        report["ops"][backend] = value if status == "ok" else {"run": value}
        rows = value.items() if status == "ok" else [("run", value)]
        print(f"{backend}:")
        for op, outcome in rows:
            print(f"  {op:<26}{outcome}")
            wrong += op != "communicators" and outcome != "ok"
    print(f"\ndevice memory of {args.groups} one-rank subgroups (MiB above the world group)")
    print(f"{'configuration':<34}{'after new_group':>16}{'after one op each':>19}")
    for label, backend, env in MEMORY_CONFIGS:
        status, value = _run("memory", backend, env, args.groups)
        report["memory"][label] = value if status == "ok" else {"error": value}
        if status == "ok":
            print(f"{label:<34}{value['created_mib']:>16.1f}{value['used_mib']:>19.1f}")
        else:
            print(f"{label:<34}  {value}")
    print("\nthe A/B recorder's digest of a CUDA tensor")
    print(f"{'size':>9}{'on the GPU (ms)':>17}{'GB/s':>8}{'copy + host hash (ms)':>23}{'  equals host reference'}")
    status, value = _run("digest", "", {}, args.groups)
    report["digest"] = value if status == "ok" else {"error": value}
    if status != "ok":
        print(f"  {value}")
        wrong += 1
    else:
        for size, row in value.items():
            rate = int(size.split()[0]) * (1 << 20) / row["gpu_ms"] / 1e6
            print(f"{size:>9}{row['gpu_ms']:>17.3f}{rate:>8.0f}{row['copy_and_host_hash_ms']:>23.3f}"
                  f"  {row['equals_host_reference']}")
            wrong += not row["equals_host_reference"]
    print("\nwhat A/B recording adds to all_reduce on one GPU (ms per op, best of 5 x 20 ops)")
    print(f"{'backend':<16}{'size':>9}{'off':>10}{'on':>10}{'on/off':>8}")
    report["recording"] = {}
    for backend in ("migrate-nccl2", "nccl"):
        status, value = _run("recording", backend, {}, args.groups)
        report["recording"][backend] = value if status == "ok" else {"error": value}
        if status != "ok":
            print(f"{backend:<16}  {value}")
            continue
        for size, row in value.items():
            print(f"{backend:<16}{size:>9}{row['off']:>10.3f}{row['on']:>10.3f}{row['on'] / row['off']:>8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
