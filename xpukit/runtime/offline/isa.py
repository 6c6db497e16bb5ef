"""Xe ISA from a zebin, with no GPU: disassemble with ``ocloc disasm`` and count what matters.

ocloc disassembles through Intel's IGA library: ocloc 26.27 loads IGC 2.40's ``libiga64.so.2`` by
itself. Where ocloc says "couldn't load iga" (it then exits 0 and writes nothing) the caller gets one
line with the fix instead of an empty result.

``count_isa`` turns the text into counts: instructions, sends by kind (global, SLM, 2D block,
atomics, scratch spill/fill, ...) and the bytes the scratch sends move, DPAS, FMAs (``mad``: where
``tl.dot`` lands without DPAS), extended math, other ALU work, moves, control flow and barriers.
Send kinds come from the message IGA decodes into the comment after each send
(``// wr:1+0, rd:2; load.ugm.d32...``; pvc's and acm-g10's scratch in this ocloc:
``hword scratch block read/write xN`` on the legacy dataport). Xe3P (cri, nvl-p) sends are
``sendg``/``sendgx`` with the same decoded messages (``// rd:64 B; load.ugm.d32x16t.a32u ...``).
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

from elftools.elf.elffile import ELFFile

from xpukit.errors import XpukitError
from xpukit.runtime.offline.counts import SEND_KINDS, IsaCounts
from xpukit.runtime.offline.ocloc import Ocloc, find_ocloc
from xpukit.runtime.offline.zebin import read_zebin
from xpukit.targets import DEFAULT_TARGET, FAMILY, canonical, zebin_family

TEMP_PREFIX = "xpukit-isa-"  # distinct from ocloc.py's xpukit-ocloc-* work folders
_TIMEOUT_S = 300

_NOTE_PRODUCT_FAMILY = 1
_NOTE_IP_VERSION = 6  # the graphics IP version: wcl's zebins say ptl's product family


class IsaError(XpukitError):
    """Disassembly is impossible here (no IGA) or failed (wrong device, corrupt code)."""


class IgaMissingError(IsaError):
    """ocloc cannot disassemble: the IGA library is missing or unloadable."""


_IGA_FIX = "use the kit's image (its ocloc 26.27 carries IGC's libiga64.so.2), or an ocloc installed with its IGC"


def zebin_device(zebin: bytes) -> str | None:
    """The device a zebin was built for, from its ``.note.intelgt.compat`` product family and IP version."""
    try:
        elf = ELFFile(io.BytesIO(zebin))
        section = elf.get_section_by_name(".note.intelgt.compat")
        data = section.data() if section is not None else b""
    except Exception:
        return None
    offset = 0
    notes: dict[int, int] = {}
    # ELF notes: namesz, descsz, type, then name and desc, each padded to 4 bytes. pyelftools
    # cannot decode these notes' binary descriptors, so they are read here.
    while offset + 12 <= len(data):
        namesz, descsz, note_type = struct.unpack_from("<III", data, offset)
        desc_at = offset + 12 + (namesz + 3) // 4 * 4
        if note_type in (_NOTE_PRODUCT_FAMILY, _NOTE_IP_VERSION) and descsz >= 4 and desc_at + 4 <= len(data):
            (notes[note_type],) = struct.unpack_from("<I", data, desc_at)
        offset = desc_at + (descsz + 3) // 4 * 4
    family = notes.get(_NOTE_PRODUCT_FAMILY)
    if family is None:
        return None
    return zebin_family(family, notes.get(_NOTE_IP_VERSION)) or f"product family {family}"


def _family_of(device: str) -> str | None:
    """The kit family a target or ocloc device name means (None: a device outside the table)."""
    name = canonical(device)
    if name in FAMILY:
        return name
    return next((f.name for f in FAMILY.values() if f.ocloc_device == device), None)


@dataclasses.dataclass(frozen=True)
class Disassembly:
    device: str
    kernels: dict[str, str]  # kernel name -> ISA text
    tool: str  # which ocloc and IGA produced it


def disassemble(
    zebin: bytes | Path,
    device: str | None = None,
    *,
    ocloc: Ocloc | None = None,
) -> Disassembly:
    """ISA text per kernel of a zebin. ``device`` defaults to the one the zebin names.

    Raises ``IsaError`` (one line each): zebin built for another device, no IGA, IGA decode error.
    """
    data = Path(zebin).read_bytes() if isinstance(zebin, Path) else bytes(zebin)
    where = str(zebin) if isinstance(zebin, Path) else "zebin"
    info = read_zebin(data)  # a ZebinError for anything that is not a zebin
    built_for = zebin_device(data)
    family = FAMILY.get(built_for or "")
    if device is None:
        device = family.ocloc_device if family else DEFAULT_TARGET
    elif family and _family_of(device) not in (None, family.name):
        raise IsaError(
            f"{where} was built for {built_for}, not {device}: its ISA would be decoded wrongly",
            f"disassemble it for {built_for} (--target {built_for}) or recompile for {device}",
        )
    tool = ocloc or find_ocloc()
    work = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-"))
    try:
        dump = work / "dump"
        dump.mkdir()
        (work / "k.zebin").write_bytes(data)
        cmd = [tool.path, "disasm", "-file", str(work / "k.zebin"), "-device", device, "-dump", f"{dump}/"]
        try:
            proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, errors="replace", timeout=_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise IsaError(f"could not run {tool.describe()} disasm: {exc}") from None
        log = (proc.stdout + proc.stderr).strip()
        if "couldn't load iga" in log.lower():
            raise IgaMissingError(
                f"{tool.describe()} could not load IGA (libiga64), so cannot disassemble", tool.fix(_IGA_FIX)
            )
        if proc.returncode != 0 or "error while disassembling" in log.lower():
            detail = " | ".join(line.strip() for line in log.splitlines()[:3] if line.strip())
            raise IsaError(
                f"{tool.describe()} disasm failed for {device}: {detail or f'exit {proc.returncode}'}",
                "check that the zebin was built for this device",
            )
        kernels = {}
        for kernel in info.kernels:
            asm = dump / f".text.{kernel.name}.asm"
            if not asm.is_file():
                raise IsaError(f"{tool.describe()} disasm wrote no ISA for kernel {kernel.name}", tool.fix(_IGA_FIX))
            kernels[kernel.name] = asm.read_text(errors="replace")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Disassembly(device=device, kernels=kernels, tool=f"{tool.describe()} disasm (IGA)")


# --------------------------------------------------------------------------- counting

CONTROL_FLOW = frozenset(
    ("jmpi", "goto", "join", "if", "else", "endif", "while", "break", "cont", "call", "calla", "ret", "brd", "brc")
)
MOVES = frozenset(("mov", "movi", "smov"))
# Fused multiply-adds: where tl.dot's compute lands on a target with no DPAS (acm-g10 on triton-xpu 3.3).
FMA = frozenset(("mad", "mac", "madm", "dp4a"))
# Other ALU work (integer and float arithmetic, logic, compares, selects): address math mostly.
ALU = frozenset(
    (
        "add", "add3", "addc", "subb", "mul", "mach", "avg", "sel", "csel", "cmp", "cmpn", "and", "or", "xor",
        "not", "shl", "shr", "asr", "rol", "ror", "bfn", "bfe", "bfi1", "bfi2", "bfrev", "cbit", "fbh", "fbl",
        "lzd", "frc", "rndd", "rnde", "rndu", "rndz", "lrp", "dp2", "dp3", "dp4", "dph", "pln", "line", "srnd",
    )
)  # fmt: skip
# Sends: Xe to Xe3's send/sendc (sends/sendsc before Xe), and Xe3P's sendg/sendgx (cri, nvl-p),
# whose messages IGA decodes the same way.
SEND_OPCODES = frozenset(("send", "sendc", "sends", "sendsc", "sendg", "sendgx"))
_DATA_BYTES = {"d8": 1, "d16": 2, "d32": 4, "d64": 8, "d8u32": 4, "d16u32": 4}
# One instruction: an optional predicate in parentheses, then the opcode with its modifiers.
_INSTRUCTION = re.compile(r"^\s*(?:\([^)]*\)\s+)?(?P<op>[a-z][a-z0-9_]*(?:\.[\w]+)*)\s*(?P<rest>.*)$")
_LABEL = re.compile(r"^\s*[A-Za-z_][\w]*:\s*$")


def send_kind(sfid: str, message: str) -> str:
    """The kind of a send from its shared function (``send.ugm`` -> ugm) and IGA's decoded message."""
    msg = message.strip().lower()
    reads = msg.startswith("load") or " read" in msg
    writes = msg.startswith("store") or " write" in msg
    # Scratch: the legacy dataport says so ("hword scratch block"); LSC reaches scratch through the
    # scratch surface's state (``.ss[aN.M]``; Xe3P's sendg prints it ``surf[sN.M][...]``: measured
    # on cri, a matmul with 64 KB of scratch per thread sends all its spills and fills that way and the
    # same kernel without scratch has none). ``.bss[...]`` is a bindless surface: a global buffer
    # (acm-g10, mtl and arl-h address kernel arguments that way), never spill traffic.
    if "scratch" in msg or re.search(r"\.ss\[|\bsurf\[", msg):
        return "scratch_spill" if writes else "scratch_fill"
    if "barrier" in msg:
        return "barrier"
    if "end of thread" in msg:
        return "eot"
    if msg.startswith("fence"):
        return "fence"
    if "atomic" in msg:
        return "atomic"
    if "block2d" in msg:
        return "block2d_store" if writes else "block2d_load"
    slm = sfid == "slm" or ".slm" in msg
    if reads:
        return "slm_load" if slm else "global_load"
    if writes:
        return "slm_store" if slm else "global_store"
    return "other"


def send_bytes(exec_size: int, message: str) -> int:
    """Bytes one send moves per thread, from IGA's decoded message: the legacy dataport's
    ``hword scratch block read x4`` (4 x 32-byte hwords), or an LSC ``d32x4`` (data size x vector,
    times the lanes unless transposed ``.t``). 0 when the message says neither."""
    msg = message.strip().lower()
    if (match := re.search(r"\bhword\b.*?\bx(\d+)\b", msg)) is not None:
        return 32 * int(match.group(1))
    if (match := re.search(r"\.(d8u32|d16u32|d8|d16|d32|d64)(?:x(\d+))?(t)?\b", msg)) is not None:
        size = _DATA_BYTES[match.group(1)] * int(match.group(2) or 1)
        return size if match.group(3) or re.search(r"\.t\b", msg) else size * exec_size
    return 0


_EXEC_SIZE = re.compile(r"\((\d+)\|")
_SYNC_PADDING = frozenset(("sync.nop", "sync.allrd", "sync.allwr"))
_NULL_DESTINATION = re.compile(r"^\(\d+\|[^)]*\)\s+null\b")


def is_padding(op: str, rest: str) -> bool:
    """Instructions that do no work: a ``mov`` whose destination is ``null`` (IGC 2.x puts one after
    each send on pvc, for the software scoreboard), ``sync.nop/allrd/allwr`` waits and ``nop``."""
    if op in _SYNC_PADDING or op == "nop":
        return True
    return op.partition(".")[0] == "mov" and _NULL_DESTINATION.match(rest.strip()) is not None


# What one instruction counts as: a send kind ("send:<kind>"), one of the IsaCounts fields, "padding",
# "other" (counted in ``instructions`` only) or "none" (labels' neighbours: ``illegal`` tail words).
@dataclasses.dataclass(frozen=True)
class Instruction:
    pc: int  # byte offset in the kernel's .text section
    text: str  # the instruction as IGA prints it, its decoded-message comment included
    category: str
    size: int  # 16 bytes, 8 when compacted
    moved_bytes: int = 0  # scratch sends: bytes per thread (send_bytes)


_COMPACTED = "Compacted"
_FULL_BYTES, _COMPACT_BYTES = 16, 8  # Xe instructions are 16 bytes, 8 when IGA compacts them


def _classify(op: str, rest: str, comment: str) -> tuple[str, int]:
    base, _, modifier = op.partition(".")
    if base == "illegal":
        return "none", 0
    if is_padding(op, rest):
        return "padding", 0
    if base in SEND_OPCODES:
        message = comment.rpartition(";")[2]
        kind = send_kind(modifier, message)
        moved = 0
        if kind in ("scratch_fill", "scratch_spill"):
            lanes = _EXEC_SIZE.search(rest)
            moved = send_bytes(int(lanes.group(1)) if lanes else 1, message)
        return f"send:{kind}", moved
    if base in ("dpas", "dpasw"):
        return "dpas", 0
    if base == "math":
        return "math", 0
    if base in FMA:
        return "fma", 0
    if base in ALU:
        return "alu", 0
    if base in MOVES:
        return "moves", 0
    if base in CONTROL_FLOW:
        return "control_flow", 0
    if op == "sync.bar" or base == "wait":
        return "barriers", 0
    return "other", 0


def parse_isa(text: str) -> list[Instruction]:
    """One kernel's ISA text as ``ocloc disasm`` writes it, one entry per instruction, with its PC.

    The PC comes from the same parse: each instruction takes 16 bytes, 8 when IGA marks it
    ``{Compacted}``; labels take none. ``code_bytes`` gives the span to compare with the text section."""
    out = []
    pc = 0
    for line in text.splitlines():
        code, _, comment = line.partition("//")
        if not code.strip() or _LABEL.match(code):
            continue
        match = _INSTRUCTION.match(code)
        if match is None:
            continue
        category, moved = _classify(match.group("op"), match.group("rest"), comment)
        size = _COMPACT_BYTES if _COMPACTED in code.rpartition("{")[2] else _FULL_BYTES
        out.append(Instruction(pc, " ".join(line.split()), category, size, moved))
        pc += size
    return out


def code_bytes(instructions: list[Instruction]) -> int:
    """Bytes the parsed instructions span: the kernel's ``.text`` size when the PCs are right."""
    return instructions[-1].pc + instructions[-1].size if instructions else 0


def tally(instructions: list[Instruction]) -> IsaCounts:
    """The counts of a set of instructions: a whole kernel's, or the ones a source line owns."""
    sends = dict.fromkeys(SEND_KINDS, 0)
    fields = dict.fromkeys(("dpas", "math", "moves", "control_flow", "barriers", "fma", "alu", "padding"), 0)
    total = fill_bytes = spill_bytes = 0
    for ins in instructions:
        category = ins.category
        if category == "none":
            continue
        if category == "padding":
            fields["padding"] += 1
            continue
        total += 1
        if category.startswith("send:"):
            kind = category[5:]
            sends[kind] += 1
            if kind == "scratch_fill":
                fill_bytes += ins.moved_bytes
            elif kind == "scratch_spill":
                spill_bytes += ins.moved_bytes
        elif category != "other":
            fields[category] += 1
    return IsaCounts(
        instructions=total,
        sends=sends,
        scratch_fill_bytes=fill_bytes,
        scratch_spill_bytes=spill_bytes,
        **fields,
    )


def count_isa(text: str) -> IsaCounts:
    """Count one kernel's ISA text as ``ocloc disasm`` writes it."""
    return tally(parse_isa(text))
