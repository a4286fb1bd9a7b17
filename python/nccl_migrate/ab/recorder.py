"""Inside the job: records every collective and p2p op on every group, per rank, as one JSON line
(group, sequence number in it, op, dtype, shapes, reduce op, digests of input and output,
timing). Two sources, one numbering: wrappers around torch.distributed's Python functions
(wrappers.py; they know the reduce op and the call as the job wrote it) and ProcessGroup pre/post
hooks (here), which fire from the dispatcher for every op and so also see ops issued from C++
(DDP's reducer); a hook that fires inside a wrapped call is that call's own op and is skipped. A
collective issued from C++ is waited on in its post-hook, before its issuer sees it (the one
point where its output is known final and not yet reused), so recording makes such ops
synchronous. Installed at ``import torch`` when NCCL_MIGRATE_AB_RECORD names a directory
(nccl_migrate_autoload), or by ``install(directory)``."""

from __future__ import annotations

import atexit
import functools
import json
import multiprocessing
import multiprocessing.util
import os
import resource
import signal
import socket
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from ..record_files import (
    attempt_directory,
    claim,
    mark_second_writer,
    save_whole,
    second_writer_message,
    write_whole,
)
from . import (
    KEEP_VARIABLE,
    PERTURB_VARIABLE,
    RECORD_VARIABLE,
    SHADOW_PERTURB_VARIABLE,
    SHADOW_VARIABLE,
    active,
    dispatcher_calls,
    termination,
)
from .digest import digest_soon, has_spare_core, later, on_host, overlaps, resolved
from .issued_op import IssuedOp, RecordedWork
from .op_table import (
    BY_HOOK_NAME,
    BY_NAME,
    OBJECT_COLLECTIVES,
    OpSpec,
    OpView,
    channel,
    reduce_op_name,
    wrapped_functions,
)
from .perturb import Perturbation
from .recorder_threads import MemorySampler, RecordWriter
from .wrappers import (
    patch,
    wrap_init_process_group,
    wrap_new_group,
    wrap_object_collective,
    wrap_op,
)

LATER_BYTES = 1 << 20  # below this, handing a digest to the worker costs more than computing it
ENDED_DIGEST_PATIENCE = 1.0  # seconds a rank ended by a signal waits for GPU digests still computing
ENDED_WRITER_TIMEOUT = 3.0  # seconds it waits for its record writer to finish
MEMORY_STOP_TIMEOUT = 2.0  # seconds close() waits for a memory sample under way (one reads /proc, never blocks long)
HOOK_ID = 0x6162  # our pre/post hooks' id on every group ("ab")


class Recorder:
    def __init__(self, directory: str, keep_bytes: int = 0, perturb: Perturbation | None = None, shadow=None):
        self.directory, self.keep_bytes, self.perturb, self.shadow = directory, keep_bytes, perturb, shadow
        # The process's global rank in its process group, once it joins one: never the
        # environment's RANK, which a job that starts its own ranks (mp.spawn) shares among them.
        self.rank: int | None = None
        self.started = time.monotonic()
        self.meta: dict = {"rank": None, "pid": os.getpid(), "host": socket.gethostname(), "world_size": None,
                           "started_at": time.time(),
                           "init_seconds": None, "backend": None, "backend_class": None, "groups": {},
                           "shadow_backend": None}
        self.lock = threading.Lock()  # sequence numbers and the record file: hooks may fire on other threads
        self.sequence: dict[str, int] = {}
        self.group_names: dict[int, str] = {}
        self.watched: set[int] = set()
        self.pending: list[IssuedOp] = []
        self.hooked: dict[tuple[int, int], IssuedOp] = {}  # issued from C++, not yet complete
        # Every op begun and not yet recorded, by id(entry): what a rank ended by a signal was
        # inside. Changed and read without the lock: one dict operation is atomic under the GIL.
        self.in_flight: dict[int, dict] = {}
        self.count = 0
        self.dropped = 0  # records that never reached a file (see write_failure)
        self.closed = False
        self.close_done = threading.Event()  # the exit's records and meta are written
        self.second_writer = False  # another process holds this rank's records: this one writes nothing
        self.write_failure: str | None = None  # a rank file could not be written: the records are incomplete
        self.unwritable = False  # this rank's record file could not be created: its records are dropped
        self.memory = MemorySampler(self.started)
        self.out = None  # opened at the first op: launchers (torchrun, nccl-migrate run) import
        # torch too, and must not overwrite their ranks' records.

    # -- groups --------------------------------------------------------------------------------
    def group_name(self, group) -> str:
        key = id(group)
        if key not in self.group_names:
            name = str(getattr(group, "group_name", key))
            self.group_names[key] = name
            self.meta["groups"][name] = dist.get_process_group_ranks(group)
            self.watch(group)
        return self.group_names[key]

    def watch(self, group) -> None:
        """Hooks on ``group``, so ops issued on it from C++ are recorded too."""
        if group is None or group == c10d.GroupMember.NON_GROUP_MEMBER or id(group) in self.watched:
            return
        self.watched.add(id(group))
        try:
            group.register_pre_hook(HOOK_ID, functools.partial(self._pre_hook, group))
            group.register_post_hook(HOOK_ID, functools.partial(self._post_hook, group))
        except (RuntimeError, AttributeError):  # a group type without hooks: its Python calls are still seen
            return

    # -- one op --------------------------------------------------------------------------------
    def begin(self, spec: OpSpec, view: OpView, via: str | None = None) -> IssuedOp:
        if self.rank is None:  # joined a group without init_process_group's wrapper (installed later)
            self.joined(dist.get_rank())
        name = self.group_name(view.group)
        group = channel(spec, name, self.rank, view.peer)
        with self.lock:
            seq = self.sequence.get(group, 0)
            self.sequence[group] = seq + 1
            messages = [self._number_message(kind, name, peer) for kind, peer in view.messages]
        tensors = view.inputs + view.outputs
        entry = {"rank": self.rank, "group": group, "seq": seq, "op": spec.name,
                 "dtype": str(tensors[0].dtype).replace("torch.", "") if tensors else None,
                 "in_shapes": [list(t.shape) for t in view.inputs],
                 "out_shapes": [list(t.shape) for t in view.outputs],
                 "reduce_op": view.reduce_op, "peer": view.peer, "t": time.time(), "in": None}
        if messages:
            entry["messages"] = messages
        if via:
            entry["via"] = via
        if active.object_collective.name:
            entry["object_collective"] = active.object_collective.name
        self.in_flight[id(entry)] = entry
        in_future = None
        if view.inputs:
            if (via is None and not spec.writes_input and sum(t.nbytes for t in view.inputs) >= LATER_BYTES
                    and on_host(view.inputs) and has_spare_core() and not overlaps(view.inputs, view.outputs)):
                in_future = later(view.inputs)  # read while the op runs; nobody writes it before it ends
            else:
                entry["in"] = digest_soon(view.inputs)
        kept = None
        if self.keep_bytes and sum(t.numel() * t.element_size() for t in tensors) <= self.keep_bytes:
            kept = [t.detach().cpu().clone() for t in view.inputs]  # in-place ops overwrite them
        return IssuedOp(entry, view, kept, in_future)

    def _number_message(self, kind: str, group: str, peer: int) -> list:
        """[kind, channel, seq] of one message of a batch, numbered in its direction's count, which
        its sends and recvs share with the lone ones (the lock is held)."""
        direction = channel(BY_NAME[kind], group, self.rank, peer)
        seq = self.sequence.get(direction, 0)
        self.sequence[direction] = seq + 1
        return [kind, direction, seq]

    def finish(self, op: IssuedOp, error: str | None = None) -> None:
        entry, view = op.entry, op.view
        entry["ms"] = (time.perf_counter() - op.start) * 1e3
        if op.in_future is not None:
            entry["in"] = op.in_future.result()
        if error is None and self.perturb and self.perturb.applies(self.rank, entry["group"], entry["seq"]):
            entry["perturbed"] = Perturbation.apply(view.outputs)
        entry["out"] = digest_soon(view.outputs) if error is None else None
        if error is not None:
            entry["error"] = error
        if op.shadow is not None and error is None:
            entry["out"] = resolved(entry["out"])  # judged now, live
            entry["shadow"] = op.shadow.judge(view.outputs, entry["out"])
        if op.kept is not None and error is None and not self.second_writer:  # its files are the first writer's
            group = "".join(c if c.isalnum() else "_" for c in entry["group"])  # a p2p channel: "0/p2p 1>2"
            name = f"r{self.rank}-g{group}-s{entry['seq']}.pt"
            os.makedirs(os.path.join(self.directory, "tensors"), exist_ok=True)
            kept = {"in": op.kept, "out": [t.detach().cpu().clone() for t in view.outputs]}
            try:
                save_whole(os.path.join(self.directory, "tensors", name), functools.partial(torch.save, kept))
                entry["kept"] = name
            except OSError as failure:  # the job goes on; its op is compared by digest alone
                self._failed(f"writing the kept tensors tensors/{name} failed", failure)
        self.write(entry)

    def _failed(self, what: str, error: OSError) -> None:
        """A file of this rank's records could not be written: the first such failure is named in
        the meta (the comparison reports the rank's records incomplete), the job goes on."""
        if self.write_failure is None:
            self.write_failure = f"{what}: {error.strerror or error}"
            print(f"nccl-migrate ab: rank {self.rank}: {self.write_failure}; the comparison will report this rank's "
                  "records incomplete", file=sys.stderr, flush=True)

    def write(self, entry: dict) -> None:
        self.in_flight.pop(id(entry), None)
        with self.lock:
            if self.second_writer:
                return
            if self.out is None and not self._open_records():
                return
            self.count += 1
            self.out.put(entry)

    def _open_records(self) -> bool:
        """Claims this rank's record file; False (and a marker the comparison reports) when
        another process recorded the same rank first."""
        path = os.path.join(self.directory, f"rank{self.rank}.jsonl")
        if self.unwritable:  # tried once already
            self.dropped += 1
            return False
        try:
            os.makedirs(self.directory, exist_ok=True)
            fd = claim(path)
        except OSError as error:  # the directory gone, read-only, or the disk full: the job goes on
            self.unwritable = True
            self._failed(f"creating {path} failed", error)
            self.dropped += 1
            return False
        if fd is None:
            self.second_writer = True
            mark_second_writer(path, self.rank)
            print(f"nccl-migrate ab: {second_writer_message(self.rank, path)}", file=sys.stderr)
            return False
        self.out = RecordWriter(fd, path)
        self.memory.start()
        return True

    def defer(self, op: IssuedOp, result):
        works = result if isinstance(result, list) else [result]
        op.works = [w for w in works if w is not None]
        with self.lock:
            self.pending.append(op)
        wrapped = [RecordedWork(w, op, self) if w is not None else None for w in works]
        return wrapped if isinstance(result, list) else wrapped[0]

    def waited(self, op: IssuedOp) -> None:
        with self.lock:
            op.waited += 1
            mine = op in self.pending and (op.waited >= len(op.works) or op.complete())
            if mine:
                self.pending.remove(op)
        if mine:
            self.finish(op)

    def observed(self, op: IssuedOp, work) -> None:
        """The job saw ``work`` of ``op`` complete: record the op now if all its works are, before
        the job can change its tensors."""
        with self.lock:
            op.seen_done.add(id(work))
            mine = op in self.pending and op.complete()
            if mine:
                self.pending.remove(op)
        if mine:
            self.finish(op)

    def settle(self) -> None:
        """Completes the records of async ops that finished without being waited on."""
        if not self.pending:
            return
        with self.lock:
            done = [p for p in self.pending if p.complete()]
            for op in done:
                self.pending.remove(op)
        for op in done:
            self.finish(op)

    @staticmethod
    def capturing() -> bool:
        """Whether the current CUDA stream is capturing a graph: an op issued now runs only at
        replay, which no wrapper or hook sees, so it is counted (by its pre-hook, which every op
        fires), not recorded, on both sides alike, which keeps their sequence numbers aligned."""
        return torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()

    # -- ops issued from C++ (hooks) -----------------------------------------------------------
    def _pre_hook(self, group, args) -> None:
        if active.recorder is not self or active.inside.active:
            dispatcher_calls.forget()  # its dispatcher call is not a later op's
            return  # the wrapped Python call records this op itself
        if self.capturing():
            with self.lock:
                self.meta["captured_ops_not_recorded"] = self.meta.get("captured_ops_not_recorded", 0) + 1
            return
        spec = BY_HOOK_NAME.get(args.name.name, BY_NAME["unknown"])
        name = spec.name
        inputs, outputs = list(args.input_tensors), list(args.output_tensors)
        my_rank = dist.get_rank(group)
        root = args.root if args.root >= 0 else None
        peer = dist.get_global_rank(group, root) if root is not None else None
        if spec.in_place and not outputs:
            outputs = inputs if name != "reduce" or root == my_rank else []
        if name == "broadcast" and root != my_rank:
            inputs = []  # a receiver contributes nothing, whatever its buffer held
        reduce_op = dispatcher_calls.reduce_op_of(spec.dispatcher, list(args.input_tensors)) if spec.reduces else None
        view = OpView(group, inputs, outputs, reduce_op_name(reduce_op), peer)
        op = self.begin(spec, view, via="hook")
        if self.shadow is not None:  # cloned now: the op may overwrite its tensors
            op.shadow, why = self.shadow.prepare_hooked(spec, list(args.input_tensors), outputs, root, group,
                                                        self.rank, op.entry["group"], op.entry["seq"], reduce_op)
            if why:
                op.entry["shadow"] = {"skipped": why}
        with self.lock:
            self.hooked[(id(group), args.op_id)] = op

    def _post_hook(self, group, args) -> None:
        with self.lock:
            op = self.hooked.pop((id(group), args.op_id), None)
        if op is None:
            return
        work = args.work
        if work is not None and op.entry["op"] in ("send", "recv"):
            # Waiting here could deadlock a pair that each post a send before their recv, and the
            # issuer's wait cannot be seen: the received bytes are never read.
            op.entry["out_unobservable"] = True
            op.view.outputs = []
            work = None
        error = None
        if work is not None:
            # The issuer gets the work only when this hook returns, so the output is read before
            # anything can change it. A future callback would not do: waiters on a future wake
            # before its callbacks run, and DDP's reducer reuses its bucket at once.
            try:
                work.wait()
            except Exception as failure:  # noqa: BLE001 - the issuer's own wait raises it again
                error = f"{type(failure).__name__}: {failure}"
        if op.shadow is not None and error is None:
            with active.inside:  # the shadow's op is not the job's
                op.shadow.issue()
        self.finish(op, error=error)

    # -- the process ---------------------------------------------------------------------------
    def joined(self, rank: int) -> None:
        self.rank = rank
        self.meta.update(rank=rank, world_size=dist.get_world_size())
        # A rank its launcher ends with SIGTERM writes its records and meta first (Python runs no
        # exit handler then); a process that never joins a group (a launcher) is left alone.
        termination.install(self)

    def initialised(self, seconds: float) -> None:
        self.joined(dist.get_rank())
        self.meta.update(init_seconds=seconds, backend=str(dist.get_backend()))
        for device in ("cpu", "cuda"):
            try:
                backend = dist.group.WORLD._get_backend(torch.device(device))
            except Exception:  # noqa: BLE001, S112 - the group may serve one device only
                continue
            self.meta["backend_class"] = f"{type(backend).__name__} ({backend.name()})"
            break
        self.watch(c10d._get_default_group())

    def exiting(self) -> bool:
        """Whether this process's records are being closed (or are), at exit or by a signal."""
        return self.closed

    def wait_closed(self, seconds: float) -> bool:
        return self.close_done.wait(seconds)

    def close(self) -> None:
        if self.closed or self.meta["pid"] != os.getpid():  # a forked child's copy: the child records anew
            return
        self.closed = True
        try:
            self._close()
        finally:
            self.close_done.set()

    def _close(self) -> None:
        self.settle()
        with self.lock:
            never, self.pending = self.pending, []
        for op in never:  # never waited on and not complete: no output to digest
            op.entry["unfinished"] = True
            op.view.outputs, op.shadow = [], None
            self.finish(op)
        with self.lock:
            hooked, self.hooked = list(self.hooked.values()), {}
        for op in hooked:  # a pre-hook whose op never returned a work
            op.entry["unfinished"] = True
            op.view.outputs = []
            self.finish(op)
        if self.rank is None or self.second_writer:
            return  # this process never joined a group (a launcher, a parent of spawned ranks), or
            # another process holds its rank's records
        self.memory.stop(timeout=MEMORY_STOP_TIMEOUT)
        self.memory.sample()
        with self.lock:
            if self.out is not None:
                self.out.close()
        self._write_meta()

    def end_by_signal(self, signum: int) -> None:
        """The launcher ends this rank (termination.py): the records already finished reach the
        file, and the meta names the signal and the ops begun but never finished (the rank was
        inside them: they are not records, which would compare as failed ops). Bounded: a GPU
        digest still computing is waited for briefly, a writer stuck on its disk not at all long.
        Runs on any thread, maybe the main thread interrupted anywhere: takes no lock it cannot
        do without."""
        if self.closed or self.meta["pid"] != os.getpid():
            return
        self.closed = True
        try:
            inside = sorted(self.in_flight.values(), key=lambda e: e["t"])
            self.meta["ended_by"] = {"signal": signal.Signals(signum).name,
                                     "inside": [{"group": e["group"], "seq": e["seq"], "op": e["op"]} for e in inside]}
            if self.rank is None or self.second_writer:
                return
            self.memory.stopped.set()
            self.memory.sample(device=False)
            out = self.out
            if out is not None:
                self.meta["ended_by"]["records_flushed"] = out.close(patience=ENDED_DIGEST_PATIENCE,
                                                                     timeout=ENDED_WRITER_TIMEOUT)
            self._write_meta()
        finally:
            self.close_done.set()

    def _write_meta(self) -> None:
        self.meta.update(ops=self.count, wall_seconds=time.monotonic() - self.started,
                         peak_rss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                         memory=self.memory.samples)
        if self.shadow is not None:
            self.meta["shadow_backend"] = self.shadow.backend
        failure = (self.out.failure if self.out is not None else None) or self.write_failure
        if failure:
            written = self.out.written if self.out is not None else 0
            self.meta["incomplete"] = {"error": failure, "records_written": written,
                                       "records_dropped": self.dropped + (self.out.dropped if self.out else 0)}
        path = os.path.join(self.directory, f"rank{self.rank}.meta.json")
        try:
            os.makedirs(self.directory, exist_ok=True)
            if not write_whole(path, json.dumps(self.meta, indent=1), exclusive=True):
                mark_second_writer(path, self.rank)
        except OSError as error:  # exit handlers must not fail the job: say what is lost instead
            print(f"nccl-migrate ab: rank {self.rank}: writing {path} failed: {error.strerror or error}; the "
                  "comparison will find this rank's process facts missing", file=sys.stderr, flush=True)


def install(directory: str, keep_bytes: int = 0, perturb: Perturbation | None = None, shadow=None) -> Recorder:
    """Starts recording this process's ops into ``directory``; a second call returns the first
    recorder."""
    if active.recorder is not None:
        return active.recorder
    rec = active.recorder = Recorder(directory, keep_bytes, perturb, shadow)
    if shadow is not None:
        from .shadow import _originals

        _originals.update((function, getattr(c10d, function)) for function in wrapped_functions(c10d))
    for function in wrapped_functions(c10d):
        patch(function, wrap_op(function, getattr(c10d, function)))
    if shadow is not None:  # only a shadow replays ops issued from C++: it needs their reduce op
        dispatcher_calls.install()
    for function in OBJECT_COLLECTIVES:
        if hasattr(c10d, function):
            patch(function, wrap_object_collective(getattr(c10d, function)))
    patch("init_process_group", wrap_init_process_group(c10d.init_process_group))
    patch("new_group", wrap_new_group(c10d.new_group))
    _close_at_exit(rec)
    os.register_at_fork(after_in_child=_record_anew_in_forked_child)
    multiprocessing.util.register_after_fork(_record_anew_in_forked_child, _close_at_multiprocessing_exit)
    return rec


def _close_at_exit(rec: Recorder) -> None:
    atexit.register(rec.close)
    if multiprocessing.parent_process() is not None:
        _close_at_multiprocessing_exit()


def _close_at_multiprocessing_exit(_=None) -> None:
    """multiprocessing's children (start methods fork and forkserver) end with os._exit, which runs
    no atexit handler; multiprocessing's own finalizers do run. Registered again in each forked
    child, after multiprocessing has cleared the ones it inherited."""
    multiprocessing.util.Finalize(None, active.recorder.close, exitpriority=0)


def _record_anew_in_forked_child() -> None:
    """A process forked without exec (mp.spawn or multiprocessing with start method fork, os.fork)
    is a process of its own, with its own rank: it records afresh. Its copy of the parent's
    recorder holds the parent's rank, sequence numbers and file, and threads that do not run here."""
    parent = active.recorder
    if parent is None:
        return
    rec = active.recorder = Recorder(parent.directory, parent.keep_bytes, parent.perturb, parent.shadow)
    atexit.register(rec.close)


def install_from_environment() -> Recorder | None:
    """The recorder asked for by NCCL_MIGRATE_AB_RECORD (and its companion variables), if any."""
    directory = os.environ.get(RECORD_VARIABLE)
    if not directory:
        return None
    keep = os.environ.get(KEEP_VARIABLE, "0")
    if not keep.isdigit():
        raise ValueError(f"{KEEP_VARIABLE}={keep!r} is not valid; give a number of bytes (0 keeps no tensors)")
    perturb = os.environ.get(PERTURB_VARIABLE)
    shadow = None
    if os.environ.get(SHADOW_VARIABLE):
        from .shadow import Shadow

        shadow = Shadow.from_environment(os.environ[SHADOW_VARIABLE], os.environ.get(SHADOW_PERTURB_VARIABLE))
    return install(attempt_directory(directory), int(keep), Perturbation(perturb) if perturb else None, shadow)
