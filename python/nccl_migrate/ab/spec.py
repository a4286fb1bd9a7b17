"""What one side of an A/B run means: a SPEC becomes the environment variables the job runs with.
Its forms are SPEC_HELP's, which `ab --help` prints: a behaviour (legacy, rewritten, lazy, with
:toolkit, :torch or :auto), backend=NAME or KEY=VALUE, comma-separated, later items winning."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field

from . import BACKEND_VARIABLE, PERTURB_VARIABLE

IMPLEMENTATIONS = ("toolkit", "torch", "auto")
TORCH_NCCL_NAMES = ("nccl", "nccl2", "nccl-lazy", "nccl-legacy")

# Each behaviour is reached the way an unmodified job reaches it: backend "nccl" plus the variable
# torch 2.15 reads; rewritten-lazy-p2p has no variable, so its name replaces the job's.
BEHAVIOUR_VARIABLE = "TORCH_DIST_USE_NCCL2"
BEHAVIOURS = {
    "legacy": {BEHAVIOUR_VARIABLE: "0"},
    "rewritten": {BEHAVIOUR_VARIABLE: None},
    "lazy": {BEHAVIOUR_VARIABLE: None, BACKEND_VARIABLE: "nccl-lazy"},
}


# What `nccl-migrate ab --help` says a SPEC is: its paragraphs are wrapped, its indented lines kept
# (each under 80 columns).
SPEC_HELP = f"""\
SPEC, one side: items joined by commas, applied left to right (later ones win):

  {'|'.join(BEHAVIOURS)}[:{'|:'.join(IMPLEMENTATIONS)}]
      a behaviour, as an unmodified job gets it (backend "nccl", and torch
      2.15's TORCH_DIST_USE_NCCL2; lazy also forces nccl-lazy), served by the
      toolkit's backends (:toolkit, the default), torch's own (:torch), or
      torch's where this torch and machine can run it, else the toolkit's (:auto)
  backend=NAME
      the backend init_process_group gets instead of the job's (gloo,
      nccl-legacy, migrate-nccl2, ...); torch's NCCL names run torch's own
  KEY=VALUE
      any environment variable of the job (KEY= sets it empty)

Quote an item that holds a comma, CSV style. Examples:

  --b 'rewritten,NCCL_MIGRATE_EAGER_SUBGROUPS=1'
  --a backend=gloo --b backend=migrate-nccl2
  --a '"backend=cpu:gloo,cuda:nccl"'"""


class SpecError(ValueError):
    pass


@dataclass
class Side:
    label: str
    text: str
    env: dict[str, str | None] = field(default_factory=dict)  # None: unset in the job


def _item(item: str) -> dict[str, str | None]:
    name, _, impl = item.partition(":")
    if name in BEHAVIOURS:
        impl = impl or "toolkit"
        if impl not in IMPLEMENTATIONS:
            raise SpecError(f"{item!r}: unknown implementation {impl!r}; use one of {', '.join(IMPLEMENTATIONS)}")
        return {"NCCL_MIGRATE_ACTIVATE": "1", "NCCL_MIGRATE_IMPL": impl, **BEHAVIOURS[name]}
    key, eq, value = item.partition("=")
    if not eq or not key or not key.replace("_", "").isalnum():
        raise SpecError(f"{item!r} is neither a behaviour ({', '.join(BEHAVIOURS)}), backend=NAME nor KEY=VALUE")
    if key == "backend":
        if not value:
            raise SpecError("backend= needs a name, for example backend=gloo or backend=migrate-nccl2")
        env = {"NCCL_MIGRATE_ACTIVATE": "1", BACKEND_VARIABLE: value}
        if value.lower() in TORCH_NCCL_NAMES:
            env["NCCL_MIGRATE_IMPL"] = "torch"  # a concrete backend: torch's own, never re-routed
        return env
    return {key: value}


def parse(label: str, text: str) -> Side:
    """The side ``label`` ("a" or "b") described by ``text``; SpecError says what is wrong."""
    items = [i.strip() for i in next(csv.reader([text]), [])]
    if not items or any(not i for i in items):
        raise SpecError(f"--{label} {text!r}: empty item; give a behaviour, backend=NAME or KEY=VALUE, comma-separated")
    side = Side(label, text)
    for item in items:
        try:
            side.env.update(_item(item))
        except SpecError as error:
            raise SpecError(f"--{label}: {error}") from None
    return side


# What a shadow side may set: only what chooses its backend (through the shim, per group), and
# the test switch. Anything else would change the whole process, the primary's ops included.
SHADOW_KEYS = ("NCCL_MIGRATE_ACTIVATE", "NCCL_MIGRATE_IMPL", "TORCH_DIST_USE_NCCL2", BACKEND_VARIABLE)


def shadow_environment(side: Side) -> tuple[dict[str, str | None], str | None]:
    """The shadow side's backend-choosing environment, and its perturbation switch (or None).
    SpecError when the side sets anything that could only apply to the whole process."""
    env = dict(side.env)
    perturb = env.pop(PERTURB_VARIABLE, None)
    others = sorted(k for k in env if k not in SHADOW_KEYS)
    if others:
        raise SpecError(f"--shadow: --{side.label} {side.text!r} sets {', '.join(others)}, which would apply to "
                        "the whole process, not only the shadow groups; give that side a behaviour or backend=NAME "
                        "only, or run without --shadow")
    return env, perturb
