"""What each op reads and writes on this rank (its view), the calls a shadow replays from a hook's
tensors, and the channel an op is numbered in; in one process that is rank 0 of a world of one
(torch's Gloo over an in-memory store), asking about roots and peers that are and are not it."""

import types

import pytest
import torch
import torch.distributed as dist

from nccl_migrate.ab import op_table
from nccl_migrate.ab.op_table import BY_NAME, OpView, channel


@pytest.fixture(scope="module")
def world():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield dist.distributed_c10d._get_default_group()
    finally:
        dist.destroy_process_group()


def view(name, **arguments):
    return BY_NAME[name].view(arguments)


def test_collectives_read_and_write_their_own_tensors(world):
    t, u, v = torch.ones(2), torch.zeros(2), torch.ones(4)
    assert view("all_reduce", tensor=t) == OpView(world, [t], [t], "SUM")
    assert view("all_reduce", tensor=t, op=dist.ReduceOp.MAX, group=world) == OpView(world, [t], [t], "MAX")
    assert view("all_gather", tensor=t, tensor_list=(u, t)) == OpView(world, [t], [u, t])
    assert view("all_gather_into_tensor", input_tensor=t, output_tensor=v) == OpView(world, [t], [v])
    assert view("reduce_scatter", input_list=(t, u), output=u, op=dist.ReduceOp.MIN) == \
        OpView(world, [t, u], [u], "MIN")
    assert view("reduce_scatter_tensor", input=v, output=t) == OpView(world, [v], [t], "SUM")
    assert view("all_to_all_single", input=t, output=u) == OpView(world, [t], [u])
    assert view("all_to_all", input_tensor_list=(t,), output_tensor_list=(u,)) == OpView(world, [t], [u])
    assert view("barrier") == OpView(world)
    assert view("barrier", group=world).group is world


def test_a_rooted_op_reads_or_writes_only_where_this_rank_is_the_root(world):
    t, u = torch.ones(2), torch.zeros(2)
    # Rank 0 is the root, named as a global rank or as a rank of the group.
    assert view("broadcast", tensor=t, src=0) == OpView(world, [t], [t], peer=0)
    assert view("broadcast", tensor=t, group_src=0, src=5) == OpView(world, [t], [t], peer=0)
    assert view("reduce", tensor=t, dst=0, op=dist.ReduceOp.PRODUCT) == OpView(world, [t], [t], "PRODUCT", 0)
    assert view("gather", tensor=t, dst=0, gather_list=(u, t)) == OpView(world, [t], [u, t], peer=0)
    assert view("gather", tensor=t, dst=0, gather_list=None) == OpView(world, [t], [], peer=0)
    assert view("scatter", tensor=t, src=0, scatter_list=(u, t)) == OpView(world, [u, t], [t], peer=0)
    assert view("scatter", tensor=t, group_src=0, scatter_list=None) == OpView(world, [], [t], peer=0)
    # Another rank is the root: what it sends is not this rank's input, nor its result this rank's.
    assert view("broadcast", tensor=t, src=1) == OpView(world, [], [t], peer=1)
    assert view("reduce", tensor=t, dst=1) == OpView(world, [t], [], "SUM", 1)
    assert view("gather", tensor=t, dst=1, gather_list=(u,)) == OpView(world, [t], [], peer=1)
    assert view("scatter", tensor=t, src=1, scatter_list=(u,)) == OpView(world, [], [t], peer=1)


def test_p2p_names_its_peer_by_global_rank(world):
    t = torch.ones(2)
    assert view("send", tensor=t, dst=3) == OpView(world, [t], [], peer=3)
    assert view("send", tensor=t, group_dst=0, dst=3) == OpView(world, [t], [], peer=0)
    assert view("recv", tensor=t, src=2) == OpView(world, [], [t], peer=2)
    assert view("recv", tensor=t, group_src=0) == OpView(world, [], [t], peer=0)
    assert view("isend", tensor=t, dst=1).inputs == [t] and view("irecv", tensor=t, src=1).outputs == [t]


def test_a_batch_lists_its_messages_in_order_and_recognises_a_wrapped_isend(world):
    def isend():
        pass

    def irecv():
        pass

    a, b, c = torch.ones(1), torch.ones(2), torch.ones(3)
    ops = [types.SimpleNamespace(op=isend, tensor=a, peer=1, group=None),
           types.SimpleNamespace(op=irecv, tensor=b, peer=2, group=None),
           types.SimpleNamespace(op=dist.isend, tensor=c, peer=3, group=None)]
    assert view("batch_isend_irecv", p2p_op_list=iter(ops)) == \
        OpView(world, [a, c], [b], messages=[("send", 1), ("recv", 2), ("send", 3)])
    mine = object()
    ops[0].group = mine
    assert view("batch_isend_irecv", p2p_op_list=ops).group is mine
    assert view("batch_isend_irecv", p2p_op_list=[]) == OpView(world)


def test_a_reduction_from_cpp_is_replayed_only_with_its_reduce_op_and_one_tensor_each_way():
    t, u = torch.ones(1), torch.zeros(1)
    # Made here, not read from the table built at import: the calls it makes are the ones checked.
    all_reduce, reduce_scatter = op_table._replay_reduction("tensor"), op_table._replay_reduction("input", "output")
    assert all_reduce([t], [t], None, None, "SUM") == {"tensor": t, "op": "SUM"}
    assert all_reduce([t], [t], None, None, None) is None
    assert all_reduce([t, u], [t, u], None, None, "SUM") is None
    assert all_reduce([t], [], None, None, "SUM") == {"tensor": t, "op": "SUM"}  # in place: no output of its own
    assert reduce_scatter([t], [u], None, None, "MAX") == {"input": t, "output": u, "op": "MAX"}
    assert reduce_scatter([t], [u, u], None, None, "MAX") is None
    assert reduce_scatter([t], [], None, None, "MAX") is None
    assert reduce_scatter([t, u], [u], None, None, "MAX") is None
    for spec, made in ((BY_NAME["all_reduce"], all_reduce), (BY_NAME["reduce_scatter_tensor"], reduce_scatter)):
        assert spec.replay([t], [u], None, None, "SUM") == made([t], [u], None, None, "SUM")  # the table's are these


def test_other_ops_from_cpp_are_replayed_from_their_tensors(world):
    t, u = torch.ones(1), torch.zeros(1)
    assert BY_NAME["broadcast"].replay([t], [t], 0, world, None) == {"tensor": t, "src": 0}
    assert BY_NAME["broadcast"].replay([t, u], [t, u], 0, world, None) is None
    assert BY_NAME["all_gather"].replay([t], (u, t), None, world, None) == {"tensor_list": [u, t], "tensor": t}
    assert BY_NAME["all_gather"].replay([t, u], [u], None, world, None) is None
    assert BY_NAME["all_gather_into_tensor"].replay([t], [u], None, world, None) == \
        {"output_tensor": u, "input_tensor": t}
    assert BY_NAME["all_gather_into_tensor"].replay([t], [u, u], None, world, None) is None
    assert BY_NAME["all_gather_into_tensor"].replay([t, t], [u], None, world, None) is None
    assert BY_NAME["barrier"].replay([], [], None, world, None) == {}


def test_each_op_is_numbered_in_its_channel():
    assert channel(BY_NAME["all_reduce"], "0", 1, None) == "0"
    assert channel(BY_NAME["broadcast"], "3", 1, 0) == "3"
    assert channel(BY_NAME["send"], "0", 1, 2) == "0/p2p 1>2"
    assert channel(BY_NAME["isend"], "0", 1, 2) == "0/p2p 1>2"
    assert channel(BY_NAME["recv"], "0", 2, 1) == "0/p2p 1>2"
    assert channel(BY_NAME["irecv"], "4", 2, 1) == "4/p2p 1>2"
    assert channel(BY_NAME["batch_isend_irecv"], "0", 1, 2) == "0/batch 1"
    assert channel(BY_NAME["send"], "0", 1, None) == "0/batch 1"


def test_only_the_functions_this_torch_has_are_wrapped():
    module = types.SimpleNamespace(all_reduce=1, send=2, all_gather_single=3)
    assert op_table.wrapped_functions(module) == ["all_reduce", "all_gather_single", "send"]

