"""nccl-migrate: the toolkit's NCCL backends for torch.distributed, registered on import.

Importing this package registers, with ``torch.distributed``, the toolkit's own backends:

* ``migrate-legacy``: the legacy behaviour (many communicators per group, created lazily)
* ``migrate-nccl2``: the rewritten behaviour (one communicator per group, device-bound)
* ``migrate-lazy``: the rewritten behaviour plus lazy per-peer-pair p2p communicators

All run CUDA tensors over NCCL and CPU tensors over torch's own Gloo. Installed packages also
register through torch's ``torch.distributed.backends`` entry points, without an import.

Importing the package also activates the shim (see ``nccl_migrate.shim``): torch's NCCL names
then resolve to torch's implementation where it can run, and to the toolkit's otherwise.
"""

from . import flight_recorder, shim
from ._registration import BACKEND_NAMES, register
from ._version import __version__
from .introspection import communicators, process_communicators

register()
shim.activate()

__all__ = ["BACKEND_NAMES", "communicators", "flight_recorder", "process_communicators", "register", "shim",
           "__version__"]
