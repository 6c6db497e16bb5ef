"""Register pressure, loops and static stall sources of one kernel, per instruction, in one call.

Why one entry point: the three analyses read the same IGA listing (one ``iga64`` run, ``flow.py``),
and a report wants all three per source line: the live GRF bytes at each instruction and where the
peak is (what to shorten to stop a spill), how deep in loops each instruction runs, and where the
software scoreboard makes it wait.

    flow = analyze_kernel(text_bytes, "pvc")          # or a Path to the .text, or "xehpc"
    flow.liveness.live_bytes[pc]    # GRF bytes live before the instruction (= IGA's liveTotals.r)
    flow.liveness.peak_pc, flow.liveness.peak_bytes, flow.liveness.peak_defs
    flow.loops.depth[pc]            # 0 outside every loop
    flow.loops.loops                # headers, blocks, PC ranges, depth
    flow.stalls.by_pc[pc]           # {"sbid": n, "send": n, "dist": n, "sync": n}

PCs: every dict is keyed by the instruction's byte offset in the kernel's ``.text`` section, the PC
``isa.parse_isa`` gives the same instruction (``flow.pcs`` lists them in order, the ``illegal``
padding words after the last instruction included, as ``parse_isa`` has them), so the line table's
mapping of PCs to source lines applies unchanged.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from xpukit.runtime.offline.flow import Loops, find_loops, iga_listing, parse_listing
from xpukit.runtime.offline.liveness import Liveness, analyze_liveness
from xpukit.runtime.offline.stalls import Stalls, analyze_stalls


@dataclasses.dataclass(frozen=True)
class KernelFlow:
    platform: str  # IGA's platform the text was decoded for
    grf_bytes: int  # bytes per GRF register
    pcs: tuple[int, ...]  # every instruction's PC, in program order
    liveness: Liveness
    loops: Loops
    stalls: Stalls
    labels: tuple[tuple[int, str], ...] = ()  # (PC, label) of each labelled block: for a program-order view

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: per-instruction rows (pc, live bytes, loop depth, stall counts) and summaries."""
        return {
            "platform": self.platform,
            "grf_bytes": self.grf_bytes,
            "instructions": [
                {
                    "pc": pc,
                    "live_bytes": self.liveness.live_bytes[pc],
                    "loop_depth": self.loops.depth[pc],
                    "stalls": self.stalls.by_pc[pc],
                }
                for pc in self.pcs
            ],
            "peak": {
                "pc": self.liveness.peak_pc,
                "bytes": self.liveness.peak_bytes,
                "defs": [dataclasses.asdict(d) for d in self.liveness.peak_defs],
                "input_bytes": self.liveness.peak_inputs,
                "exact": self.liveness.exact,
            },
            "loops": [
                {k: v for k, v in dataclasses.asdict(loop).items() if k not in ("blocks", "back_edges", "header")}
                for loop in self.loops.loops
            ],
            "stall_totals": self.stalls.totals,
        }


def analyze_listing(listing: str, platform: str) -> KernelFlow:
    """The three analyses of an ``iga64 -Xprint-pc -Xprint-deps`` listing (``flow.iga_listing``)."""
    parsed = parse_listing(listing, platform)
    loops = find_loops(parsed)
    return KernelFlow(
        parsed.platform,
        parsed.grf_bytes,
        tuple(ins.pc for ins in parsed.instructions),
        analyze_liveness(parsed, loops),
        loops,
        analyze_stalls(parsed),
        tuple(
            (parsed.instructions[block.start].pc, block.label)
            for block in parsed.blocks
            if block.label and block.start < len(parsed.instructions)
        ),
    )


def analyze_kernel(text: bytes | Path, platform: str, *, iga64: str | None = None) -> KernelFlow:
    """Decode a kernel's ``.text`` (bytes or a file) with iga64 for ``platform`` (a kit family such
    as ``pvc``, or IGA's name such as ``xehpc``) and analyze it. Errors: ``flow.FlowError``."""
    return analyze_listing(iga_listing(text, platform, iga64=iga64), platform)
