"""Whether a side ran the behaviour its SPEC asked for. A side reaches a behaviour the way an
unmodified job does, through the environment (spec.BEHAVIOURS): a job whose own launch script
exports TORCH_DIST_USE_NCCL2 (the pin `nccl-migrate lint` reports as NM501) overrides it, and both
sides then run one behaviour and compare identical, proving nothing. The jobs' reports say which
behaviour served each group the job made with backend "nccl"."""

from __future__ import annotations

from .spec import BACKEND_VARIABLE, BEHAVIOUR_VARIABLE, BEHAVIOURS, Side


def expected_behaviour(side: Side) -> str | None:
    """The behaviour a group made with backend "nccl" gets on this side, or None where the SPEC
    does not decide it (backend=NAME replaces the job's name; KEY=VALUE items alone leave it): the
    behaviour whose variables (spec.BEHAVIOURS, the one table of them) the side's environment holds."""
    if BACKEND_VARIABLE in side.env or BEHAVIOUR_VARIABLE not in side.env:
        return None
    return next((name for name, env in BEHAVIOURS.items()
                 if BACKEND_VARIABLE not in env and env[BEHAVIOUR_VARIABLE] == side.env[BEHAVIOUR_VARIABLE]), None)


def overridden(side: Side, reports: dict[int, dict]) -> str | None:
    """What to tell the user when the side's "nccl" groups ran another behaviour than its SPEC
    asked for, or None (also when no report says: torch's own backends write none)."""
    expected = expected_behaviour(side)
    ran = sorted({group.get("behaviour") for report in reports.values() for group in report.get("groups", [])
                  if group.get("requested") == "nccl"} - {None})
    if expected is None or not ran or ran == [expected]:
        return None
    return (f"side {side.label} ({side.text}) asked for the {expected} behaviour, but its job's groups made with "
            f"backend \"nccl\" ran {' and '.join(b for b in ran if b != expected)}: the job's own environment "
            f"overrode the side's (an `export {BEHAVIOUR_VARIABLE}=...` in its launch script, which "
            "`nccl-migrate lint` reports as NM501); remove it, or give ab the .py job itself")
