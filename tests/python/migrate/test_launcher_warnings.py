"""The CLI's torch-side launcher (python/nccl_migrate_launcher.py) silences, for its own
commands, the one warning importing the package gives on a torch that creates "nccl" itself
(shim.nccl_not_routed_warning), and no other warning: a job still gets it."""

import warnings

import nccl_migrate_launcher
from nccl_migrate import shim


def test_the_launcher_silences_the_shims_nccl_warning_and_nothing_else():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        nccl_migrate_launcher.quiet_nccl_not_routed_warning()
        warnings.warn(shim.nccl_not_routed_warning("2.11.0+cu130"), stacklevel=1)
        warnings.warn("nccl_migrate: TORCH_DIST_USE_NCCL2='maybe' is not 0 or 1", stacklevel=1)
    assert [str(w.message) for w in seen] == ["nccl_migrate: TORCH_DIST_USE_NCCL2='maybe' is not 0 or 1"]


def test_without_the_launcher_the_warning_is_given():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn(shim.nccl_not_routed_warning("2.11.0+cu130"), stacklevel=1)
    assert len(seen) == 1 and "creates 'nccl' itself" in str(seen[0].message)
