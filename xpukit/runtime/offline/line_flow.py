"""Why a kernel is slow, by source line: the kernel's flow (``kernel_flow``: live GRF bytes, loops,
static stall sources per instruction) joined with the report's lines by PC.

Each line gets its instructions' live bytes and its peak, the part of its counts that runs inside a
loop, and its stall sources; the row gets where the register pressure peaks, the lines whose
values are live there, its stall sources (the lines' sum, so the lines add up to the row) and its
loops in program order. Plain Python on parsed data: the one ``iga64`` run is ``kernel_flow``'s.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from elftools.elf.elffile import ELFFile

from xpukit.runtime.offline.isa import Instruction, tally
from xpukit.runtime.offline.kernel_flow import KernelFlow, analyze_kernel
from xpukit.runtime.offline.report_model import Line, LineLive, LoopSpan, Row, RowLive
from xpukit.runtime.offline.stalls import STALL_KINDS


def kernel_text(zebin: bytes, kernel: str) -> bytes:
    """The kernel's machine code: the zebin's ``.text.<kernel>`` section (empty when it has none)."""
    section = ELFFile(io.BytesIO(zebin)).get_section_by_name(f".text.{kernel}")
    return bytes(section.data()) if section is not None else b""


def add_flow(row: Row, zebin: bytes, kernel: str, instructions: Sequence[Instruction], kernel_file: str) -> None:
    """Decode the row's kernel once more with iga64 and join what it tells to ``row.lines``."""
    text = kernel_text(zebin, kernel)
    if not text or row.lines is None:
        row.flow_info = "no kernel text to analyze" if not text else row.flow_info
        return
    join_flow(row, analyze_kernel(text, row.target), instructions, kernel_file)


def join_flow(row: Row, flow: KernelFlow, instructions: Sequence[Instruction], kernel_file: str) -> None:
    """Fill each line's ``live``, ``in_loop``, ``loop_depth`` and ``stalls`` and the row's ``live``,
    ``stalls`` and ``loops`` from ``flow`` (keyed by the same PCs as ``instructions``)."""
    assert row.lines is not None
    by_pc = {ins.pc: ins for ins in instructions}
    line_of: dict[int, Line] = {}
    live, depth, stalls = flow.liveness.live_bytes, flow.loops.depth, flow.stalls.by_pc
    totals = dict.fromkeys(STALL_KINDS, 0)
    for line in row.lines:
        pcs = [pc for pc, _ in line.asm]
        for pc in pcs:
            line_of[pc] = line
        bytes_before = [live.get(pc, 0) for pc in pcs]
        line.live = LineLive(max(bytes_before, default=0), bytes_before)
        line.loop_depth = [depth.get(pc, 0) for pc in pcs]
        line.in_loop = tally([by_pc[pc] for pc, d in zip(pcs, line.loop_depth, strict=True) if d > 0 and pc in by_pc])
        line.stalls = dict.fromkeys(STALL_KINDS, 0)
        for pc in pcs:
            for kind, count in stalls.get(pc, {}).items():
                line.stalls[kind] = line.stalls.get(kind, 0) + count
        for kind, count in line.stalls.items():
            totals[kind] = totals.get(kind, 0) + count
    row.stalls = totals
    peak = flow.liveness
    peak_line = line_of.get(peak.peak_pc)
    feeding: list[int] = []
    for definition in peak.peak_defs:  # most bytes first
        source = line_of.get(definition.pc)
        if source is not None and source.file == kernel_file and source.line is not None and source.line not in feeding:
            feeding.append(source.line)
    row.live = RowLive(
        peak_bytes=peak.peak_bytes,
        peak_pc=peak.peak_pc,
        peak_line=peak_line.line if peak_line is not None and peak_line.file == kernel_file else None,
        live_from_lines=feeding,
        grf_bytes=(row.grf or 0) * flow.grf_bytes,
        exact=peak.exact,
    )
    row.loops = [LoopSpan(loop.start_pc, loop.end_pc, loop.header_pc, loop.depth) for loop in flow.loops.loops]
    row.labels = list(flow.labels)
