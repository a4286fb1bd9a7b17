"""Opt-in activation for jobs that cannot be edited: torch calls this at ``import torch`` (entry
point group ``torch.backends``). It imports nothing unless NCCL_MIGRATE_ACTIVATE=1 or
NCCL_MIGRATE_AB_RECORD is set, so with both unset torch behaves exactly as if nccl-migrate were
not installed. Disable all such hooks with torch's own TORCH_DEVICE_BACKEND_AUTOLOAD=0."""

import os

ACTIVATE_VARIABLE = "NCCL_MIGRATE_ACTIVATE"
AB_RECORD_VARIABLE = "NCCL_MIGRATE_AB_RECORD"


def activate_if_asked() -> None:
    value = os.environ.get(ACTIVATE_VARIABLE)
    if value not in (None, "", "0"):
        if value != "1":
            raise ValueError(f"{ACTIVATE_VARIABLE}={value!r} is not valid; use 1 to activate nccl_migrate, or unset it")
        import nccl_migrate  # noqa: F401  (activates the shim on import)
    if os.environ.get(AB_RECORD_VARIABLE):
        # An A/B run (nccl-migrate ab) records every collective of this process.
        from nccl_migrate.ab.recorder import install_from_environment

        install_from_environment()
