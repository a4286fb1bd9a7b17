"""nccl-migrate: the toolkit's NCCL backends for torch.distributed, registered on import.

Importing this package registers, with ``torch.distributed``, the toolkit's own backends:

* ``migrate-legacy``: the legacy behaviour (many communicators per group, created lazily)
* ``migrate-nccl2``: the rewritten behaviour (one communicator per group, device-bound)
* ``migrate-lazy``: the rewritten behaviour plus lazy per-peer-pair p2p communicators

All run CUDA tensors over NCCL and CPU tensors over torch's own Gloo. Installed packages also
register through torch's ``torch.distributed.backends`` entry points, without an import.

Importing the package also activates the shim (see ``nccl_migrate.shim``): torch's NCCL names
then resolve to torch's implementation where it can run, and to the toolkit's otherwise.

One import defers both: ``python -m nccl_migrate``, the CLI's torch side (run directly or, as the
``nccl-migrate`` CLI runs it, through ``nccl_migrate_launcher``), whose ``fr`` reads dumps without
torch; its other commands load the package as above before they run (``cli.main``).
"""

import sys

from ._version import __version__


def _started_as_the_cli() -> bool:
    """Whether this import is `python -m nccl_migrate` finding its __main__. Directly, Python
    sets sys.argv[0] to "-m" while it imports the package (sys.orig_argv names the module);
    through nccl_migrate_launcher, the launcher is __main__ while it runs the package."""
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if main_spec is not None and main_spec.name == "nccl_migrate_launcher":
        return True
    argv = getattr(sys, "orig_argv", [])
    return sys.argv[:1] == ["-m"] and "-m" in argv and argv[argv.index("-m") + 1:][:1] == ["nccl_migrate"]


_loaded = False


def _load() -> None:
    """Registers the backends and activates the shim, once: what importing the package does."""
    global BACKEND_NAMES, _loaded, communicators, flight_recorder, process_communicators, register, shim
    if _loaded:
        return
    from . import flight_recorder, shim
    from ._registration import BACKEND_NAMES, register
    from .introspection import communicators, process_communicators

    register()
    shim.activate()
    _loaded = True


if not _started_as_the_cli():
    _load()

__all__ = ["BACKEND_NAMES", "communicators", "flight_recorder", "process_communicators", "register", "shim",
           "__version__"]
