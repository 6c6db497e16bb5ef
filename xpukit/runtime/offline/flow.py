"""One kernel's Intel GPU ISA as IGA decodes it: instructions by PC with the register bytes each one
defines and uses, its basic blocks, and its loops. No GPU: ``iga64`` decodes the kernel's ``.text``.

Why a second decode when ``ocloc disasm`` already gave the text (``isa.parse_isa``): only IGA's own
listing says which register bytes an instruction reads and writes (``-Xprint-deps``: ``d:{r255[8-11]}``,
``s0:{r0[0-3]}``, ``s-pr:{f0[2]}``), and that is what liveness (``liveness.py``) and the scoreboard
waits (``stalls.py``) are computed from. One ``iga64 -d -p=PLATFORM TEXT -Xprint-pc -Xprint-deps``
run gives everything: PCs, labels, the instruction text with its ``{...}`` SWSB annotations, and the
byte sets. Its PCs are ``isa.parse_isa``'s (the same bytes decoded by the same IGA; the image's tests
compare them); labels take no bytes; the ``illegal`` words IGA decodes in the padding after the last
instruction are kept as instructions (as ``parse_isa`` keeps them) with no registers.

API:

- :func:`iga_listing` ``(text, platform) -> str``: run iga64 (``text`` is the ``.text`` bytes or a file).
- :func:`parse_listing` ``(listing, platform) -> Listing``: instructions and basic blocks.
- :func:`find_loops` ``(listing) -> Loops``: natural loops from the CFG's back edges (dominators),
  each instruction's loop depth (0 outside every loop) and each loop's header and PC range.

The CFG is IGA's own (``IR/DUAnalysis.cpp``): a block starts at each label IGA prints; a block's
successors are the labels its last instruction names (``jmpi``, ``goto``, ``join``, ``while`` ...)
and the next block unless that instruction is an unpredicated ``jmpi`` or carries ``{EOT}``.
Byte sets are Python ints, one bit per register byte: GRF byte ``b`` of ``rN`` is bit
``N * grf_bytes + b``; flag byte ``b`` of ``fN`` is bit ``4 * N + b``.

Errors are ``FlowError`` (an ``XpukitError``): no iga64, iga64 failing, a platform IGA does not know.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

from xpukit.errors import XpukitError
from xpukit.layout import COMPILER
from xpukit.runtime.scratch import scratch_dir
from xpukit.targets import FAMILY, canonical, iga_platform

SCRATCH_PREFIX = "xpukit-flow-"
_TIMEOUT_S = 120
# Bytes per GRF register by IGA platform (names as ``iga64 -h=p`` lists them, and their numbers):
# Xe-HPG (acm-g10, mtl, arl-h) has 32-byte registers, Xe-HPC and later 64.
GRF_BYTES = {
    "12p1": 32, "xe": 32, "xelp": 32, "tgl": 32, "tgllp": 32, "dg1": 32,
    "12p5": 32, "xehp": 32,
    "12p71": 32, "xehpg": 32,
    "12p72": 64, "xehpc": 64,
    "2": 64, "xe2": 64, "lnl": 64,
    "3": 64, "xe3": 64, "ptl": 64,
    "3pxpc": 64, "xe3pxpc": 64,
}  # fmt: skip
_FLAG_BYTES = 4  # f0..fN are 32-bit registers
# The opcodes whose operands may be labels (IGA's branches); only they have successors other than
# the next block.
BRANCHES = frozenset((
    "jmpi", "goto", "join", "if", "else", "endif", "while", "break", "cont", "halt", "call", "calla", "ret", "brd",
    "brc",
))  # fmt: skip

_IGA_FIX = "use the kit's image (iga64 is in its compiler folder, on PATH), or put IGC's iga64 on PATH"


class FlowError(XpukitError):
    """The kernel's listing cannot be had or read: no iga64, iga64 failed, an unknown platform."""


@dataclasses.dataclass(slots=True)
class IgaInstruction:
    """One instruction of IGA's listing, with the register bytes IGA says it defines and uses (not
    frozen only because a frozen dataclass costs a microsecond more per instruction: do not change it)."""

    pc: int  # byte offset in the kernel's .text (isa.parse_isa's PC of the same instruction)
    text: str  # as IGA prints it, without the PC comment
    op: str  # opcode with its subfunction: "send.ugm", "sync.nop", "dpas.8x8", "illegal"
    predicate: str  # "f0.1", "~f0.0.any16h" ("" when none; sel's flag is a source, not a predicate)
    targets: tuple[str, ...]  # labels it names (branch targets)
    eot: bool  # {EOT}: the thread ends here
    swsb: tuple[str, ...]  # the {...} options: "A@1", "$0", "$3.dst", "Compacted", ...
    grf_defs: int  # GRF bytes written (IGA's d:)
    grf_uses: int  # GRF bytes read (s0:, s1:, s2:, s-impl:, s-desc:, s-pr:)
    flag_defs: int  # flag bytes written (d-fl: and a flag destination)
    flag_pred: int  # flag bytes of the predicate (s-pr:)

    @property
    def inverted(self) -> bool:
        return self.predicate.startswith("~")


@dataclasses.dataclass(frozen=True)
class Block:
    """A basic block: instructions ``[start, end)`` of ``Listing.instructions``."""

    index: int
    label: str
    start: int
    end: int
    succs: tuple[int, ...]
    preds: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Listing:
    platform: str  # IGA's platform name as given to iga64
    grf_bytes: int  # bytes per GRF register
    instructions: tuple[IgaInstruction, ...]
    blocks: tuple[Block, ...]

    def block_of(self) -> list[int]:
        """The block index of each instruction."""
        out = [0] * len(self.instructions)
        for block in self.blocks:
            out[block.start : block.end] = [block.index] * (block.end - block.start)
        return out


def resolve_platform(target: str) -> str:
    """IGA's platform for a kit family (``pvc``, ``cri``: ``xpukit.targets.IGA_PLATFORM``) or an IGA
    platform name itself (``xehpc``, ``3pxpc``); a one-line error otherwise."""
    name = target.strip().lower()
    if canonical(name) in FAMILY:
        try:
            plat = iga_platform(name).lower()
        except XpukitError:
            plat = ""
        if plat in GRF_BYTES:
            return plat
    if name in GRF_BYTES:
        return name
    raise FlowError(
        f"no IGA platform known for {target!r}",
        f"pass a family ({', '.join(FAMILY)}) or an IGA platform "
        f"({', '.join(sorted(k for k in GRF_BYTES if not k[0].isdigit()))})",
    )


def find_iga64() -> str:
    """iga64 on PATH, else the one in the image's compiler folder; a one-line error when neither."""
    found = shutil.which("iga64")
    if found:
        return found
    bundled = Path(COMPILER) / "bin" / "iga64"
    if bundled.is_file() and os.access(bundled, os.X_OK):
        return str(bundled)
    raise FlowError("iga64 not found (needed to decode the kernel's registers and control flow)", _IGA_FIX)


def iga_listing(text: bytes | Path, platform: str, *, iga64: str | None = None) -> str:
    """``iga64 -d -p=PLATFORM -Xprint-pc -Xprint-deps`` of a kernel's ``.text`` (bytes or a file)."""
    tool = iga64 or find_iga64()
    plat = resolve_platform(platform)
    if isinstance(text, Path):
        return _run_iga(tool, plat, text)
    with scratch_dir(SCRATCH_PREFIX) as work:
        path = work / "kernel.text"
        path.write_bytes(text)
        return _run_iga(tool, plat, path)


def _run_iga(tool: str, platform: str, path: Path) -> str:
    cmd = [tool, "-d", f"-p={platform}", str(path), "-Xprint-pc", "-Xprint-deps"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=_TIMEOUT_S)
    except FileNotFoundError:
        raise FlowError(f"iga64 not found at {tool}", _IGA_FIX) from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FlowError(f"could not run {tool}: {exc}", _IGA_FIX) from None
    if proc.returncode != 0 or "/* [" not in proc.stdout:
        detail = " | ".join(line.strip() for line in proc.stderr.splitlines()[:3] if line.strip())
        detail = detail or f"exit {proc.returncode}, no instructions"
        raise FlowError(
            f"iga64 could not decode {path.name} for {platform}: {detail}",
            "check that the bytes are a kernel's .text section built for this platform",
        )
    return proc.stdout


# --------------------------------------------------------------------------- parsing

_PC_LINE = re.compile(r"^/\*\s*\[([0-9A-Fa-f]+)\]\s*\*/\s?(.*)$")
_LABEL_LINE = re.compile(r"^([A-Za-z_]\w*):\s*$")
_DEP_SET = re.compile(r"([a-z][\w-]*):\{([^}]*)\}")
_REG_ITEM = re.compile(r"([a-z]+)(\d+)(?::(\d+))?(?:\[([\d,\-]+)\])?")
_PREDICATE = re.compile(r"^\((?:W&)?(~?f\d+\.\d+[\w.]*)\)")
_OPCODE = re.compile(r"^(?:\([^)]*\)\s*)?([a-z][\w]*(?:\.[\w()&|~^]+)*)")
_OPTIONS = re.compile(r"\{([^{}]*)\}\s*$")
_WORD = re.compile(r"[A-Za-z_]\w*")


@functools.lru_cache(maxsize=4096)
def reg_set(items: str, grf_bytes: int) -> tuple[int, int]:
    """One ``{...}`` set -> (GRF bits, flag bits); other register files (acc, a, s) are not kept."""
    grf = flags = 0
    for match in _REG_ITEM.finditer(items):
        name, number, count, ranges = match.group(1), int(match.group(2)), match.group(3), match.group(4)
        if name == "r":
            size, base = grf_bytes, number * grf_bytes
        elif name == "f":
            size, base = _FLAG_BYTES, number * _FLAG_BYTES
        else:
            continue
        if ranges is None:
            bits = ((1 << (size * int(count or 1))) - 1) << base
        else:
            bits = 0
            for part in ranges.split(","):
                low, _, high = part.partition("-")
                lo, hi = int(low), int(high or low)
                bits |= ((1 << (hi - lo + 1)) - 1) << (base + lo)
        if name == "r":
            grf |= bits
        else:
            flags |= bits
    return grf, flags


def _instruction(pc: int, text: str, deps: list[str], grf_bytes: int, labels: set[str]) -> IgaInstruction:
    code = text.partition("//")[0]
    options = _OPTIONS.search(code)
    swsb = tuple(s.strip() for s in options.group(1).split(",") if s.strip()) if options else ()
    operands = (code[: options.start()] if options else code).strip()
    pred = _PREDICATE.match(operands)
    opcode = _OPCODE.match(operands)
    op = opcode.group(1) if opcode else ""
    grf_defs = grf_uses = flag_defs = flag_pred = 0
    for name, items in _DEP_SET.findall(" ".join(deps)) if deps else ():
        grf, flags = reg_set(items, grf_bytes)
        if name == "d" or name == "d-fl":
            grf_defs |= grf
            flag_defs |= flags
        elif name == "s-pr":
            flag_pred |= flags
            grf_uses |= grf
        elif name.startswith("s"):
            grf_uses |= grf
    targets: tuple[str, ...] = ()
    if op.partition(".")[0] in BRANCHES and opcode is not None:
        targets = tuple(word for word in _WORD.findall(operands, opcode.end()) if word in labels)
    predicate = pred.group(1) if pred is not None and flag_pred else ""
    eot = "EOT" in swsb
    text = " ".join(text.split())
    return IgaInstruction(pc, text, op, predicate, targets, eot, swsb, grf_defs, grf_uses, flag_defs, flag_pred)


def parse_listing(listing: str, platform: str) -> Listing:
    """IGA's ``-Xprint-pc -Xprint-deps`` listing -> instructions and basic blocks (IGA's CFG)."""
    plat = resolve_platform(platform)
    grf_bytes = GRF_BYTES[plat]
    lines = listing.splitlines()
    labels = {m.group(1) for line in lines if (m := _LABEL_LINE.match(line)) is not None}
    raw: list[tuple[int, str, list[str]]] = []
    starts: list[tuple[str, int]] = []  # (label, index of its first instruction)
    deps: list[str] = []
    for line in lines:
        if line.startswith("//"):
            deps.append(line)
            continue
        if (label := _LABEL_LINE.match(line)) is not None:
            starts.append((label.group(1), len(raw)))
            deps = []
            continue
        if (match := _PC_LINE.match(line)) is not None:
            raw.append((int(match.group(1), 16), match.group(2), deps))
            deps = []
    if not raw:
        raise FlowError("iga64's listing has no instructions", "check the platform and the .text bytes")
    instructions = tuple(_instruction(pc, text, d, grf_bytes, labels) for pc, text, d in raw)
    if not starts or starts[0][1] != 0:
        starts.insert(0, ("", 0))
    return Listing(plat, grf_bytes, instructions, _blocks(instructions, starts))


def _blocks(instructions: tuple[IgaInstruction, ...], starts: list[tuple[str, int]]) -> tuple[Block, ...]:
    index_of = {label: i for i, (label, _) in enumerate(starts) if label}
    ends = [start for _, start in starts[1:]] + [len(instructions)]
    succs: list[list[int]] = []
    for i, ((_, start), end) in enumerate(zip(starts, ends, strict=True)):
        out: list[int] = []
        last = instructions[end - 1] if end > start else None
        falls = last is None or not ((last.op == "jmpi" and not last.predicate) or last.eot)
        if last is not None:
            out += [index_of[t] for t in last.targets if t in index_of]
        if falls and i + 1 < len(starts):
            out.append(i + 1)
        succs.append(sorted(set(out)))
    preds: list[list[int]] = [[] for _ in starts]
    for i, out in enumerate(succs):
        for s in out:
            preds[s].append(i)
    return tuple(
        Block(i, label, start, end, tuple(succs[i]), tuple(preds[i]))
        for i, ((label, start), end) in enumerate(zip(starts, ends, strict=True))
    )


# --------------------------------------------------------------------------- loops


@dataclasses.dataclass(frozen=True)
class Loop:
    """A natural loop: its header block and every block of its body, the header included."""

    header: int  # block index
    header_pc: int
    blocks: tuple[int, ...]
    back_edges: tuple[int, ...]  # blocks whose edge to the header closes the loop
    depth: int  # 1 for an outermost loop
    start_pc: int  # first PC of its blocks (a program-order view: its blocks may not be contiguous)
    end_pc: int  # PC after its last instruction


@dataclasses.dataclass(frozen=True)
class Loops:
    loops: tuple[Loop, ...]  # outer loops before the loops they contain
    depth: dict[int, int]  # PC -> loop depth (0 = outside every loop)
    # retreating edges whose target does not dominate their source (no natural loop is made of them):
    # (PC of the source block's last instruction, PC of the target block's first)
    irreducible: tuple[tuple[int, int], ...]


def dominators(listing: Listing) -> list[set[int]]:
    """Each block's dominators (itself included); blocks the entry does not reach get none."""
    blocks = listing.blocks
    order = _reverse_postorder(listing)
    position = {b: i for i, b in enumerate(order)}
    idom: dict[int, int] = {order[0]: order[0]} if order else {}

    def intersect(a: int, b: int) -> int:
        while a != b:
            while position[a] > position[b]:
                a = idom[a]
            while position[b] > position[a]:
                b = idom[b]
        return a

    changed = True
    while changed:  # Cooper, Harvey and Kennedy's iteration over the reverse postorder
        changed = False
        for b in order[1:]:
            done = [p for p in blocks[b].preds if p in idom]
            new = done[0]
            for p in done[1:]:
                new = intersect(p, new)
            if idom.get(b) != new:
                idom[b] = new
                changed = True
    out: list[set[int]] = [set() for _ in blocks]
    for b in order:
        chain, node = {b}, b
        while idom[node] != node:
            node = idom[node]
            chain.add(node)
        out[b] = chain
    return out


def _reverse_postorder(listing: Listing) -> list[int]:
    return _depth_first(listing)[0]


def _depth_first(listing: Listing) -> tuple[list[int], dict[int, int], dict[int, int]]:
    """Blocks the entry reaches in reverse postorder, with each one's preorder and postorder number."""
    blocks = listing.blocks
    if not blocks:
        return [], {}, {}
    pre = {0: 0}
    post: dict[int, int] = {}
    stack: list[tuple[int, int]] = [(0, 0)]
    while stack:
        node, i = stack[-1]
        succs = blocks[node].succs
        if i < len(succs):
            stack[-1] = (node, i + 1)
            if succs[i] not in pre:
                pre[succs[i]] = len(pre)
                stack.append((succs[i], 0))
        else:
            post[node] = len(post)
            stack.pop()
    return sorted(post, key=lambda b: -post[b]), pre, post


def find_loops(listing: Listing) -> Loops:
    """Natural loops (one per header: back edges to the same header are one loop) and nesting depth."""
    blocks = listing.blocks
    dom = dominators(listing)
    order, pre, post = _depth_first(listing)
    position = {b: i for i, b in enumerate(order)}
    back: dict[int, list[int]] = {}
    irreducible = []
    for b in order:
        for s in blocks[b].succs:
            if s in dom[b]:
                back.setdefault(s, []).append(b)
            elif pre[s] <= pre[b] and post[s] >= post[b]:  # retreating (s an ancestor of b), not a back edge
                irreducible.append((_block_pc(listing, b, last=True), _block_pc(listing, s)))
    bodies: dict[int, set[int]] = {}
    for header, sources in back.items():
        body, work = {header}, [s for s in sources if s != header]
        body.update(work)
        while work:
            node = work.pop()
            for p in blocks[node].preds:
                if p not in body and p in position:
                    body.add(p)
                    work.append(p)
        bodies[header] = body
    depth_of_block = [sum(1 for body in bodies.values() if b in body) for b in range(len(blocks))]
    instructions = listing.instructions
    loops = []
    for header in sorted(bodies, key=lambda h: (-len(bodies[h]), instructions[blocks[h].start].pc)):
        members = sorted(bodies[header])
        spans = [(blocks[b].start, blocks[b].end) for b in members if blocks[b].end > blocks[b].start]
        first = min(s for s, _ in spans)
        last = max(e for _, e in spans) - 1
        loops.append(
            Loop(
                header,
                instructions[blocks[header].start].pc,
                tuple(members),
                tuple(sorted(back[header])),
                sum(1 for other in bodies.values() if header in other),
                instructions[first].pc,
                instructions[last].pc + _size(instructions, last),
            )
        )
    loops.sort(key=lambda loop: (loop.depth, loop.start_pc))
    depth = {}
    for block in blocks:
        for ins in instructions[block.start : block.end]:
            depth[ins.pc] = depth_of_block[block.index]
    return Loops(tuple(loops), depth, tuple(irreducible))


def _block_pc(listing: Listing, b: int, last: bool = False) -> int:
    """A block's first (or last) instruction's PC; an empty block's is the next instruction's."""
    block = listing.blocks[b]
    instructions = listing.instructions
    if block.end > block.start:
        return instructions[block.end - 1 if last else block.start].pc
    return instructions[block.start].pc if block.start < len(instructions) else code_end(listing)


def code_end(listing: Listing) -> int:
    """The byte after the last instruction (the .text size when the PCs are right)."""
    instructions = listing.instructions
    return instructions[-1].pc + _size(instructions, len(instructions) - 1)


def _size(instructions: tuple[IgaInstruction, ...], i: int) -> int:
    """Bytes of instruction ``i``: up to the next PC; the last one 16, 8 when compacted."""
    if i + 1 < len(instructions):
        return instructions[i + 1].pc - instructions[i].pc
    return 8 if "Compacted" in instructions[i].swsb else 16
