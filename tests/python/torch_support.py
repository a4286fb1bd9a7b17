"""Skips for tests of torch features that the torch under test lacks (the toolkit supports
torch 2.11 through 2.15): the reason names the feature and what it is, never a silent pass."""

import pytest


def requires_torch(*features: str):
    """A pytest mark: skip unless this torch (and the native module built against it) has every
    one of `features` (names from nccl_migrate.torch_features.features())."""
    from nccl_migrate import torch_features

    lacking = [name for name in features if not torch_features.has(name)]
    return pytest.mark.skipif(bool(lacking), reason="; ".join(torch_features.lacks_reason(n) for n in lacking))


def fr_name(backend_name: str, op: str) -> str:
    """A flight-recorder profiling name: `<backend name>:<op>` as torch writes it, with "nccl" as
    the prefix on a torch without nccl2, whose analyzer (torchfrtrace) reads only that."""
    from nccl_migrate import torch_features

    return f"{backend_name if torch_features.has('nccl2') else 'nccl'}:{op}"
