"""Bad input gets torch's error type and wording (where torch's NCCL backends have one), never a
crash or a hang; every behaviour answers the same."""

import pytest
import torch

from ranks import run_ranks


def _try(fn):
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - the type and text are the result
        return type(error).__name__, str(error).split("\n")[0]
    return "no error", ""


def _bad_inputs(backend):
    def run(rank, world, store):
        import torch.distributed as dist

        import nccl_migrate  # noqa: F401

        dist.init_process_group(backend, store=store, rank=rank, world_size=world)
        t = torch.ones(4)
        out = {
            "non_contiguous": _try(lambda: dist.all_reduce(torch.ones(4, 4).t())),
            "unsupported_dtype": _try(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16))),
            "bitwise_op": _try(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND)),
            "bool_avg": _try(lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=dist.ReduceOp.AVG)),
            "complex_max": _try(lambda: dist.all_reduce(torch.ones(4, dtype=torch.complex64), op=dist.ReduceOp.MAX)),
            "gather_list_size": _try(lambda: dist.all_gather([torch.ones(4)] * 3, t)),
            "gather_type_mismatch": _try(lambda: dist.all_gather([torch.ones(4, dtype=torch.int64)] * world, t)),
            "flat_output_size": _try(lambda: dist.all_gather_into_tensor(torch.ones(4 * world + 1), t)),
            "reduce_scatter_input_size": _try(lambda: dist.reduce_scatter_tensor(torch.ones(4), torch.ones(4 * world + 2))),
            "split_sizes": _try(lambda: dist.all_to_all_single(torch.ones(4), torch.ones(4), [1, 1], [3, 3])),
            "recv_any_source": _try(lambda: dist.recv(torch.ones(4))),
            "peer_out_of_range": _try(lambda: dist.send(t, dst=world + 3)),
            "sparse": _try(lambda: dist.broadcast(torch.ones(4).to_sparse(), src=0)),
        }
        # After all of that the group still works.
        ok = torch.ones(4)
        dist.all_reduce(ok)
        out["still_works"] = ok.tolist()
        dist.destroy_process_group()
        return out

    return run


def _legacy(r, w, s): return _bad_inputs("migrate-legacy")(r, w, s)
def _rewritten(r, w, s): return _bad_inputs("migrate-nccl2")(r, w, s)
def _lazy(r, w, s): return _bad_inputs("migrate-lazy")(r, w, s)


EXPECTED = {
    "non_contiguous": ("ValueError", "Tensors must be contiguous"),
    "unsupported_dtype": ("ValueError", "NCCL has no data type for Short"),
    "bitwise_op": ("ValueError", "Cannot use ReduceOp.BAND with NCCL"),
    "bool_avg": ("ValueError", "Cannot use ReduceOp.AVG with boolean inputs"),
    "complex_max": ("ValueError", "MAX on complex tensors"),  # torch's Python layer may answer first
    "gather_list_size": ("ValueError", "all_gather expects 2 tensors (one per rank), got 3"),
    "gather_type_mismatch": ("ValueError", "Invalid usage of tensors with different dtypes"),  # torch's check
    "flat_output_size": ("ValueError", "output tensor size must be equal to world_size times input tensor size"),
    "reduce_scatter_input_size": ("ValueError", "input tensor must be the same size as output size times world size"),
    "split_sizes": ("ValueError", "split sizes add up to"),
    "recv_any_source": ("RuntimeError", "does not support recvAnysource"),
    "sparse": ("NotImplementedError", "'SparseCPU' backend"),  # torch's dispatcher stops it first
}


@pytest.mark.parametrize("runner", [_legacy, _rewritten, _lazy], ids=["legacy", "rewritten", "lazy"])
def test_bad_input_is_a_clear_error_and_the_group_survives(runner):
    results = run_ranks(runner, world_size=2)
    for rank, result in enumerate(results):
        for case, (kind, text) in EXPECTED.items():
            got_kind, got_text = result[case]
            assert got_kind == kind and text in got_text, f"{case}: got {got_kind}: {got_text}"
        # The wording of torch's LazyBackend for the same mistake.
        assert result["peer_out_of_range"] == ("ValueError", "invalid peer rank 5 (self=%d, size=2)" % rank)
        assert result["still_works"] == [2.0] * 4
