"""The recorder's two background threads: one samples this process's memory for the report's
plot, one writes finished records as JSON lines, so neither costs the op being recorded."""

from __future__ import annotations

import collections
import errno
import json
import os
import resource
import sys
import threading
import time

import torch

from ..record_files import write_line
from .digest import PendingDigest, resolved

MEMORY_INTERVAL = 0.1  # seconds between RSS samples
WRITE_INTERVAL = 0.05  # seconds between the record writer's drains
GPU_DIGEST_PATIENCE = 10.0  # seconds a record waits for digests a GPU is still computing


class MemorySampler(threading.Thread):
    """This process's RSS (and, with CUDA tensors in use, torch's allocated device memory) every
    MEMORY_INTERVAL seconds, for the report's memory plot. Halves its own resolution past 2000
    samples, so a long job stays small."""

    def __init__(self, started: float):
        super().__init__(name="ab-memory", daemon=True)
        self.started, self.samples, self.interval = started, [], MEMORY_INTERVAL
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.stopped = threading.Event()

    def sample(self, device: bool = True) -> None:
        """``device=False``: RSS alone, for a rank being ended (its allocator's lock may be held
        by a thread that will never let go)."""
        try:
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * self.page
        except OSError:
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        cuda = None
        if device and torch.cuda.is_initialized():
            cuda = round(torch.cuda.memory_allocated() / 2**20, 2)
        self.samples.append([round(time.monotonic() - self.started, 3), round(rss / 2**20, 2), cuda])
        if len(self.samples) > 2000:
            self.samples, self.interval = self.samples[::2], self.interval * 2

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.sample()

    def stop(self, timeout: float) -> None:
        """Stops sampling and waits for a sample under way (at most `timeout` s), so that no sample
        lands after the last one the caller takes and writes."""
        self.stopped.set()
        if self.is_alive() and self is not threading.current_thread():
            self.join(timeout)


class RecordWriter(threading.Thread):
    """Writes records as JSON lines on its own thread, so serializing them is not on the op's
    path. The thread drains what has piled up every WRITE_INTERVAL seconds instead of waking at
    each record: on a host whose cores the ranks already fill, a wakeup per op is a context
    switch and a GIL handoff on the op's own path. Records keep their order; one whose digests
    a GPU is still computing holds back those after it, for GPU_DIGEST_PATIENCE seconds at most
    (a stream stuck behind a hung op must not keep the records that explain the hang off disk)."""

    def __init__(self, fd: int, path: str = "the record file"):
        super().__init__(name="ab-records", daemon=True)
        self.fd, self.path, self.pending = fd, path, collections.deque()
        self.stopped = threading.Event()
        # Why writing stopped (disk full, file-size limit, the directory gone), or None: the records
        # after it are counted and dropped, and the rank's meta names its records incomplete.
        self.failure: str | None = None
        self.written = self.dropped = 0
        self.final_patience: float | None = None  # the last drain's, from its start (None: GPU_DIGEST_PATIENCE)
        self.start()

    def put(self, entry: dict) -> None:
        self.pending.append((time.monotonic(), entry))  # a deque's append is atomic: no lock on the op's path

    def _drain(self, final: bool = False) -> None:
        """Writes the records whose digests are known, and those that waited for a GPU past the
        patience (the last drain, at exit, gives each the patience from then), naming the
        digests they lack."""
        patience = self.final_patience if final and self.final_patience is not None else GPU_DIGEST_PATIENCE
        last_wait = time.monotonic() + patience
        while self.pending:
            if self.failure is not None:  # nothing more reaches the file: count what is lost, hold nothing
                self.pending.popleft()
                self.dropped += 1
                continue
            put_at, entry = self.pending[0]
            waiting = _waiting_digests(entry)
            deadline = last_wait if final else put_at + GPU_DIGEST_PATIENCE
            if waiting and not final and time.monotonic() < deadline:
                break
            while waiting and time.monotonic() < deadline:
                time.sleep(0.01)
                waiting = _waiting_digests(entry)
            for key in waiting:  # its stream never got there (a hung op) within the patience
                _lacks(entry, key, None)
            # One write per line, unbuffered: a side killed for hanging (SIGTERM runs no exit
            # handlers) keeps every record written so far, and never half of one.
            line = json.dumps(self.pending.popleft()[1])
            try:
                write_line(self.fd, line)
            except OSError as error:
                self._failed(error)
                self.dropped += 1
                continue
            self.written += 1

    def _failed(self, error: OSError) -> None:
        code = errno.errorcode.get(error.errno, str(error.errno))
        self.failure = f"writing {self.path} failed after {self.written} record(s): {error.strerror or error} ({code})"
        print(f"nccl-migrate ab: {self.failure}; later records are dropped and the comparison will report this "
              "rank's records incomplete", file=sys.stderr, flush=True)

    def run(self) -> None:
        try:
            while not self.stopped.wait(WRITE_INTERVAL):
                self._drain()
            self._drain(final=True)
        finally:
            os.close(self.fd)

    def close(self, patience: float | None = None, timeout: float | None = None) -> bool:
        """Writes what is queued and stops: a record still waiting for a GPU digest waits
        ``patience`` seconds more at most (None: GPU_DIGEST_PATIENCE); gives up waiting for the
        thread after ``timeout`` (None: never). True when every queued record was written or
        counted."""
        self.final_patience = patience
        self.stopped.set()
        self.join(timeout)
        return not self.is_alive()


def _lacks(entry: dict, key: str, error: str | None) -> None:
    entry[key] = None
    entry.setdefault("digests_unfinished", []).append(key)
    if error:
        entry.setdefault("digest_errors", {})[key] = error


def _waiting_digests(entry: dict) -> list[str]:
    """The keys of `entry` whose GPU digest is not computed yet; those that are, or that failed
    (a CUDA error, after a failed op), are settled in place."""
    waiting = []
    for key in ("in", "out"):
        digest = entry.get(key)
        if not isinstance(digest, PendingDigest):
            continue
        try:
            if digest.ready():
                entry[key] = resolved(digest)
            else:
                waiting.append(key)
        except RuntimeError as error:  # CUDA's errors are sticky: the record says so, the writer goes on
            _lacks(entry, key, f"{type(error).__name__}: {str(error).splitlines()[0]}")
    return waiting
