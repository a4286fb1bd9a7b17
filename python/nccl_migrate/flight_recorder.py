"""The toolkit backends' flight recorder: the last ``TORCH_FR_BUFFER_SIZE`` ops of the process
(default 2000; 0 turns it off), in torch's dump format so that torch's analyzer
(``torchfrtrace``) reads it. Dumps happen on a timeout or failure and on request."""

from __future__ import annotations

import torch.distributed as dist

from . import fr_dump
from ._native import native


def dump() -> dict:
    """The recorder's contents as torch's dump dict (version, pg_config, pg_status, entries), read
    as every dump is (fr_dump.py)."""
    return fr_dump.loads(native.flight_recorder_dump(), "this process's flight recorder")


def dump_to_file(rank: int | None = None) -> str:
    """Writes the dump to ``$TORCH_FR_DUMP_TEMP_FILE<rank>`` (torch's default location when
    unset) and returns the path. ``rank`` defaults to this process's global rank."""
    if rank is None:
        rank = dist.get_rank() if dist.is_initialized() else 0
    return native.flight_recorder_dump_to_file(rank)
