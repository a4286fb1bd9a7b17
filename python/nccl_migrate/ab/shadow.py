"""Inside the job, for `nccl-migrate ab --shadow`: every group the job creates gets a shadow group
over the same ranks with the other side's backend, and every op the job issues from Python runs
again on the shadow group, on clones of its arguments. The job only ever sees the primary's
outputs; the shadow's are compared with them per op and rank while both are in memory.

NCCL_MIGRATE_AB_SHADOW holds the shadow side's environment (JSON, null for an unset variable):
the shadow backend is what init_process_group's backend resolves to under it, through the shim."""

from __future__ import annotations

import json
import os
import time

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import BACKEND_VARIABLE
from .compare import errors_between
from .digest import digest_of
from .op_table import OpSpec
from .perturb import Perturbation


class ShadowError(RuntimeError):
    pass


def shadow_backend(requested: str | None, shadow_env: dict[str, str | None]) -> str:
    """The concrete backend the shadow side's environment gives init_process_group's argument."""
    from .. import shim

    environ = dict(os.environ)
    for key, value in shadow_env.items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    name = shadow_env.get(BACKEND_VARIABLE) or requested or "nccl"
    resolved = shim.resolve(name, environ)
    if resolved.get("error") or not resolved.get("backend"):
        raise ShadowError(f"nccl-migrate ab --shadow: the shadow side cannot run here: backend {name!r} "
                          f"resolves to nothing: {resolved.get('error') or resolved.get('reason')}")
    return resolved["backend"]


def _clone(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    return value


class ShadowOp:
    """One op's shadow: its cloned arguments (taken before the primary may overwrite its inputs),
    issued after the primary, judged against the primary's outputs."""

    def __init__(self, fn, spec: OpSpec, arguments: dict, shadow_group, perturb: bool):
        self.fn, self.name, self.perturb = fn, spec.name, perturb
        self.arguments = {k: _clone(v) for k, v in arguments.items()}
        if spec.name == "batch_isend_irecv":
            self.arguments["p2p_op_list"] = [dist.P2POp(op.op, op.tensor.detach().clone(), peer=op.peer,
                                                        group=shadow_group, tag=op.tag)
                                             for op in arguments["p2p_op_list"]]
        else:
            self.arguments["group"] = shadow_group
        self.view = spec.view(self.arguments)
        self.result, self.ms, self.error = None, None, None

    def issue(self) -> None:
        start = time.perf_counter()
        try:
            self.result = self.fn(**self.arguments)
        except Exception as error:  # noqa: BLE001 - the shadow's failure is a finding, not the job's
            self.error = f"{type(error).__name__}: {error}"
        self.start = start
        self.ms = (time.perf_counter() - start) * 1e3

    def judge(self, outputs: list[torch.Tensor], out_digest: str | None) -> dict:
        """The shadow's record: its output digest and latency and, when its outputs differ from the
        primary's, the errors measured on the whole tensors."""
        if self.error is None and self.result is not None:
            works = self.result if isinstance(self.result, list) else [self.result]
            try:
                for work in works:
                    if hasattr(work, "wait"):  # a sync op returns None, recv its peer's rank
                        work.wait()
            except Exception as error:  # noqa: BLE001
                self.error = f"{type(error).__name__}: {error}"
            self.ms = (time.perf_counter() - self.start) * 1e3
        if self.error is not None:
            return {"error": self.error, "ms": self.ms, "out": None}
        if self.perturb:
            Perturbation.apply(self.view.outputs)
        record = {"ms": self.ms, "out": digest_of(self.view.outputs)}
        if record["out"] != out_digest:
            abs_err, rel_err, needed = errors_between(outputs, self.view.outputs)
            record["measured"] = {"max_abs_error": abs_err, "max_rel_error": rel_err, "needed": needed}
        return record


class Shadow:
    def __init__(self, shadow_env: dict[str, str | None], perturb: Perturbation | None):
        self.env, self.perturb = shadow_env, perturb
        self.backend: str | None = None
        self.groups: dict[int, object] = {}

    @classmethod
    def from_environment(cls, text: str, perturb: str | None) -> Shadow:
        try:
            env = json.loads(text)
        except ValueError:
            raise ValueError(f"NCCL_MIGRATE_AB_SHADOW={text!r} is not valid; it holds the shadow side's "
                             "environment as JSON (nccl-migrate ab --shadow sets it)") from None
        return cls(env, Perturbation(perturb) if perturb else None)

    def world_created(self, requested: str | None) -> None:
        """After init_process_group: the shadow of the world group, with the shadow backend."""
        self.backend = shadow_backend(requested, self.env)
        self.groups[id(c10d._get_default_group())] = c10d.new_group(backend=self.backend)

    def group_created(self, group, arguments: dict) -> None:
        """After new_group, on every rank that called it: the same call with the shadow backend."""
        if self.backend is None:
            return
        kwargs = {k: v for k, v in arguments.items() if k in ("ranks", "timeout", "use_local_synchronization",
                                                              "group_desc", "device_id", "sort_ranks")}
        shadow = c10d.new_group(backend=self.backend, **kwargs)
        if group is not None and group != c10d.GroupMember.NON_GROUP_MEMBER:
            self.groups[id(group)] = shadow

    def prepare(self, fn, spec: OpSpec, arguments: dict, group, rank: int, group_name: str, seq: int):
        """The op's shadow, or a reason it has none."""
        shadow_group = self.groups.get(id(group))
        if shadow_group is None:
            return None, "its group has no shadow (created before the recorder, or not through new_group)"
        perturb = bool(self.perturb and self.perturb.applies(rank, group_name, seq))
        return ShadowOp(fn, spec, arguments, shadow_group, perturb), None

    def prepare_hooked(self, spec: OpSpec, tensors: list, outputs: list, root: int | None, group, rank: int,
                       group_name: str, seq: int, reduce_op=None):
        """The shadow of an op issued from C++ (seen by a pre-hook: its tensors; its reduce op only
        when torch's dispatcher told it, ``reduce_op``), or a reason it has none."""
        if spec.replay is None:
            return None, f"an op issued from C++ that the shadow cannot replay ({spec.name})"
        if spec.reduces and reduce_op is None:
            return None, (f"an op issued from C++ whose reduce op is not known ({spec.name}): torch's hooks do not "
                          "carry it and its dispatcher call was not seen (tensors created in inference mode?)")
        arguments = spec.replay(tensors, outputs, root, group, reduce_op)
        if arguments is None:
            return None, f"an op issued from C++ with a tensor layout the shadow cannot replay ({spec.name})"
        return self.prepare(_originals[spec.functions[0]], spec, arguments, group, rank, group_name, seq)


# torch.distributed's own functions, as they were before the recorder wrapped them.
_originals: dict = {}
