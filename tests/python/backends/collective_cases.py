"""The collective cases the CPU suites run: inputs whose results are exactly predictable, the
expected result of each case, and the code that runs a case on a group. Shared by the ranks
(which run the cases) and the test process (which computes expectations)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

N = 6  # elements per rank: small, and divisible by the world sizes we run (2, 4 divide 12)

FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
INTS = [torch.int8, torch.int32, torch.int64]
ALL_TYPES = FLOATS + INTS + [torch.bool]

REDUCE_OPS = {
    "SUM": dist.ReduceOp.SUM,
    "AVG": dist.ReduceOp.AVG,
    "PRODUCT": dist.ReduceOp.PRODUCT,
    "MIN": dist.ReduceOp.MIN,
    "MAX": dist.ReduceOp.MAX,
}


def value_of(rank: int, n: int, dtype: torch.dtype, op: str = "SUM") -> torch.Tensor:
    """Rank `rank`'s input: small integers (exact in every type); {1, 2} for products; bools
    that differ across ranks."""
    i = torch.arange(n, dtype=torch.float64)
    if dtype == torch.bool:
        return ((i + rank) % 2 == 0)
    if op == "PRODUCT":
        return ((i + rank) % 2 + 1).to(dtype)
    return (i % 3 + rank + 1).to(dtype)


def nccl_average(values: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """AVG of floats as NCCL computes it: a PREMUL_SUM by 1/nRanks stored in the element type,
    each product and each partial sum rounded to it, in rank order (NCCL's hostToDevRedOp,
    src/enqueue.cc, and reduce_kernel.h); torch's CPU ops in that dtype round the same way. Gloo
    divides the exact sum instead, so where 1/nRanks is no binary fraction (3 ranks) the two differ
    in the last bits."""
    factor = torch.tensor(1.0 / len(values), dtype=torch.float64).to(dtype)
    total = values[0].to(dtype) * factor
    for value in values[1:]:
        total = total + value.to(dtype) * factor
    return total


def reduce_expected(values: list[torch.Tensor], op: str, dtype: torch.dtype, nccl: bool = False) -> torch.Tensor:
    if nccl and op == "AVG" and dtype in FLOATS:
        return nccl_average(values, dtype)
    if dtype == torch.bool:
        stack = torch.stack(values)
        return stack.any(0) if op in ("SUM", "MAX") else stack.all(0)
    stack = torch.stack([v.double() for v in values])
    result = {
        "SUM": lambda: stack.sum(0),
        "AVG": lambda: stack.sum(0) / len(values),
        "PRODUCT": lambda: stack.prod(0),
        "MIN": lambda: stack.min(0).values,
        "MAX": lambda: stack.max(0).values,
        "PREMUL_SUM": lambda: 2.0 * stack.sum(0),
    }[op]()
    return result.to(dtype)


def reduce_op(name: str):
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(2.0)
    return REDUCE_OPS[name]


@dataclass(frozen=True)
class Case:
    op: str         # collective name
    dtype: torch.dtype
    reduce: str = ""

    @property
    def key(self) -> str:
        return f"{self.op}/{str(self.dtype).replace('torch.', '')}/{self.reduce}"


def cases() -> list[Case]:
    out: list[Case] = []
    for dtype in ALL_TYPES:
        # AVG of integers is NCCL's too (the sum divided, truncated); PREMUL_SUM is for floats.
        ops = ["SUM", "PRODUCT", "MIN", "MAX"] + (["AVG", "PREMUL_SUM"] if dtype in FLOATS else
                                                  ["AVG"] if dtype in INTS else [])
        out += [Case("all_reduce", dtype, op) for op in ops]
        out += [Case("reduce", dtype, op) for op in ("SUM", "MAX")]
        out += [Case(name, dtype) for name in ("broadcast", "all_gather", "all_gather_into_tensor")]
        if dtype != torch.bool:
            rs_ops = ["SUM", "MAX"] + (["AVG"] if dtype in FLOATS else [])
            out += [Case("reduce_scatter", dtype, op) for op in rs_ops]
            out += [Case("reduce_scatter_tensor", dtype, op) for op in rs_ops]
    for dtype in (torch.float32, torch.int64):
        out += [Case(name, dtype) for name in ("gather", "scatter", "all_to_all_single", "all_to_all_single_uneven",
                                               "all_to_all", "send_recv_ring", "batch_isend_irecv",
                                               "all_gather_uneven", "all_gather_scalars", "reduce_scatter_uneven",
                                               "coalesced_all_reduce", "coalesced_all_gather_into_tensor")]
    return out


def run_case(case: Case, rank: int, world: int, group) -> list:
    """Runs one case on `group` and returns this rank's result as nested lists."""
    d = case.dtype
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    if case.op == "all_reduce":
        t = value_of(rank, N, d, case.reduce)
        dist.all_reduce(t, op=reduce_op(case.reduce), group=group)
        return t.tolist()
    if case.op == "reduce":
        t = value_of(rank, N, d, case.reduce)
        dist.reduce(t, dst=world - 1, op=reduce_op(case.reduce), group=group)
        return t.tolist() if rank == world - 1 else []
    if case.op == "broadcast":
        t = value_of(rank, N, d)
        dist.broadcast(t, src=1 % world, group=group)
        return t.tolist()
    if case.op == "all_gather":
        outs = [torch.zeros(N, dtype=d) for _ in range(world)]
        dist.all_gather(outs, value_of(rank, N, d), group=group)
        return [o.tolist() for o in outs]
    if case.op == "all_gather_scalars":
        # 0-dim tensors, as jobs gather a loss or a count.
        outs = [torch.zeros((), dtype=d) for _ in range(world)]
        dist.all_gather(outs, value_of(rank, 1, d).reshape(()), group=group)
        return [o.tolist() for o in outs]
    if case.op == "all_gather_uneven":
        # rank r contributes r + 1 elements, as torch's NCCL backends allow.
        outs = [torch.zeros(j + 1, dtype=d) for j in range(world)]
        dist.all_gather(outs, value_of(rank, rank + 1, d), group=group)
        return [o.tolist() for o in outs]
    if case.op == "reduce_scatter_uneven":
        ins = [value_of(rank, j + 1, d) + j for j in range(world)]
        out = torch.zeros(rank + 1, dtype=d)
        dist.reduce_scatter(out, ins, group=group)
        return out.tolist()
    if case.op == "all_gather_into_tensor":
        out = torch.zeros(world * N, dtype=d)
        dist.all_gather_into_tensor(out, value_of(rank, N, d), group=group)
        return out.tolist()
    if case.op == "reduce_scatter":
        ins = [value_of(rank, N, d) + j for j in range(world)]
        out = torch.zeros(N, dtype=d)
        dist.reduce_scatter(out, ins, op=reduce_op(case.reduce), group=group)
        return out.tolist()
    if case.op == "reduce_scatter_tensor":
        inp = torch.cat([value_of(rank, N, d) + j for j in range(world)])
        out = torch.zeros(N, dtype=d)
        dist.reduce_scatter_tensor(out, inp, op=reduce_op(case.reduce), group=group)
        return out.tolist()
    if case.op == "gather":
        outs = [torch.zeros(N, dtype=d) for _ in range(world)] if rank == 0 else None
        dist.gather(value_of(rank, N, d), outs, dst=0, group=group)
        return [o.tolist() for o in outs] if rank == 0 else []
    if case.op == "scatter":
        ins = [value_of(j, N, d) * 10 for j in range(world)] if rank == 0 else None
        out = torch.zeros(N, dtype=d)
        dist.scatter(out, ins, src=0, group=group)
        return out.tolist()
    if case.op == "all_to_all_single":
        inp = torch.arange(world * 2, dtype=d) + 100 * rank
        out = torch.zeros(world * 2, dtype=d)
        dist.all_to_all_single(out, inp, group=group)
        return out.tolist()
    if case.op == "all_to_all_single_uneven":
        # rank r sends j+1 rows to rank j, and receives r+1 rows from every rank.
        in_splits = [j + 1 for j in range(world)]
        inp = torch.cat([torch.full((j + 1, 2), 10 * rank + j, dtype=d) for j in range(world)])
        out = torch.zeros(world * (rank + 1), 2, dtype=d)
        dist.all_to_all_single(out, inp, output_split_sizes=[rank + 1] * world, input_split_sizes=in_splits, group=group)
        return out.tolist()
    if case.op == "all_to_all":
        ins = [torch.full((3,), 10 * rank + j, dtype=d) for j in range(world)]
        outs = [torch.zeros(3, dtype=d) for _ in range(world)]
        dist.all_to_all(outs, ins, group=group)
        return [o.tolist() for o in outs]
    if case.op == "send_recv_ring":
        # Even ranks send first, odd ranks receive first: pair communicators created on first
        # use must not wait on each other around the ring.
        t, r = value_of(rank, N, d), torch.zeros(N, dtype=d)
        if rank % 2 == 0:
            dist.send(t, dst=dist.get_global_rank(group, nxt) if group is not None else nxt, group=group)
            dist.recv(r, src=dist.get_global_rank(group, prv) if group is not None else prv, group=group)
        else:
            dist.recv(r, src=dist.get_global_rank(group, prv) if group is not None else prv, group=group)
            dist.send(t, dst=dist.get_global_rank(group, nxt) if group is not None else nxt, group=group)
        return r.tolist()
    if case.op == "batch_isend_irecv":
        t, r = value_of(rank, N, d) * 3, torch.zeros(N, dtype=d)
        peer_next = dist.get_global_rank(group, nxt) if group is not None else nxt
        peer_prev = dist.get_global_rank(group, prv) if group is not None else prv
        ops = [dist.P2POp(dist.isend, t, peer_next, group), dist.P2POp(dist.irecv, r, peer_prev, group)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        return r.tolist()
    if case.op == "coalesced_all_reduce":
        a, b = value_of(rank, N, d), value_of(rank, N, d) * 2
        with dist._coalescing_manager(group=group, device=torch.device("cpu"), async_ops=True) as cm:
            dist.all_reduce(a, group=group)
            dist.all_reduce(b, group=group)
        cm.wait()
        return [a.tolist(), b.tolist()]
    if case.op == "coalesced_all_gather_into_tensor":
        a, b = torch.zeros(world * N, dtype=d), torch.zeros(world * N, dtype=d)
        with dist._coalescing_manager(group=group, device=torch.device("cpu"), async_ops=True) as cm:
            dist.all_gather_into_tensor(a, value_of(rank, N, d), group=group)
            dist.all_gather_into_tensor(b, value_of(rank, N, d) + 1, group=group)
        cm.wait()
        return [a.tolist(), b.tolist()]
    raise AssertionError(f"unknown case {case.op}")


def expected(case: Case, rank: int, world: int, nccl: bool = False) -> list:
    """What run_case must return on `rank`, computed without any collective; `nccl`: the group's
    transport is NCCL's (its floating-point AVG rounds as NCCL's does)."""
    d = case.dtype
    vals = [value_of(r, N, d, case.reduce) for r in range(world)]
    if case.op == "all_reduce":
        return reduce_expected(vals, case.reduce, d, nccl).tolist()
    if case.op == "reduce":
        return reduce_expected(vals, case.reduce, d, nccl).tolist() if rank == world - 1 else []
    if case.op == "broadcast":
        return vals[1 % world].tolist()
    if case.op == "all_gather":
        return [v.tolist() for v in vals]
    if case.op == "all_gather_into_tensor":
        return torch.cat(vals).tolist()
    if case.op == "all_gather_uneven":
        return [value_of(r, r + 1, d).tolist() for r in range(world)]
    if case.op == "all_gather_scalars":
        return [value_of(r, 1, d).reshape(()).tolist() for r in range(world)]
    if case.op == "reduce_scatter_uneven":
        return reduce_expected([value_of(r, rank + 1, d) + rank for r in range(world)], "SUM", d).tolist()
    if case.op in ("reduce_scatter", "reduce_scatter_tensor"):
        chunks = [value_of(r, N, d) + rank for r in range(world)]
        return reduce_expected(chunks, case.reduce, d, nccl).tolist()
    if case.op == "gather":
        return [v.tolist() for v in vals] if rank == 0 else []
    if case.op == "scatter":
        return (value_of(rank, N, d) * 10).tolist()
    if case.op == "all_to_all_single":
        return torch.cat([(torch.arange(world * 2, dtype=d) + 100 * r)[2 * rank:2 * rank + 2] for r in range(world)]).tolist()
    if case.op == "all_to_all_single_uneven":
        return torch.cat([torch.full((rank + 1, 2), 10 * r + rank, dtype=d) for r in range(world)]).tolist()
    if case.op == "all_to_all":
        return [torch.full((3,), 10 * r + rank, dtype=d).tolist() for r in range(world)]
    if case.op == "send_recv_ring":
        return vals[(rank - 1) % world].tolist()
    if case.op == "batch_isend_irecv":
        return (vals[(rank - 1) % world] * 3).tolist()
    if case.op == "coalesced_all_reduce":
        total = reduce_expected(vals, "SUM", d)
        return [total.tolist(), (total * 2).tolist()]
    if case.op == "coalesced_all_gather_into_tensor":
        return [torch.cat(vals).tolist(), torch.cat([v + 1 for v in vals]).tolist()]
    raise AssertionError(f"unknown case {case.op}")
