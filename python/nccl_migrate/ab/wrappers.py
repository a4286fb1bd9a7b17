"""The recorder's first source: wrappers around torch.distributed's Python functions, which see
each call as the job wrote it (reduce op, root, async_op) and pass straight through while no
recorder is on, inside another wrapped call, or while a CUDA graph is being captured."""

from __future__ import annotations

import functools
import inspect
import os
import time

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import BACKEND_VARIABLE, active
from .op_table import BY_FUNCTION


def _binder(fn):
    """A fast inspect.Signature.bind(...).arguments for calls made the usual way (inspect's own
    bind costs tens of µs per op)."""
    signature = inspect.signature(fn)
    names = [p.name for p in signature.parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = {p.name for p in signature.parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}

    def bind(args, kwargs) -> dict:
        # Too many positionals, a keyword the function does not take by name (unknown, positional-
        # only, or for its **kwargs), or one given by position and keyword both: inspect's bind
        # binds it or raises the TypeError the call itself would.
        if (len(args) > len(names) or any(k not in keywords for k in kwargs)
                or any(name in kwargs for name in names[:len(args)])):
            return signature.bind(*args, **kwargs).arguments  # let torch's own error surface
        arguments = dict(zip(names, args))
        arguments.update(kwargs)
        return arguments

    return bind


def wrap_op(function: str, fn):
    """``fn``, torch.distributed's ``function``, recording each call as its op."""
    bind = _binder(fn)
    spec = BY_FUNCTION[function]

    @functools.wraps(fn)
    def recorded(*args, **kwargs):
        rec = active.recorder
        if rec is None or active.inside.active or not dist.is_initialized() or rec.capturing():
            return fn(*args, **kwargs)
        rec.settle()
        try:
            arguments = bind(args, kwargs)
            view = spec.view(arguments)
        except (TypeError, KeyError, ValueError):
            return fn(*args, **kwargs)  # a call torch itself rejects: its error, not ours
        op = rec.begin(spec, view)
        if rec.shadow is not None:
            op.shadow, why = rec.shadow.prepare(fn, spec, arguments, view.group, rec.rank, op.entry["group"],
                                                op.entry["seq"])
            if why:
                op.entry["shadow"] = {"skipped": why}
        try:
            with active.inside:
                op.start = time.perf_counter()
                result = fn(*args, **kwargs)
                if op.shadow is not None:
                    op.shadow.issue()
        except BaseException as error:
            rec.finish(op, error=f"{type(error).__name__}: {error}")
            raise
        if result is not None and (spec.asynchronous or arguments.get("async_op")):
            return rec.defer(op, result)
        rec.finish(op)
        return result

    return recorded


def wrap_object_collective(fn):
    """``fn``, a torch.distributed object collective (pickled objects sent through tensor ops):
    the ops it issues are recorded as its own, so a comparison names them as such."""

    @functools.wraps(fn)
    def object_collective(*args, **kwargs):
        outer = active.object_collective.name
        active.object_collective.name = outer or fn.__name__
        try:
            return fn(*args, **kwargs)
        finally:
            active.object_collective.name = outer

    return object_collective


def wrap_init_process_group(fn):
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def init_process_group(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        requested = bound.arguments.get("backend")  # what the job asked for, before a side replaces it
        forced = os.environ.get(BACKEND_VARIABLE)
        if forced:
            # The job stays unmodified: the side's backend replaces whatever it asked for.
            bound.arguments["backend"] = forced
            args, kwargs = bound.args, bound.kwargs
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        rec = active.recorder
        if rec is not None:
            rec.initialised(time.perf_counter() - start)
            if rec.shadow is not None:
                with active.inside:  # the shadow's own groups are not the job's
                    rec.shadow.world_created(requested)
        return result

    return init_process_group


def wrap_new_group(fn):
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def new_group(*args, **kwargs):
        group = fn(*args, **kwargs)
        rec = active.recorder
        if rec is None or active.inside.active:
            return group
        rec.watch(group)
        if rec.shadow is not None:
            with active.inside:
                rec.shadow.group_created(group, signature.bind(*args, **kwargs).arguments)
        return group

    return new_group


def patch(name: str, replacement) -> None:
    # Jobs call torch.distributed.X; torch's own code calls distributed_c10d.X.
    setattr(dist, name, replacement)
    setattr(c10d, name, replacement)
