"""Inside the job: wraps torch.distributed's collective and p2p functions so every op on every
group is written, per rank, as one JSON line (group, per-group sequence number, op, dtype,
shapes, reduce op, digests of input and output, timing). Wrapping the Python functions works
for every backend, torch's included. Installed at ``import torch`` when NCCL_MIGRATE_AB_RECORD
names a directory (nccl_migrate_autoload), or by ``install(directory)``."""

from __future__ import annotations

import atexit
import functools
import inspect
import json
import os
import resource
import threading
import time

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import BACKEND_VARIABLE, KEEP_VARIABLE, PERTURB_VARIABLE, RECORD_VARIABLE
from .digest import digest_of
from .ops import VIEWS, OpView
from .perturb import Perturbation

ASYNC_OPS = ("isend", "irecv", "batch_isend_irecv")

_recorder: "Recorder | None" = None
_inside = threading.local()  # torch's own functions call each other (batch_isend_irecv -> isend)


class _Pending:
    """An async op whose output is read when it is waited on, or seen complete at a later op or
    at exit."""

    def __init__(self, entry: dict, view: OpView, works: list, start: float, kept_inputs):
        self.entry, self.view, self.works, self.start, self.kept_inputs = entry, view, works, start, kept_inputs
        self.waited = 0

    def complete(self) -> bool:
        return all(w.is_completed() for w in self.works)


class RecordedWork:
    """Torch's Work, unchanged, except that wait() also completes the op's record."""

    def __init__(self, work, pending: _Pending, recorder: "Recorder"):
        self._work, self._pending, self._recorder = work, pending, recorder

    def wait(self, *args, **kwargs):
        result = self._work.wait(*args, **kwargs)
        self._recorder.waited(self._pending)
        return result

    def __getattr__(self, name):
        return getattr(self._work, name)


class Recorder:
    def __init__(self, directory: str, keep_bytes: int = 0, perturb: Perturbation | None = None):
        self.directory, self.keep_bytes, self.perturb = directory, keep_bytes, perturb
        self.rank = int(os.environ.get("RANK", "0"))
        self.started = time.monotonic()
        self.meta: dict = {"rank": self.rank, "pid": os.getpid(), "world_size": int(os.environ.get("WORLD_SIZE", "1")),
                           "init_seconds": None, "backend": None, "backend_class": None, "groups": {}}
        self.sequence: dict[str, int] = {}
        self.group_names: dict[int, str] = {}
        self.pending: list[_Pending] = []
        self.count = 0
        self.out = None  # opened at the first op: launchers (torchrun, nccl-migrate run) import
        # torch too, and must not overwrite their ranks' records.

    # -- one op --------------------------------------------------------------------------------
    def group_name(self, group) -> str:
        key = id(group)
        if key not in self.group_names:
            name = str(getattr(group, "group_name", key))
            self.group_names[key] = name
            self.meta["groups"][name] = dist.get_process_group_ranks(group)
        return self.group_names[key]

    def begin(self, op: str, view: OpView) -> tuple[dict, list | None]:
        group = self.group_name(view.group)
        seq = self.sequence.get(group, 0)
        self.sequence[group] = seq + 1
        tensors = view.inputs + view.outputs
        entry = {"rank": self.rank, "group": group, "seq": seq, "op": op,
                 "dtype": str(tensors[0].dtype).replace("torch.", "") if tensors else None,
                 "in_shapes": [list(t.shape) for t in view.inputs],
                 "out_shapes": [list(t.shape) for t in view.outputs],
                 "reduce_op": view.reduce_op, "peer": view.peer, "t": time.time(),
                 "in": digest_of(view.inputs)}
        kept = None
        if self.keep_bytes and sum(t.numel() * t.element_size() for t in tensors) <= self.keep_bytes:
            kept = [t.detach().cpu().clone() for t in view.inputs]  # in-place ops overwrite them
        return entry, kept

    def finish(self, entry: dict, view: OpView, start: float, kept_inputs, error: str | None = None) -> None:
        entry["ms"] = (time.perf_counter() - start) * 1e3
        if error is None and self.perturb and self.perturb.applies(self.rank, entry["group"], entry["seq"]):
            entry["perturbed"] = Perturbation.apply(view.outputs)
        entry["out"] = digest_of(view.outputs) if error is None else None
        if error is not None:
            entry["error"] = error
        if kept_inputs is not None and error is None:
            name = f"r{self.rank}-g{entry['group']}-s{entry['seq']}.pt"
            os.makedirs(os.path.join(self.directory, "tensors"), exist_ok=True)
            torch.save({"in": kept_inputs, "out": [t.detach().cpu().clone() for t in view.outputs]},
                       os.path.join(self.directory, "tensors", name))
            entry["kept"] = name
        self.count += 1
        if self.out is None:
            os.makedirs(self.directory, exist_ok=True)
            self.out = open(os.path.join(self.directory, f"rank{self.rank}.jsonl"), "w", buffering=1 << 16)
        self.out.write(json.dumps(entry) + "\n")

    def defer(self, entry, view, result, start, kept_inputs):
        works = result if isinstance(result, list) else [result]
        pending = _Pending(entry, view, [w for w in works if w is not None], start, kept_inputs)
        self.pending.append(pending)
        wrapped = [RecordedWork(w, pending, self) if w is not None else None for w in works]
        return wrapped if isinstance(result, list) else wrapped[0]

    def waited(self, pending: _Pending) -> None:
        pending.waited += 1
        if pending in self.pending and (pending.waited >= len(pending.works) or pending.complete()):
            self.pending.remove(pending)
            self.finish(pending.entry, pending.view, pending.start, pending.kept_inputs)

    def settle(self) -> None:
        """Completes the records of async ops that finished without being waited on."""
        for pending in [p for p in self.pending if p.complete()]:
            self.pending.remove(pending)
            self.finish(pending.entry, pending.view, pending.start, pending.kept_inputs)

    # -- the process ---------------------------------------------------------------------------
    def initialised(self, seconds: float) -> None:
        self.rank = dist.get_rank()
        self.meta.update(init_seconds=seconds, backend=str(dist.get_backend()), world_size=dist.get_world_size(),
                         rank=self.rank)
        for device in ("cpu", "cuda"):
            try:
                backend = dist.group.WORLD._get_backend(torch.device(device))
            except Exception:  # noqa: BLE001 - the group may serve one device only
                continue
            self.meta["backend_class"] = f"{type(backend).__name__} ({backend.name()})"
            break

    def close(self) -> None:
        self.settle()
        for pending in self.pending:  # never waited on and not complete: no output to digest
            pending.entry["unfinished"] = True
            self.finish(pending.entry, OpView(None), pending.start, None)
        self.pending.clear()
        if self.meta["init_seconds"] is None and self.out is None:
            return  # this process ran no distributed job (a launcher)
        if self.out is not None:
            self.out.close()
        os.makedirs(self.directory, exist_ok=True)
        self.meta.update(ops=self.count, wall_seconds=time.monotonic() - self.started,
                         peak_rss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        path = os.path.join(self.directory, f"rank{self.rank}.meta.json")
        with open(path + ".tmp", "w") as f:
            json.dump(self.meta, f, indent=1)
        os.replace(path + ".tmp", path)


def _wrap(name: str, fn):
    signature = inspect.signature(fn)
    asynchronous = name in ASYNC_OPS

    @functools.wraps(fn)
    def recorded(*args, **kwargs):
        rec = _recorder
        if rec is None or getattr(_inside, "active", False) or not dist.is_initialized():
            return fn(*args, **kwargs)
        rec.settle()
        arguments = signature.bind(*args, **kwargs).arguments
        view = VIEWS[name](arguments)
        entry, kept = rec.begin(name, view)
        _inside.active = True
        start = time.perf_counter()
        try:
            result = fn(*args, **kwargs)
        except BaseException as error:
            rec.finish(entry, view, start, kept, error=f"{type(error).__name__}: {error}")
            raise
        finally:
            _inside.active = False
        if result is not None and (asynchronous or arguments.get("async_op")):
            return rec.defer(entry, view, result, start, kept)
        rec.finish(entry, view, start, kept)
        return result

    return recorded


def _wrap_init(fn):
    @functools.wraps(fn)
    def init_process_group(*args, **kwargs):
        forced = os.environ.get(BACKEND_VARIABLE)
        if forced:
            # The job stays unmodified: the side's backend replaces whatever it asked for.
            bound = inspect.signature(fn).bind(*args, **kwargs)
            bound.arguments["backend"] = forced
            args, kwargs = bound.args, bound.kwargs
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        if _recorder is not None:
            _recorder.initialised(time.perf_counter() - start)
        return result

    return init_process_group


def _patch(name: str, replacement) -> None:
    # Jobs call torch.distributed.X; torch's own code calls distributed_c10d.X.
    setattr(dist, name, replacement)
    setattr(c10d, name, replacement)


def install(directory: str, keep_bytes: int = 0, perturb: Perturbation | None = None) -> Recorder:
    """Starts recording this process's ops into ``directory``; a second call returns the first
    recorder."""
    global _recorder
    if _recorder is not None:
        return _recorder
    _recorder = Recorder(directory, keep_bytes, perturb)
    for name in VIEWS:
        _patch(name, _wrap(name, getattr(c10d, name)))
    _patch("init_process_group", _wrap_init(c10d.init_process_group))
    atexit.register(_recorder.close)
    return _recorder


def install_from_environment() -> Recorder | None:
    """The recorder asked for by NCCL_MIGRATE_AB_RECORD (and its companion variables), if any."""
    directory = os.environ.get(RECORD_VARIABLE)
    if not directory:
        return None
    keep = os.environ.get(KEEP_VARIABLE, "0")
    if not keep.isdigit():
        raise ValueError(f"{KEEP_VARIABLE}={keep!r} is not valid; give a number of bytes (0 keeps no tensors)")
    perturb = os.environ.get(PERTURB_VARIABLE)
    return install(directory, int(keep), Perturbation(perturb) if perturb else None)
