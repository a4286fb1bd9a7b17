"""What each torch.distributed op reads and writes on this rank: the tensors whose digests
are its input and its output, its reduce op and its peer. An input is only what this rank
contributes (a broadcast's receivers contribute nothing, whatever their buffer held), an output
only what the op defines here (a reduce's result exists on its destination only)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch.distributed as dist


@dataclass
class OpView:
    group: object
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    reduce_op: str | None = None
    peer: int | None = None  # global rank of the other side of a p2p op, or the root


def _group(args: dict):
    return args.get("group") or dist.distributed_c10d._get_default_group()


def _is_root(args: dict, group, global_key: str, group_key: str) -> tuple[bool, int | None]:
    """Whether this rank is the op's root (src/dst given as a global or a group rank)."""
    if args.get(group_key) is not None:
        root = dist.get_global_rank(group, args[group_key])
    else:
        root = args.get(global_key)
    return root == dist.get_rank(), root


def _reduce_name(args: dict) -> str:
    op = args.get("op", dist.ReduceOp.SUM)
    return str(getattr(op, "name", op)).split(".")[-1]


def _rooted(args, key, group_key):
    group = _group(args)
    return group, *_is_root(args, group, key, group_key)


def all_reduce(a):
    return OpView(_group(a), [a["tensor"]], [a["tensor"]], _reduce_name(a))


def broadcast(a):
    group, is_src, src = _rooted(a, "src", "group_src")
    return OpView(group, [a["tensor"]] if is_src else [], [a["tensor"]], peer=src)


def reduce(a):
    group, is_dst, dst = _rooted(a, "dst", "group_dst")
    return OpView(group, [a["tensor"]], [a["tensor"]] if is_dst else [], _reduce_name(a), dst)


def all_gather(a):
    return OpView(_group(a), [a["tensor"]], list(a["tensor_list"]))


def all_gather_into_tensor(a):
    return OpView(_group(a), [a["input_tensor"]], [a["output_tensor"]])


def reduce_scatter(a):
    return OpView(_group(a), list(a["input_list"]), [a["output"]], _reduce_name(a))


def reduce_scatter_tensor(a):
    return OpView(_group(a), [a["input"]], [a["output"]], _reduce_name(a))


def all_to_all_single(a):
    return OpView(_group(a), [a["input"]], [a["output"]])


def all_to_all(a):
    return OpView(_group(a), list(a["input_tensor_list"]), list(a["output_tensor_list"]))


def gather(a):
    group, is_dst, dst = _rooted(a, "dst", "group_dst")
    return OpView(group, [a["tensor"]], list(a.get("gather_list") or []) if is_dst else [], peer=dst)


def scatter(a):
    group, is_src, src = _rooted(a, "src", "group_src")
    return OpView(group, list(a.get("scatter_list") or []) if is_src else [], [a["tensor"]], peer=src)


def _peer(a, key, group_key):
    group = _group(a)
    peer = dist.get_global_rank(group, a[group_key]) if a.get(group_key) is not None else a.get(key)
    return group, peer


def send(a):
    group, peer = _peer(a, "dst", "group_dst")
    return OpView(group, [a["tensor"]], [], peer=peer)


def recv(a):
    group, peer = _peer(a, "src", "group_src")
    return OpView(group, [], [a["tensor"]], peer=peer)


def batch_isend_irecv(a):
    ops = list(a["p2p_op_list"])
    group = (ops[0].group if ops else None) or dist.distributed_c10d._get_default_group()
    # The recorder's isend keeps torch's name (functools.wraps), so either one is recognised.
    is_send = [getattr(op.op, "__name__", "") == "isend" for op in ops]
    return OpView(group, [op.tensor for op, s in zip(ops, is_send) if s],
                  [op.tensor for op, s in zip(ops, is_send) if not s])


def barrier(a):
    return OpView(_group(a))


# The functions the recorder wraps, each with the view that reads its arguments.
VIEWS = {
    "all_reduce": all_reduce, "broadcast": broadcast, "reduce": reduce, "all_gather": all_gather,
    "all_gather_into_tensor": all_gather_into_tensor, "reduce_scatter": reduce_scatter,
    "reduce_scatter_tensor": reduce_scatter_tensor, "all_to_all_single": all_to_all_single,
    "all_to_all": all_to_all, "gather": gather, "scatter": scatter, "send": send, "recv": recv,
    "isend": send, "irecv": recv, "batch_isend_irecv": batch_isend_irecv, "barrier": barrier,
}
