"""`python -m nccl_migrate <command>`: the torch-side commands of the nccl-migrate CLI."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
