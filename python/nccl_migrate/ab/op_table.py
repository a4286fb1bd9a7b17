"""The recorder's one table of ops: per op, one OpSpec saying which torch.distributed functions
issue it, what the ProcessGroup hooks call it, what it reads and writes on this rank (its view),
whether it may write its input, and how a shadow replays it when it was issued from C++.

A view gives the tensors whose digests are the op's input and output, its reduce op and its peer.
An input is only what this rank contributes (a broadcast's receivers contribute nothing, whatever
their buffer held), an output only what the op defines here (a reduce's result exists on its
destination only)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.distributed as dist


@dataclass
class OpView:
    group: object
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    reduce_op: str | None = None
    peer: int | None = None  # global rank of the other side of a p2p op, or the root
    # A batch of sends and recvs: ("send" or "recv", peer's global rank) per message, in its order,
    # each numbered in its direction as a send or recv would be, so a receiver's records name the
    # sender's message (and the comparison the sender's input) it got.
    messages: list = field(default_factory=list)


def _group(args: dict):
    return args.get("group") or dist.distributed_c10d._get_default_group()


def _is_root(args: dict, group, global_key: str, group_key: str) -> tuple[bool, int | None]:
    """Whether this rank is the op's root (src/dst given as a global or a group rank)."""
    if args.get(group_key) is not None:
        root = dist.get_global_rank(group, args[group_key])
    else:
        root = args.get(global_key)
    return root == dist.get_rank(), root


def reduce_op_name(op) -> str | None:
    """The one name records give a reduce op, the same in every run: ``SUM`` for a ReduceOp member
    (``ReduceOp.SUM``, a ``RedOpType``) or a ``ReduceOp`` instance, and for a PREMUL_SUM (a boxed
    ``ReduceOp`` with a factor, as FSDP2's gradient divide factor makes) its factor too:
    ``PREMUL_SUM(0.5)``. A factor held in a tensor is named by its value when it lives in host
    memory (reading a device's would wait for it)."""
    if op is None:
        return None
    kind = getattr(op, "op", op)  # a ReduceOp instance carries its RedOpType as .op
    name = str(getattr(kind, "name", kind)).split(".")[-1]
    if name != "PREMUL_SUM" or not isinstance(op, dist.ReduceOp):
        return name
    factor = getattr(op, "factor", None)  # torch 2.11's ReduceOp does not show its factor
    if factor is None:
        return "PREMUL_SUM"
    if isinstance(factor, torch.Tensor):
        return f"PREMUL_SUM({factor.item()!r})" if factor.device.type == "cpu" else f"PREMUL_SUM(tensor on {factor.device})"
    return f"PREMUL_SUM({factor!r})"


def _reduce_name(args: dict) -> str:
    return reduce_op_name(args.get("op", dist.ReduceOp.SUM))


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
                  [op.tensor for op, s in zip(ops, is_send) if not s],
                  messages=[("send" if s else "recv", op.peer) for op, s in zip(ops, is_send)])


def barrier(a):
    return OpView(_group(a))


def _replay_reduction(key: str, output_key: str | None = None):
    """A reduction issued from C++, replayed with the reduce op torch's dispatcher was given, or
    not at all: the hooks do not carry it, and a guessed one would blame the backend for the job's
    choice."""

    def replay(tensors, outputs, root, group, reduce_op):
        if reduce_op is None or len(tensors) != 1 or (output_key and len(outputs) != 1):
            return None
        call = {key: tensors[0], "op": reduce_op}
        if output_key:
            call[output_key] = outputs[0]
        return call

    return replay


def _replay_broadcast(tensors, outputs, root, group, reduce_op):
    return {"tensor": tensors[0], "src": dist.get_global_rank(group, root)} if len(tensors) == 1 else None


def _replay_all_gather(tensors, outputs, root, group, reduce_op):
    return {"tensor_list": list(outputs), "tensor": tensors[0]} if len(tensors) == 1 else None


def _replay_all_gather_into_tensor(tensors, outputs, root, group, reduce_op):
    ok = len(tensors) == 1 and len(outputs) == 1
    return {"output_tensor": outputs[0], "input_tensor": tensors[0]} if ok else None


def _replay_barrier(tensors, outputs, root, group, reduce_op):
    return {}


Replay = Callable[..., "dict | None"]


@dataclass(frozen=True)
class OpSpec:
    name: str  # the op's name in records: torch.distributed's function for it
    view: Callable[[dict], OpView] | None = None  # reads a Python call's arguments; None: no Python function
    functions: tuple[str, ...] = ()  # torch.distributed functions that issue it (aliases share arguments)
    hook_names: tuple[str, ...] = ()  # torch's HookOpName members the ProcessGroup hooks report it as
    writes_input: bool = False  # the backend may write the tensor it reads: its input is hashed before issue
    in_place: bool = False  # seen from a hook, its outputs are its inputs
    asynchronous: bool = False  # the function always returns works
    reduces: bool = False  # takes a reduce op, which the hooks do not report
    dispatcher: str | None = None  # the c10d dispatcher op whose arguments carry the reduce op
    replay: Replay | None = None  # the Python call that replays it from a hook's tensors (--shadow)
    # p2p: "send" or "recv", numbered per direction between two ranks apart from the group's
    # collectives (so a send and the recv that takes its message share one number, and p2p between
    # some ranks does not shift the others' collective numbers); "batch", numbered per rank.
    p2p: str | None = None


OPS: tuple[OpSpec, ...] = (
    OpSpec("all_reduce", all_reduce, ("all_reduce",), ("ALLREDUCE",), writes_input=True, in_place=True,
           reduces=True, dispatcher="allreduce_", replay=_replay_reduction("tensor")),
    OpSpec("broadcast", broadcast, ("broadcast",), ("BROADCAST",), writes_input=True, in_place=True,
           replay=_replay_broadcast),
    OpSpec("reduce", reduce, ("reduce",), ("REDUCE",), writes_input=True, in_place=True, reduces=True,
           dispatcher="reduce_"),
    OpSpec("all_gather", all_gather, ("all_gather",), ("ALLGATHER",), replay=_replay_all_gather),
    OpSpec("all_gather_into_tensor", all_gather_into_tensor, ("all_gather_into_tensor", "all_gather_single"),
           ("ALLGATHER_BASE",), replay=_replay_all_gather_into_tensor),
    OpSpec("reduce_scatter", reduce_scatter, ("reduce_scatter",), ("REDUCE_SCATTER",), reduces=True,
           dispatcher="reduce_scatter_"),
    OpSpec("reduce_scatter_tensor", reduce_scatter_tensor, ("reduce_scatter_tensor", "reduce_scatter_single"),
           ("REDUCE_SCATTER_BASE",), reduces=True, dispatcher="_reduce_scatter_base_", replay=_replay_reduction("input", "output")),
    OpSpec("all_to_all_single", all_to_all_single, ("all_to_all_single",), ("ALLTOALL_BASE",)),
    OpSpec("all_to_all", all_to_all, ("all_to_all",), ("ALLTOALL",)),
    OpSpec("gather", gather, ("gather",), ("GATHER",)),
    OpSpec("scatter", scatter, ("scatter",), ("SCATTER",)),
    OpSpec("send", send, ("send",), ("SEND",), p2p="send"),
    OpSpec("recv", recv, ("recv",), ("RECV",), p2p="recv"),
    OpSpec("isend", send, ("isend",), asynchronous=True, p2p="send"),
    OpSpec("irecv", recv, ("irecv",), asynchronous=True, p2p="recv"),
    OpSpec("batch_isend_irecv", batch_isend_irecv, ("batch_isend_irecv",), asynchronous=True,
           p2p="batch"),
    OpSpec("barrier", barrier, ("barrier",), ("BARRIER",), replay=_replay_barrier),
    # Seen only from C++ (or from torch functions built on them): recorded, never replayed.
    OpSpec("all_reduce_coalesced", hook_names=("ALLREDUCE_COALESCED",), writes_input=True, in_place=True,
           reduces=True, dispatcher="allreduce_coalesced_"),
    OpSpec("all_gather_coalesced", hook_names=("ALLGATHER_COALESCED",)),
    OpSpec("all_gather_into_tensor_coalesced", hook_names=("ALLGATHER_INTO_TENSOR_COALESCED",)),
    OpSpec("reduce_scatter_tensor_coalesced", hook_names=("REDUCE_SCATTER_TENSOR_COALESCED",), reduces=True,
           dispatcher="reduce_scatter_tensor_coalesced_"),
    OpSpec("new_window", hook_names=("NEW_WINDOW",)),
    OpSpec("split", hook_names=("SPLIT",)),
    OpSpec("unknown", hook_names=("UNKNOWN",)),
)

# Functions that send pickled objects through the ops above: not ops themselves, but what their
# ops carry is the job's own bytes (per-run ids included), so records say which one issued them.
OBJECT_COLLECTIVES = ("all_gather_object", "gather_object", "broadcast_object_list", "scatter_object_list",
                      "send_object_list", "recv_object_list")

BY_NAME = {spec.name: spec for spec in OPS}
BY_FUNCTION = {function: spec for spec in OPS for function in spec.functions}
BY_HOOK_NAME = {hook: spec for spec in OPS for hook in spec.hook_names}


def wrapped_functions(module) -> list[str]:
    """The functions of ``module`` (torch.distributed) the recorder wraps: those this torch has."""
    return [function for function in BY_FUNCTION if hasattr(module, function)]


def channel(spec: OpSpec, group: str, rank: int, peer: int | None) -> str:
    """What an op is numbered in (its records' "group"): a collective, its group; a send or recv,
    the direction it carries a message in (``0/p2p 1>2``: global rank 1 to 2 in group 0), so the
    n-th send from 1 to 2 and the n-th recv on 2 from 1 are one (channel, seq) on both ranks; a
    batch of sends and recvs, its rank's own (``0/batch 1``)."""
    if spec.p2p is None:
        return group
    if spec.p2p == "batch" or peer is None:
        return f"{group}/batch {rank}"
    source, destination = (rank, peer) if spec.p2p == "send" else (peer, rank)
    return f"{group}/p2p {source}>{destination}"
