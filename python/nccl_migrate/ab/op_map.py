"""The report's first picture: ranks by op sequence, each cell coloured by what the comparison
found there (identical, within tolerance, a divergence by its class, missing). Gathered while the
comparison streams, in bounded memory: each rank keeps at most COLUMNS cells, two neighbours
merging (the worse one kept) whenever a rank outgrows them; divergent ops are kept by position
until their class is known."""

from __future__ import annotations

COLUMNS = 256
# Worse first wins a merged cell: a backend divergence must never hide behind an identical op.
SEVERITY = {"identical": 0, "within_tolerance": 1, "propagated": 2, "job_nondeterminism": 3, "not_compared": 4,
            "missing_in_a": 5, "missing_in_b": 5, "backend": 6}
LEGEND = (("identical", "#c8e6c9"), ("within_tolerance", "#fff59d"), ("propagated", "#ffcc80"),
          ("job_nondeterminism", "#ce93d8"), ("not_compared", "#90caf9"), ("missing", "#9e9e9e"),
          ("backend", "#d32f2f"))
COLOUR = dict(LEGEND, missing_in_a="#9e9e9e", missing_in_b="#9e9e9e")


class _Row:
    def __init__(self):
        self.cells: list[str] = []
        self.step, self.count = 1, 0  # ops per cell, ops seen

    def add(self, status: str) -> int:
        index = self.count
        self.count += 1
        if index // self.step >= len(self.cells):
            if len(self.cells) == COLUMNS:
                self.cells = [max(pair, key=SEVERITY.__getitem__) for pair in zip(self.cells[::2], self.cells[1::2])]
                self.step *= 2
            if index // self.step >= len(self.cells):
                self.cells.append(status)
                return index
        cell = index // self.step
        self.cells[cell] = max(self.cells[cell], status, key=SEVERITY.__getitem__)
        return index


class OpMap:
    """An observer of the comparison (compare.compare's ``observers``)."""

    def __init__(self):
        self.rows: dict[int, _Row] = {}
        self.divergent: list[tuple[int, int, tuple]] = []  # (rank, op index, key): classed at the end

    def seen(self, label: str, entry: dict) -> None:
        pass

    def paired(self, key, status: str) -> None:
        row = self.rows.setdefault(key[0], _Row())
        index = row.add("identical" if status == "divergent" else status)
        if status == "divergent":
            self.divergent.append((key[0], index, key))

    def grid(self, classified: dict) -> dict[int, list[str]]:
        """Each rank's cells, divergent ops coloured by their class (``classified``: key -> class)."""
        for rank, index, key in self.divergent:
            row = self.rows[rank]
            cell = index // row.step
            row.cells[cell] = max(row.cells[cell], classified.get(key, "backend"), key=SEVERITY.__getitem__)
        self.divergent = []
        return {rank: row.cells for rank, row in sorted(self.rows.items())}

    def steps(self) -> dict[int, int]:
        return {rank: row.step for rank, row in self.rows.items()}

    def counts(self) -> dict[int, int]:
        return {rank: row.count for rank, row in self.rows.items()}
