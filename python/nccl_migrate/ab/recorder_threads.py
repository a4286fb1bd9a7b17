"""The recorder's two background threads: one samples this process's memory for the report's
plot, one writes finished records as JSON lines, so neither costs the op being recorded."""

from __future__ import annotations

import collections
import json
import os
import resource
import threading
import time

import torch

from .digest import PendingDigest, resolved

MEMORY_INTERVAL = 0.1  # seconds between RSS samples
WRITE_INTERVAL = 0.05  # seconds between the record writer's drains
GPU_DIGEST_PATIENCE = 10.0  # seconds the last drain waits for digests a GPU is still computing


class MemorySampler(threading.Thread):
    """This process's RSS (and, with CUDA tensors in use, torch's allocated device memory) every
    MEMORY_INTERVAL seconds, for the report's memory plot. Halves its own resolution past 2000
    samples, so a long job stays small."""

    def __init__(self, started: float):
        super().__init__(name="ab-memory", daemon=True)
        self.started, self.samples, self.interval = started, [], MEMORY_INTERVAL
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.stopped = threading.Event()

    def sample(self) -> None:
        try:
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * self.page
        except OSError:
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        cuda = None
        if torch.cuda.is_initialized():
            cuda = round(torch.cuda.memory_allocated() / 2**20, 2)
        self.samples.append([round(time.monotonic() - self.started, 3), round(rss / 2**20, 2), cuda])
        if len(self.samples) > 2000:
            self.samples, self.interval = self.samples[::2], self.interval * 2

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.sample()


class RecordWriter(threading.Thread):
    """Writes records as JSON lines on its own thread, so serializing them is not on the op's
    path. The thread drains what has piled up every WRITE_INTERVAL seconds instead of waking at
    each record: on a host whose cores the ranks already fill, a wakeup per op is a context
    switch and a GIL handoff on the op's own path. Records keep their order; one whose digests
    a GPU is still computing holds back those after it until the next drain."""

    def __init__(self, path: str):
        super().__init__(name="ab-records", daemon=True)
        self.path, self.pending = path, collections.deque()
        self.stopped = threading.Event()
        self.start()

    def put(self, entry: dict) -> None:
        self.pending.append(entry)  # a deque's append is atomic: no lock on the op's path

    def _drain(self, out, deadline: float | None = None) -> None:
        """Writes the records whose digests are known; with a deadline (the last drain), waits
        for the GPU until then, and past it writes what it has, naming the digests it lacks."""
        wrote = False
        while self.pending:
            entry = self.pending[0]
            waiting = [key for key in ("in", "out") if isinstance(entry.get(key), PendingDigest)
                       and not entry[key].ready()]
            if waiting and deadline is None:
                break
            while waiting and time.monotonic() < deadline:
                time.sleep(0.01)
                waiting = [key for key in waiting if not entry[key].ready()]
            for key in waiting:  # a stream that never got there (a hung or failed GPU op)
                entry[key] = None
                entry.setdefault("digests_unfinished", []).append(key)
            for key in ("in", "out"):
                entry[key] = resolved(entry.get(key))
            out.write(json.dumps(self.pending.popleft()) + "\n")
            wrote = True
        if wrote:
            # On disk at once: a side killed for hanging (SIGTERM runs no exit handlers) keeps
            # every record older than one interval.
            out.flush()

    def run(self) -> None:
        with open(self.path, "w", buffering=1 << 16) as out:
            while not self.stopped.wait(WRITE_INTERVAL):
                self._drain(out)
            self._drain(out, deadline=time.monotonic() + GPU_DIGEST_PATIENCE)

    def close(self) -> None:
        self.stopped.set()
        self.join()
