"""The facts of the ops that differ, kept on disk (a private SQLite database in the temporary
directory, removed when closed) so the comparison's memory stays bounded by its window however many
ops diverge; classified together once every rank has been read, because an op's class depends on
other ranks' inputs to it. Memory holds one row per rank (its first difference) and a bounded
buffer of rows on their way to disk; the disk holds a few hundred bytes per divergent op."""

from __future__ import annotations

import json
import math
import sqlite3

from .sides import Key

# The job's other path first: of all classes, the one whose cause is named outright (both calls).
CLASSES = ("backend_dependent_path", "backend", "propagated", "job_nondeterminism", "not_compared")
CAUSES = {"backend_dependent_path": "a different call on each side: the job took another path under the other "
                                    "behaviour (a branch on the backend's type or name, such as isinstance(pg, "
                                    "ProcessGroupNCCL) or pg.name())",
          "backend": "only outputs differ (the backends computed differently)",
          "propagated": "inputs already differed (an earlier op diverged)",
          "job_nondeterminism": "inputs already differed (the job's own inputs differ between runs, with no "
                                "divergence before)",
          "not_compared": "values not compared (device digests on one side, host digests on the other)"}
LISTED = 100  # divergences listed in full, earliest first (by op order, then rank); all are counted
SAMPLED = 10  # per class, the earliest listed in full, so a rare class is never hidden behind a common one
BUFFERED = 1_000  # rows held before they go to disk together
CACHE_KIB = 8 << 10  # SQLite's page cache: the most of the database held in memory

_SCHEMA = """
CREATE TABLE diverged (id INTEGER PRIMARY KEY, rank INTEGER, grp TEXT, seq INTEGER, t REAL, position INTEGER,
                       collective TEXT, not_compared INTEGER, description TEXT, class TEXT);
CREATE TABLE received (id INTEGER, grp TEXT, seq INTEGER);
CREATE TABLE differed (grp TEXT, seq INTEGER, rank INTEGER, t REAL, path INTEGER);
CREATE TABLE first (rank INTEGER PRIMARY KEY, t REAL);
"""

# Per (group, seq) whose inputs differed on some rank: whether one such rank had differed before
# (propagated), or else whether some rank issued a different call there (the job took another path),
# or neither (the job's own nondeterminism).
_JUDGE_INPUTS = """
CREATE INDEX differed_key ON differed (grp, seq);
CREATE TABLE judged AS
    SELECT d.grp AS grp, d.seq AS seq, MAX(COALESCE(f.t < d.t, 0)) AS propagated, MAX(d.path) AS path
    FROM differed d LEFT JOIN first f ON f.rank = d.rank GROUP BY d.grp, d.seq;
CREATE UNIQUE INDEX judged_key ON judged (grp, seq);
CREATE INDEX received_id ON received (id);
"""

# A divergent op's inputs: its own (group, seq), and for a batch of sends and recvs the messages it
# received (each the sender's (channel, seq)).
_CLASSIFY = """
UPDATE diverged SET class = CASE WHEN not_compared THEN 'not_compared' ELSE (
    SELECT CASE WHEN COUNT(j.grp) = 0 THEN 'backend' WHEN MAX(j.propagated) THEN 'propagated'
                WHEN MAX(j.path) THEN 'backend_dependent_path' ELSE 'job_nondeterminism' END
    FROM (SELECT diverged.grp AS grp, diverged.seq AS seq
          UNION ALL SELECT r.grp, r.seq FROM received r WHERE r.id = diverged.id) AS i
    LEFT JOIN judged j ON j.grp = i.grp AND j.seq = i.seq) END;
CREATE INDEX diverged_order ON diverged (position, rank);
CREATE INDEX diverged_class ON diverged (class, position, rank);
"""

# The ranks whose input to one divergent op differed (a batch's senders included).
_INPUT_RANKS = """
SELECT DISTINCT d.rank
FROM (SELECT grp, seq FROM diverged WHERE id = ?1 UNION ALL SELECT grp, seq FROM received WHERE id = ?1) AS i
JOIN differed d ON d.grp = i.grp AND d.seq = i.seq ORDER BY d.rank
"""


class ScratchError(RuntimeError):
    """The database of divergent ops could not be written (the temporary directory full or
    unwritable): names the cause and how to go on."""


def _scratch_error(error: sqlite3.Error) -> ScratchError:
    return ScratchError(f"the comparison's scratch database of divergent ops (in the temporary directory) could not "
                        f"be written ({error}); give TMPDIR a directory with free space (a few hundred bytes per "
                        "divergent op)")


class Divergences:
    """Collects what differed while the comparison streams; ``conclude`` classifies every divergent
    op and hands back the counts, the earliest ones and a sample per class. ScratchError when the
    database cannot be written."""

    def __init__(self):
        self.db = sqlite3.connect("")  # "": a private temporary database on disk, gone when closed
        try:
            self.db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            self.db.execute("PRAGMA journal_mode = OFF")
            self.db.execute("PRAGMA synchronous = OFF")
            self.db.executescript(_SCHEMA)
        except sqlite3.Error as error:
            self.db.close()
            raise _scratch_error(error) from None
        self.first_on_rank: dict[int, float] = {}
        self.rows: dict[str, list[tuple]] = {"diverged": [], "received": [], "differed": []}
        self.next_id = 0

    def close(self) -> None:
        self.db.close()

    def _add(self, table: str, row: tuple) -> None:
        rows = self.rows[table]
        rows.append(row)
        if len(rows) >= BUFFERED:
            self._flush(table)

    def _flush(self, table: str) -> None:
        rows = self.rows[table]
        if rows:
            try:
                self.db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
            except sqlite3.Error as error:
                raise _scratch_error(error) from None
            rows.clear()

    def differed_before(self, rank: int, t: float) -> None:
        """An op of ``rank`` at ``t`` differed (divergent or within tolerance): later inputs of that
        rank that differ may follow from it."""
        self.first_on_rank[rank] = min(t, self.first_on_rank.get(rank, math.inf))

    def input_differed(self, key: Key, t: float, path: bool = False) -> None:
        """``key``'s input differed on its rank at ``t``; ``path``: because its rank issued a
        different call there (the job took another path), not other data."""
        self._add("differed", (key[1], key[2], key[0], t, int(path)))

    def add(self, key: Key, t: float, position: int, description: dict, not_compared: bool,
            received: list[tuple[str, int]] = ()) -> None:
        """A divergent op: ``position`` is its index among its rank's ops in pairing order (the
        op map's column), ``received`` the (channel, seq) of each message it received when it is a
        batch of sends and recvs."""
        self.differed_before(key[0], t)
        self.next_id += 1
        self._add("diverged", (self.next_id, key[0], key[1], key[2], t, position, description.get("object_collective"),
                               int(not_compared), json.dumps(description), None))
        for channel, seq in received:
            self._add("received", (self.next_id, channel, seq))

    def conclude(self) -> Classified:
        for table in self.rows:
            self._flush(table)
        try:
            self.db.executemany("INSERT INTO first VALUES (?, ?)", self.first_on_rank.items())
            self.db.executescript(_JUDGE_INPUTS)
            self.db.executescript(_CLASSIFY)
        except sqlite3.Error as error:
            raise _scratch_error(error) from None
        return Classified(self.db)


class Classified:
    """Every divergent op classified: counts, the earliest LISTED and SAMPLED per class, read from
    disk in order. Earliest is by op order, then rank: an op's position among its rank's ops (the
    op map's column: issue order, the same on every run of the same records), then the lowest rank,
    never by time, which differs from run to run between ranks that diverge at the same op."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(CLASSES, 0)
        counts.update(self.db.execute("SELECT class, COUNT(*) FROM diverged GROUP BY class"))
        return counts

    def object_collectives(self) -> dict[str, int]:
        return dict(self.db.execute("SELECT collective, COUNT(*) FROM diverged WHERE collective IS NOT NULL "
                                    "GROUP BY collective ORDER BY MIN(t)"))

    def _described(self, rows) -> list[dict]:
        described = []
        for op, description, cls in rows.fetchall():  # at most LISTED
            ranks = self.db.execute(_INPUT_RANKS, (op,))
            described.append(dict(json.loads(description), cause=CAUSES[cls],
                                  inputs_differed_on_ranks=[r for (r,) in ranks], **{"class": cls}))
        return described

    def earliest(self) -> list[dict]:
        return self._described(self.db.execute(
            "SELECT id, description, class FROM diverged ORDER BY position, rank LIMIT ?", (LISTED,)))

    def samples(self) -> dict[str, list[dict]]:
        return {cls: self._described(self.db.execute(
            "SELECT id, description, class FROM diverged WHERE class = ? ORDER BY position, rank LIMIT ?",
            (cls, SAMPLED))) for cls in CLASSES}

    def each(self):
        """(key, position, class) of every divergent op, streamed from disk."""
        for rank, grp, seq, position, cls in self.db.execute("SELECT rank, grp, seq, position, class FROM diverged"):
            yield (rank, grp, seq), position, cls
