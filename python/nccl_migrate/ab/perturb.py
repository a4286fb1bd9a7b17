"""A test switch that plants a divergence: NCCL_MIGRATE_AB_PERTURB="rank=R,group=G,seq=S" flips
the lowest bit of the first output byte of one op on one rank, in the job's own tensor, so the
change also flows into everything computed after it. Used to prove a comparison finds it."""

from __future__ import annotations

import torch

_KEYS = ("rank", "group", "seq")


class Perturbation:
    def __init__(self, text: str):
        self.text = text
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        if set(fields) != set(_KEYS) or text.count("=") != len(_KEYS):
            raise ValueError(f"NCCL_MIGRATE_AB_PERTURB={text!r} is not valid; "
                             "write rank=R,group=G,seq=S (for example rank=1,group=0,seq=5)")
        self.rank, self.group, self.seq = int(fields["rank"]), fields["group"], int(fields["seq"])

    def applies(self, rank: int, group: str, seq: int) -> bool:
        return (rank, group, seq) == (self.rank, self.group, self.seq)

    @staticmethod
    def apply(outputs: list[torch.Tensor]) -> bool:
        """Flips one bit of the first non-empty output in place; False when there is none."""
        for t in outputs:
            if t.numel():
                t.view(-1)[:1].view(torch.uint8)[0] ^= 1
                return True
        return False
