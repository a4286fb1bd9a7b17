"""Says on stderr how far a long comparison got (op pairs, the rank it is on, the rate), at most
once per INTERVAL seconds and only once it has run that long, so a quick compare prints nothing and
a report on stdout (--format json) is never mixed with it."""

from __future__ import annotations

import sys
import time

INTERVAL = 5.0  # seconds between progress lines, and before the first
CHECK_EVERY = 4096  # op pairs between looks at the clock: the comparison's per-op cost stays as it was


class Progress:
    """An observer of the comparison (compare.compare's ``observers``)."""

    def __init__(self, ranks: int, stream=None, clock=time.monotonic):
        self.ranks, self.stream, self.clock = ranks, stream or sys.stderr, clock
        self.pairs, self.rank_index, self.last_rank = 0, 0, None
        self.started = clock()
        self.next_line = self.started + INTERVAL
        self.printed = False

    def seen(self, label: str, entry: dict) -> None:
        pass

    def paired(self, key, status: str) -> None:
        self.pairs += 1
        if key[0] != self.last_rank:
            self.last_rank, self.rank_index = key[0], self.rank_index + 1
        if self.pairs % CHECK_EVERY == 0 and self.clock() >= self.next_line:
            self._line()

    def classified(self, key, position: int, cls: str) -> None:
        pass

    def _line(self) -> None:
        now = self.clock()
        rate = self.pairs / max(now - self.started, 1e-9)
        print(f"nccl-migrate ab: comparing: {self.pairs:,} ops, rank {self.last_rank} "
              f"({self.rank_index} of {self.ranks}), {rate:,.0f} ops/s", file=self.stream, flush=True)
        self.next_line, self.printed = now + INTERVAL, True

    def finished(self) -> None:
        """The last line, when any was printed: a reader of the log sees the comparison end."""
        if self.printed:
            elapsed = self.clock() - self.started
            print(f"nccl-migrate ab: compared {self.pairs:,} ops of {self.ranks} ranks in {elapsed:.1f} s",
                  file=self.stream, flush=True)
