"""The recorder's one op table against the torch under test: every op the ProcessGroup hooks can
report has exactly one spec, every wrapped function belongs to one spec, and every reduction seen
from C++ names the dispatcher op that carries its reduce op."""

import inspect

import torch
import torch.distributed as dist
from nccl_migrate.ab import op_table
from nccl_migrate.ab.op_table import BY_FUNCTION, OPS
from torch_support import requires_torch


@requires_torch("process_group_hooks")
def test_every_hook_op_type_has_exactly_one_spec():
    from torch._C._distributed_c10d import HookOpName

    for member in HookOpName.__members__:
        if member == "name":  # pybind's enum lists its property among the members
            continue
        claims = [spec.name for spec in OPS if member in spec.hook_names]
        assert len(claims) == 1, (member, claims)
    stale = {hook for spec in OPS for hook in spec.hook_names} - set(HookOpName.__members__)
    assert not stale, f"specs name hook ops this torch does not have: {stale}"


def test_every_function_belongs_to_exactly_one_spec_and_reads_its_own_arguments():
    functions = [function for spec in OPS for function in spec.functions]
    assert len(functions) == len(set(functions)) == len(BY_FUNCTION)
    for spec in OPS:
        for function in spec.functions:
            if function.endswith("_single") and not hasattr(dist, function):
                continue  # a newer torch's name for the same op
            parameters = inspect.signature(getattr(dist, function)).parameters
            assert spec.view is not None and "group" in parameters or function == "batch_isend_irecv", function
    assert [spec.name for spec in OPS].count("all_reduce") == 1 and len({s.name for s in OPS}) == len(OPS)


def test_every_reduction_names_the_dispatcher_op_that_carries_its_reduce_op():
    for spec in OPS:
        if spec.reduces:
            assert spec.dispatcher, spec.name
            schema = getattr(torch.ops.c10d, spec.dispatcher).default._schema
            assert "reduce_op" in [a.name for a in schema.arguments], spec.name
        if spec.replay is not None and spec.reduces:
            assert spec.replay([torch.ones(1)], [torch.ones(1)], None, None, None) is None, \
                f"{spec.name} must not be replayed without its reduce op"


def test_a_reduce_op_is_named_the_same_in_every_run_whatever_form_the_job_gave_it():
    """A boxed ReduceOp (PREMUL_SUM with its factor, as FSDP2's gradient divide factor makes) is
    named by op and factor, never by its object: two runs must agree on the name."""
    group, tensor = object(), torch.ones(2)
    names = [op_table.all_reduce({"tensor": tensor, "group": group, "op": op}).reduce_op
             for op in (dist.ReduceOp.SUM, dist.ReduceOp(dist.ReduceOp.AVG), dist._make_nccl_premul_sum(0.5),
                        dist._make_nccl_premul_sum(torch.tensor(0.25)))]
    # torch 2.11's ReduceOp does not show its factor to Python: the name is then the op's alone.
    shows_factor = hasattr(dist._make_nccl_premul_sum(0.5), "factor")
    premul = ["PREMUL_SUM(0.5)", "PREMUL_SUM(0.25)"] if shows_factor else ["PREMUL_SUM", "PREMUL_SUM"]
    assert names == ["SUM", "AVG", *premul]
    assert op_table.all_reduce({"tensor": tensor, "group": group}).reduce_op == "SUM"
    assert op_table.reduce_op_name(None) is None
