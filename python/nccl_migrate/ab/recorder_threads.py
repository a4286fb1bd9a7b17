"""The recorder's two background threads: one samples this process's memory for the report's
plot, one writes finished records as JSON lines, so neither costs the op being recorded."""

from __future__ import annotations

import json
import os
import queue
import resource
import threading
import time

import torch

MEMORY_INTERVAL = 0.1  # seconds between RSS samples


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
    path; the op only hands over its finished record."""

    def __init__(self, path: str):
        super().__init__(name="ab-records", daemon=True)
        self.path, self.queue = path, queue.SimpleQueue()
        self.start()

    def put(self, entry: dict) -> None:
        self.queue.put(entry)

    def run(self) -> None:
        with open(self.path, "w", buffering=1 << 16) as out:
            while True:
                entry = self.queue.get()
                if entry is None:
                    return
                out.write(json.dumps(entry) + "\n")

    def close(self) -> None:
        self.queue.put(None)
        self.join()
