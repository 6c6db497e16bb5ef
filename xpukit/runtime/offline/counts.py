"""The ISA counts of a kernel, a row or a line: plain data, so the host reads a stored report's counts
without the disassembler's dependencies (``isa.py`` makes them; pyelftools is the image's)."""

from __future__ import annotations

import dataclasses

SEND_KINDS = (
    "global_load",
    "global_store",
    "slm_load",
    "slm_store",
    "block2d_load",
    "block2d_store",
    "atomic",
    "scratch_fill",
    "scratch_spill",
    "barrier",
    "fence",
    "eot",
    "other",
)


@dataclasses.dataclass(frozen=True)
class IsaCounts:
    instructions: int  # the work: no labels, no "illegal" tail, no padding (``padding``)
    sends: dict[str, int]  # by kind (SEND_KINDS)
    dpas: int
    math: int
    moves: int
    control_flow: int
    barriers: int  # barrier waits (sync.bar / wait)
    fma: int = 0  # mad/mac/madm/dp4a
    alu: int = 0  # other arithmetic and logic (ALU)
    scratch_fill_bytes: int = 0  # bytes per thread the scratch reads move (register fills)
    scratch_spill_bytes: int = 0  # bytes per thread the scratch writes move (register spills)
    padding: int = 0  # ``mov`` to null, sync.nop/allrd/allwr and nop: scheduling, not work

    @property
    def send_total(self) -> int:
        return sum(self.sends.values())

    def shape_problem(self) -> str | None:
        """A count for each send kind and no other (the formats read each kind; the total sums them)."""
        if set(self.sends) != set(SEND_KINDS):
            return f"sends has kinds {sorted(self.sends)}, not {list(SEND_KINDS)}"
        return None

    def to_dict(self) -> dict[str, object]:
        return {**dataclasses.asdict(self), "send_total": self.send_total}
