"""The report's first picture: ranks by op sequence, each cell coloured by what the comparison
found there (identical, within tolerance, a divergence by its class, missing). Gathered while the
comparison streams, in bounded memory: each rank keeps at most COLUMNS cells, two neighbours
merging (the worse one kept) whenever a rank outgrows them; a divergent op is coloured by its
class once the comparison knows it (by its position on its rank, nothing held until then)."""

from __future__ import annotations

COLUMNS = 256
# Worse first wins a merged cell: a backend divergence must never hide behind an identical op.
SEVERITY = {"identical": 0, "within_tolerance": 1, "propagated": 2, "job_nondeterminism": 3, "not_compared": 4,
            "missing_in_a": 5, "missing_in_b": 5, "backend_dependent_path": 6, "backend": 7}
LEGEND = (("identical", "#c8e6c9"), ("within_tolerance", "#fff59d"), ("propagated", "#ffcc80"),
          ("job_nondeterminism", "#ce93d8"), ("not_compared", "#90caf9"), ("missing", "#9e9e9e"),
          ("backend_dependent_path", "#283593"), ("backend", "#d32f2f"))
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

    def seen(self, label: str, entry: dict) -> None:
        pass

    def paired(self, key, status: str) -> None:
        # A divergent op's colour waits for its class (``classified``); its cell keeps the others' worst.
        self.rows.setdefault(key[0], _Row()).add("identical" if status == "divergent" else status)

    def classified(self, key, position: int, cls: str) -> None:
        """A divergent op's class, once every rank is read: ``position`` is its index among its
        rank's ops, so its cell is found however often the row has merged since."""
        row = self.rows[key[0]]
        cell = position // row.step
        row.cells[cell] = max(row.cells[cell], cls, key=SEVERITY.__getitem__)

    def grid(self) -> dict[int, list[str]]:
        """Each rank's cells."""
        return {rank: row.cells for rank, row in sorted(self.rows.items())}

    def steps(self) -> dict[int, int]:
        return {rank: row.step for rank, row in self.rows.items()}

    def counts(self) -> dict[int, int]:
        return {rank: row.count for rank, row in self.rows.items()}
