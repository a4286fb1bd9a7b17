"""A side of an A/B comparison made by hand, as `compare` reads one (the interface of
nccl_migrate.ab.sides' SideData): its ranks, each rank's records in the order given, and the
tensors kept for an op, by (rank, seq) (None: not kept)."""


class Records:
    def __init__(self, *entries, kept=None):
        self.entries, self.kept = entries, kept or {}

    def ranks(self):
        return sorted({e["rank"] for e in self.entries})

    def records(self, rank):
        return [e for e in self.entries if e["rank"] == rank]

    def tensors(self, entry):
        return self.kept.get((entry["rank"], entry["seq"]))
