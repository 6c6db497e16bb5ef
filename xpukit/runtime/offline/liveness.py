"""Live GRF bytes at every instruction of a kernel, computed by the kit, equal to IGA's own.

Why: spills come from the point where the most register bytes are live at once. IGA can say how
many (``iga64 -Xprint-json -Xprint-defs``, field ``liveTotals.r``), but its analysis takes 1.5 s on
the 2,376-instruction pvc matmul and 303 s on an 8,699-instruction one; this one takes milliseconds
(docs/benchmarks/kernel-report.md) and also says which instructions wrote the bytes live at the
peak, so a report can point at the source lines to shorten.

What the number is: ``live_bytes[pc]`` is the count of GRF bytes live just *before* the instruction
at ``pc`` executes: the bytes it reads, plus those some later instruction reads with no write in
between. That is the point IGA's ``liveTotals`` describes (``IR/DUAnalysis.cpp`` sums its live paths
after extending them past the instruction and starting the instruction's own). IGA's rules, kept
exactly:

- Byte granularity, the byte sets of ``iga64 -Xprint-deps`` (``flow.IgaInstruction``).
- A predicated write (``(f0.0) mov r10 ...``) kills a live byte only for uses under the same
  predicate in the same block (same flag bytes, same sign), or when a write under the opposite
  predicate (``~f0.0``) of the same byte is met further up in the same block; a write of the
  predicate's flag forgets both. Across a block boundary a predicated write never kills.
- ``sel``'s flag is a source, not a predicate: a ``sel`` write kills.
- The byte sets are IGA's, including where they fall short: a 2D block load's destination is 2
  bytes (``d:{r3[0-1]}`` for 31 registers), so the registers it fills count as live from the
  kernel's start (``peak_inputs`` holds them; docs/isa.md).

How: IGA follows one live path per use; paths whose predicate state is the same evolve byte by byte
alike, so they are merged (a path with no pending predicated kills merges exactly into any path of
its predicate state). At a block boundary every path is unpredicated, so a block's effect is
``live_in = (live_out & survive) | gen``, monotone: a worklist from the last block up reaches IGA's
fixed point, walking a block again only when the bytes live at its end grow (a loop's blocks two or
three times, the rest once), and the last walk of each block gives its instructions' counts. Linear
in the number of instructions (``benchmarks/bench_flow.py``).

IGA keeps one quirk this does not model: when a use's own path comes back to it around a loop, IGA
restarts the path but keeps the predicated kills it collected below the use. ``Liveness.exact`` is
False when a kernel has the pattern that could make it matter (a predicated write, below a use in the
same looping block, of a byte that use reads); the image's tests compare every example kernel with
IGA's ``liveTotals``.

The peak: its PC (the first, when several instructions share it) and the instructions whose writes
may reach it with a byte live there (reaching definitions over the CFG; a predicated write does not
stop older writes from reaching), with how many of the peak's bytes each provides; bytes no
instruction writes before the peak are the thread's inputs (payload, arguments).
"""

from __future__ import annotations

import dataclasses
from collections import deque

from xpukit.runtime.offline.flow import IgaInstruction, Listing, Loops, find_loops


@dataclasses.dataclass(frozen=True)
class PeakDef:
    pc: int  # an instruction whose write may reach the peak
    bytes: int  # bytes of the peak's live set it writes (a byte written on two paths counts for both)


@dataclasses.dataclass(frozen=True)
class Liveness:
    live_bytes: dict[int, int]  # PC -> GRF bytes live before the instruction (IGA's liveTotals "r")
    peak_bytes: int
    peak_pc: int
    peak_defs: tuple[PeakDef, ...]  # most bytes first, then by PC
    peak_inputs: int  # bytes live at the peak no instruction writes before it (payload, 2D block loads' rest)
    exact: bool  # False: IGA's restarted-path quirk may differ here (see the module docstring)


class _Path:
    """Live paths of one predicate state: their bytes and the predicated kills pending on them."""

    __slots__ = ("inv", "live", "pred", "records")

    def __init__(self, live: int, pred: int = 0, inv: bool = False) -> None:
        self.live = live
        self.pred = pred  # flag bytes of the uses' predicate (0: none, or forgotten)
        self.inv = inv and pred != 0
        self.records: list[list[int]] = []  # [inverted, predicate flag bytes, bytes] of predicated kills

    def key(self) -> tuple[int, bool]:
        return (self.pred, self.inv)

    def absorb(self, other: _Path) -> None:
        """Merge a path of the same predicate state that has no pending kills on its live bytes."""
        keep = []
        for record in self.records:
            record[2] &= ~other.live
            if record[2]:
                keep.append(record)
        self.records = keep + [r for r in other.records if r[2] & other.live]
        self.live |= other.live

    def free_of_records(self) -> bool:
        return not any(r[2] & self.live for r in self.records)


def _step(paths: list[_Path], ins: IgaInstruction) -> list[_Path]:
    """Extend every path backwards past ``ins`` (IGA's extendLivePathBackwards), then start its own."""
    kills, kill_flags, pred = ins.grf_defs, ins.flag_defs, ins.flag_pred
    if not pred and len(paths) < 2 and not (paths and (paths[0].pred or paths[0].records)):
        # the common case, one unpredicated path with no pending kills: textbook liveness
        if not paths:
            return [_Path(ins.grf_uses)] if ins.grf_uses else []
        only, uses = paths[0], ins.grf_uses
        live = only.live
        if live & kills:  # (each operation copies the whole set: skip the ones that change nothing)
            live &= ~kills
        if uses and live & uses != uses:
            live |= uses
        only.live = live
        return paths if live else []
    inv = ins.predicate.startswith("~")
    rekeyed = False
    out = []
    for path in paths:
        if kill_flags:
            if path.pred & kill_flags:
                path.pred, path.inv = 0, False
                rekeyed = True
            if path.records:
                path.records = [r for r in path.records if not r[1] & kill_flags]
        overlap = 0
        if kills and (not pred or not path.pred or (inv == path.inv and path.pred & pred)):
            overlap = path.live & kills
        if overlap:
            if not pred or (inv == path.inv and path.pred & pred):
                path.live &= ~overlap
                if path.records:
                    kept = []
                    for record in path.records:
                        record[2] &= ~overlap
                        if record[2]:
                            kept.append(record)
                    path.records = kept
            else:
                for index in range(len(path.records) - 1, -1, -1):
                    record = path.records[index]
                    if bool(record[0]) == inv or not record[1] & pred:
                        continue
                    gone = overlap & record[2]
                    if not gone:
                        continue
                    path.live &= ~gone
                    if not path.live:
                        break
                    record[2] &= ~gone
                    if not record[2]:
                        del path.records[index]
            if not path.live:
                continue
            if pred:
                path.records.append([int(inv), pred, overlap])
        out.append(path)
    if ins.grf_uses:
        out.append(_Path(ins.grf_uses, pred, inv))
        rekeyed = True
    return _merge(out) if rekeyed or len(out) > 1 else out


def _merge(paths: list[_Path]) -> list[_Path]:
    """Merge paths of one predicate state where it is exact (one side has no pending kills)."""
    if len(paths) < 2:
        return paths
    by_key: dict[tuple[int, bool], list[_Path]] = {}
    for path in paths:
        group = by_key.setdefault(path.key(), [])
        for other in group:
            if path.free_of_records():
                other.absorb(path)
                break
            if other.free_of_records():
                path.absorb(other)
                group.remove(other)
                group.append(path)
                break
        else:
            group.append(path)
    return [p for group in by_key.values() for p in group]


def _run_block(listing: Listing, index: int, live_out: int, totals: dict[int, int] | None = None) -> int:
    """Live bytes at the block's top given those live at its end; fills ``totals`` when given."""
    block = listing.blocks[index]
    paths = [_Path(live_out)] if live_out else []
    count = live_out.bit_count()
    for ins in reversed(listing.instructions[block.start : block.end]):
        if not ins.flag_pred and not (paths and (len(paths) > 1 or paths[0].pred or paths[0].records)):
            # One unpredicated path with no pending kills (or none): textbook liveness, counted by
            # what changes (each operation on the set copies all of it: only the needed ones).
            if not paths:
                paths = [_Path(0)]
            live, uses = paths[0].live, ins.grf_uses
            gone = live & ins.grf_defs
            if gone:
                live ^= gone
                count -= gone.bit_count()
            if uses:
                have = live & uses
                if have != uses:
                    live |= uses
                    count += uses.bit_count() - have.bit_count()
            paths[0].live = live
            if not live:
                paths = []
        else:
            paths = _step(paths, ins)
            live = 0
            for path in paths:
                live |= path.live
            count = live.bit_count()
        if totals is not None:
            totals[ins.pc] = count
    live = 0
    for path in paths:
        live |= path.live
    return live


def block_live_in(listing: Listing, totals: dict[int, int] | None = None) -> tuple[list[int], list[int]]:
    """Live bytes at each block's top and end (the least fixed point over the CFG, from the last block
    up). A block is walked again only when the bytes live at its end change, so its last walk had
    the final ones: with ``totals``, every instruction's count is filled on the way."""
    blocks = listing.blocks
    live_in = [0] * len(blocks)
    live_out = [0] * len(blocks)
    walked = [False] * len(blocks)
    work = deque(range(len(blocks) - 1, -1, -1))  # last block first: liveness flows backwards
    queued = set(work)
    while work:
        b = work.popleft()
        queued.discard(b)
        out = 0
        for s in blocks[b].succs:
            out |= live_in[s]
        if walked[b] and out == live_out[b]:
            continue
        walked[b] = True
        live_out[b] = out
        new = _run_block(listing, b, out, totals)
        if new != live_in[b]:
            live_in[b] = new
            for p in blocks[b].preds:
                if p not in queued:
                    queued.add(p)
                    work.append(p)
    return live_in, live_out


def analyze_liveness(listing: Listing, loops: Loops | None = None) -> Liveness:
    """Live GRF bytes before every instruction (IGA's ``liveTotals.r``), the peak and what feeds it.
    ``loops``: the listing's ``flow.find_loops``, when the caller has it already."""
    totals: dict[int, int] = {}
    _, live_out = block_live_in(listing, totals)
    instructions = listing.instructions
    peak_index = max(range(len(instructions)), key=lambda i: (totals[instructions[i].pc], -i))
    peak_pc = instructions[peak_index].pc
    peak_live = _live_before(listing, peak_index, live_out)
    defs, inputs = reaching_defs(listing, peak_index, peak_live)
    exact = not restart_pattern(listing, loops if loops is not None else find_loops(listing))
    return Liveness(totals, totals[peak_pc], peak_pc, defs, inputs, exact)


def _live_before(listing: Listing, index: int, live_out: list[int]) -> int:
    """The live byte set (not just its size) before instruction ``index``."""
    block_index = listing.block_of()[index]
    block = listing.blocks[block_index]
    paths = [_Path(live_out[block_index])] if live_out[block_index] else []
    for ins in reversed(listing.instructions[index : block.end]):
        paths = _step(paths, ins)
    live = 0
    for path in paths:
        live |= path.live
    return live


def reaching_defs(listing: Listing, index: int, wanted: int) -> tuple[tuple[PeakDef, ...], int]:
    """The writes that may reach instruction ``index`` with bytes of ``wanted``, and the bytes no
    write reaches (inputs). Walks the CFG backwards; an unpredicated write stops the search for its
    bytes on that path, a predicated one does not."""
    instructions = listing.instructions
    blocks = listing.blocks
    block_of = listing.block_of()
    found: dict[int, int] = {}
    inputs = 0
    searched = [0] * len(blocks)  # bytes already searched from each block's end

    def scan(start: int, stop: int, looking: int) -> int:
        for i in range(stop - 1, start - 1, -1):
            ins = instructions[i]
            hit = ins.grf_defs & looking
            if hit:
                found[ins.pc] = found.get(ins.pc, 0) | hit
                if not ins.flag_pred:
                    looking &= ~hit
                    if not looking:
                        break
        return looking

    first = block_of[index]
    work: list[tuple[int, int]] = []
    left = scan(blocks[first].start, index, wanted)
    if left:
        if not blocks[first].preds:
            inputs |= left
        work += [(p, left) for p in blocks[first].preds]
    while work:
        b, looking = work.pop()
        looking &= ~searched[b]
        if not looking:
            continue
        searched[b] |= looking
        left = scan(blocks[b].start, blocks[b].end, looking)
        if left:
            if not blocks[b].preds:
                inputs |= left
            work += [(p, left) for p in blocks[b].preds]
    defs = sorted((PeakDef(pc, bits.bit_count()) for pc, bits in found.items()), key=lambda d: (-d.bytes, d.pc))
    return tuple(defs), inputs.bit_count()


def restart_pattern(listing: Listing, loops: Loops) -> bool:
    """True when a looping block has a use followed (in the block) by a predicated write of a byte it
    reads: where IGA's restarted path keeps kills this analysis does not (module docstring)."""
    looping = {b for loop in loops.loops for b in loop.blocks}
    for b in looping:
        block = listing.blocks[b]
        pending = 0  # bytes written under a predicate further down the block
        for ins in reversed(listing.instructions[block.start : block.end]):
            if ins.grf_uses & pending:
                return True
            if ins.flag_pred:
                pending |= ins.grf_defs
    return False
