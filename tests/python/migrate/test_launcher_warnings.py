"""The CLI's torch-side launcher (python/nccl_migrate_launcher.py) silences, for its own
commands, the one warning the shim gives on a torch that creates "nccl" itself (torch 2.11:
no `backend_plugins`), and no other warning: a job, which imports the package without the
launcher, still gets it. The warning is the one shim's registration really gives, here made
to run as it does on such a torch."""

import warnings

import nccl_migrate_launcher
import pytest
import torch
from nccl_migrate import shim, torch_features


@pytest.fixture
def torch_without_plugins(monkeypatch):
    real_has = torch_features.has
    monkeypatch.setattr(torch_features, "has", lambda name: False if name == "backend_plugins" else real_has(name))


def _warnings_of_registering_nccl(quiet: bool) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if quiet:
            nccl_migrate_launcher.quiet_nccl_not_routed_warning()
        shim._register("nccl", lambda *args: None)  # returns before registering anything: nccl is not routed
        warnings.warn("nccl_migrate: TORCH_DIST_USE_NCCL2='maybe' is not 0 or 1", stacklevel=1)
    return [str(w.message) for w in seen]


def test_a_job_is_told_that_nccl_is_not_routed(torch_without_plugins):
    assert _warnings_of_registering_nccl(quiet=False) == [shim.nccl_not_routed_warning(torch.__version__),
                                                          "nccl_migrate: TORCH_DIST_USE_NCCL2='maybe' is not 0 or 1"]


def test_the_launcher_silences_that_warning_and_nothing_else(torch_without_plugins):
    assert _warnings_of_registering_nccl(quiet=True) == ["nccl_migrate: TORCH_DIST_USE_NCCL2='maybe' is not 0 or 1"]
