"""Source lines from a zebin: DWARF ``.debug_line`` joined with the ISA's PCs, no GPU needed.

ocloc 26.27 writes DWARF into every zebin: a line program whose addresses are byte offsets into the
kernel's ``.text.<kernel>`` section, and ``DW_TAG_inlined_subroutine`` entries whose ranges cover the
instructions Triton's own functions (``standard.py``'s ``sum``...) became, with the user's call site.

Intel GT's relocation types are not in pyelftools (``get_dwarf_info()`` raises "Unsupported
relocation type"), so the sections are read unrelocated. Every address relocation here targets the
kernel's own text section (symbol value 0), so an address is the relocation's addend: the line
program's ``DW_LNE_set_address`` has addend 0 (its offsets are section offsets already) and the
inlined ranges' ``low_pc``/``high_pc`` are 0 in the section and their real value in the addend,
which is what ``_addends`` reads.

``attribute`` gives each instruction its line: the last line row at or below its PC (rows after an
end of sequence, before the first row, or with line 0, DWARF's "no source location", have no line:
one row, "no location of its own"). A row in another file than the kernel's,
inside an inlined range, is shown under the call site, with the original line in ``via``.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import io
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from elftools.dwarf.ranges import BaseAddressEntry
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

from xpukit.runtime.offline.isa import Instruction, tally
from xpukit.runtime.offline.report_model import KernelSource, Line

_R_ZE_SYM_ADDR = 1  # Intel GT: a 64-bit symbol address (value + addend)
_R_ZE_SYM_ADDR_32 = 2  # Intel GT: a 32-bit one (DWARF 4's section offsets)
NO_LINE_INFO = "no line information"


@dataclasses.dataclass(frozen=True)
class InlinedRange:
    low: int
    high: int  # exclusive
    file: str  # the call site, in the caller's file
    line: int


@dataclasses.dataclass(frozen=True)
class LineTable:
    addresses: list[int]  # sorted row addresses
    places: list[tuple[str, int] | None]  # per row: (file, line), None after an end of sequence
    kernel_file: str  # the file the kernel's compile unit names
    inlined: list[InlinedRange]

    def locate(self, pc: int) -> tuple[str | None, int | None, str | None]:
        """(file, line, via) of the instruction at ``pc``; (None, None, None) when no row covers it."""
        index = bisect.bisect_right(self.addresses, pc) - 1
        place = self.places[index] if index >= 0 else None
        if place is None:
            return None, None, None
        file, line = place
        if file != self.kernel_file:
            for span in self.inlined:
                if span.low <= pc < span.high:
                    return span.file, span.line, f"{Path(file).name}:{line}"
        return file, line, None


def _file_names(program: Any, comp_dir: str) -> list[str]:
    """The line program's file table as paths (index 0 is file 1 in DWARF 4, file 0 in 5)."""
    dirs = [comp_dir, *(d.decode(errors="replace") for d in program.header.include_directory)]
    names = []
    for entry in program["file_entry"]:
        name = entry.name.decode(errors="replace")
        folder = dirs[entry.dir_index] if entry.dir_index < len(dirs) else ""
        names.append(name if name.startswith("/") or not folder else f"{folder.rstrip('/')}/{name}")
    return names


def _addends(elf: ELFFile, section: str, kernel: str) -> tuple[dict[int, int], dict[int, int]]:
    """Relocated values in ``section``, by offset: (addresses, for the relocations against the
    kernel's text section; section offsets, the 32-bit ones, e.g. a ``DW_AT_ranges`` into
    ``.debug_ranges``, whose value in the section is 0 and whose real offset is the addend)."""
    rela = elf.get_section_by_name(f".rela{section}")
    if not isinstance(rela, RelocationSection):
        return {}, {}
    symbols = elf.get_section(rela["sh_link"])
    if not isinstance(symbols, SymbolTableSection):
        return {}, {}
    addresses, offsets = {}, {}
    for reloc in rela.iter_relocations():
        symbol = symbols.get_symbol(reloc["r_info_sym"])
        value = symbol["st_value"] + reloc["r_addend"]
        if reloc["r_info_type"] == _R_ZE_SYM_ADDR and symbol.name in (f".text.{kernel}", kernel):
            addresses[reloc["r_offset"]] = value
        elif reloc["r_info_type"] == _R_ZE_SYM_ADDR_32:
            offsets[reloc["r_offset"]] = value
    return addresses, offsets


def read_line_table(zebin: bytes, kernel: str) -> LineTable | None:
    """The kernel's line table, or None when the zebin has no ``.debug_line`` (stripped)."""
    elf = ELFFile(io.BytesIO(zebin))
    if elf.get_section_by_name(".debug_line") is None or not elf.has_dwarf_info():
        return None
    dwarf = elf.get_dwarf_info(relocate_dwarf_sections=False)
    addends, offsets = _addends(elf, ".debug_info", kernel)
    range_lists = dwarf.range_lists()
    rows: list[tuple[int, tuple[str, int] | None]] = []
    inlined: list[InlinedRange] = []
    kernel_file = ""
    for unit in dwarf.iter_CUs():
        top = unit.get_top_DIE()
        comp_dir = _text(top.attributes.get("DW_AT_comp_dir"))
        program = dwarf.line_program_for_CU(unit)
        if program is None:
            continue
        names = _file_names(program, comp_dir)
        base = 1 if program.header.version < 5 else 0

        def path(index: int, names: list[str] = names, base: int = base) -> str:
            return names[index - base] if 0 <= index - base < len(names) else f"file {index}"

        kernel_file = kernel_file or path(1 if base else 0)
        for entry in program.get_entries():
            state = entry.state
            if state is not None:
                # line 0 is DWARF's "no source location" (the kit's IR pass gives it to what has none)
                place = None if state.end_sequence or state.line == 0 else (path(state.file), state.line)
                rows.append((state.address, place))
        low = top.attributes.get("DW_AT_low_pc")
        base = addends.get(low.offset, low.value) if low is not None else 0
        spans = _Spans(addends, offsets, range_lists, base)
        inlined += _inlined_ranges(top.iter_children(), spans, path)
    if not rows:
        return None
    rows.sort(key=lambda row: row[0])  # stable: of rows at one address, the last one wins
    return LineTable([a for a, _ in rows], [p for _, p in rows], kernel_file, inlined)


def _text(attribute: Any) -> str:
    value = attribute.value if attribute is not None else b""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


@dataclasses.dataclass(frozen=True)
class _Spans:
    """What reading a DIE's address ranges needs: the relocated addresses and section offsets, the
    ``.debug_ranges`` lists, and the compile unit's base address their entries are relative to."""

    addends: Mapping[int, int]
    offsets: Mapping[int, int]
    range_lists: Any
    base: int

    def of(self, die: Any) -> list[tuple[int, int]]:
        """[low, high) pairs: from low_pc/high_pc, or from the ``DW_AT_ranges`` list IGC writes for
        code in several pieces (``tl.max``/``tl.sum`` reductions)."""
        attrs = die.attributes
        low_attr, high_attr, ranges = attrs.get("DW_AT_low_pc"), attrs.get("DW_AT_high_pc"), attrs.get("DW_AT_ranges")
        if low_attr is not None and high_attr is not None:
            low = self.addends.get(low_attr.offset, low_attr.value)
            if high_attr.form == "DW_FORM_addr":
                high = self.addends.get(high_attr.offset, high_attr.value)
            else:  # DWARF 4's length form
                high = low + high_attr.value
            return [(low, high)]
        if ranges is None or self.range_lists is None:
            return []
        base, out = self.base, []
        for entry in self.range_lists.get_range_list_at_offset(self.offsets.get(ranges.offset, ranges.value)):
            if isinstance(entry, BaseAddressEntry):
                base = entry.base_address
            elif entry.end_offset > entry.begin_offset:
                shift = 0 if getattr(entry, "is_absolute", False) else base
                out.append((shift + entry.begin_offset, shift + entry.end_offset))
        return out


def _inlined_ranges(dies: Iterable[Any], spans: _Spans, path: Any) -> list[InlinedRange]:
    """The outermost inlined subroutines under the kernel's subprograms: their ranges and call sites."""
    out = []
    for die in dies:
        if die.tag == "DW_TAG_inlined_subroutine":
            call_line = die.attributes.get("DW_AT_call_line")
            if call_line is None:
                continue
            call_file = die.attributes.get("DW_AT_call_file")
            where = path(call_file.value if call_file else 1)
            out += [InlinedRange(low, high, where, call_line.value) for low, high in spans.of(die)]
        elif die.has_children:
            out += _inlined_ranges(die.iter_children(), spans, path)
    return out


# --------------------------------------------------------------------------- per-line counts


class SourceFiles:
    """Source text by path, read once; a file that is not here reads as empty lines. ``known``: texts
    already read (the kernel file's snapshot, so its lines are the text that was compiled). Another
    file (a ``@triton.jit`` helper the kernel imports) is read when its lines are shown: one saved
    after ``since`` (the kernel's import) is in ``changed``, its text not the one compiled."""

    def __init__(self, known: Mapping[str, bytes] | None = None, since: float | None = None) -> None:
        self._lines: dict[str, list[str]] = {
            path: data.decode(errors="replace").splitlines() for path, data in (known or {}).items()
        }
        self.since = since
        self.changed: set[str] = set()

    def lines(self, path: str) -> list[str]:
        if path not in self._lines:
            try:
                with open(path, "rb") as file:
                    modified = os.fstat(file.fileno()).st_mtime
                    self._lines[path] = file.read().decode(errors="replace").splitlines()
            except OSError:
                self._lines[path] = []
                modified = None
            if self.since and (modified is None or modified > self.since) and Path(path).suffix == ".py":
                self.changed.add(path)
        return self._lines[path]

    def line(self, path: str | None, number: int | None) -> str:
        if path is None or number is None:
            return ""
        lines = self.lines(path)
        return lines[number - 1] if 0 < number <= len(lines) else ""


def attribute(instructions: Sequence[Instruction], table: LineTable, sources: SourceFiles) -> list[Line]:
    """Per-line counts: every instruction on exactly one line (or the one line-null entry), so the
    lines' counts add up to the kernel's. Ordered: the kernel's file by line, other files, then null."""
    groups: dict[tuple[str | None, int | None], list[Instruction]] = {}
    vias: dict[tuple[str | None, int | None], set[str]] = {}
    for ins in instructions:
        file, line, via = table.locate(ins.pc)
        groups.setdefault((file, line), []).append(ins)
        if via:
            vias.setdefault((file, line), set()).add(via)

    def order(key: tuple[str | None, int | None]) -> tuple[int, str, int]:
        file, line = key
        rank = 2 if file is None else (0 if file == table.kernel_file else 1)
        return rank, file or "", line or 0

    return [
        Line(
            file,
            line,
            sources.line(file, line),
            tally(group),
            [(ins.pc, ins.text) for ins in group if ins.category != "none"],
            sorted(vias.get((file, line), ()), key=_via_order),
        )
        for (file, line), group in sorted(groups.items(), key=lambda item: order(item[0]))
        if any(ins.category != "none" for ins in group)  # the ``illegal`` words after the end
    ]


def _via_order(via: str) -> tuple[str, int]:
    name, _, line = via.rpartition(":")
    return name, int(line) if line.isdigit() else 0


def kernel_source(data: bytes, path: Path, first_line: int, line_count: int) -> KernelSource:
    """The kernel's own lines from ``data``, the file's bytes as compiled, with their hash (the report
    keys its lines on it)."""
    lines = data.decode(errors="replace").splitlines()
    return KernelSource(
        str(path), hashlib.sha256(data).hexdigest(), first_line, lines[first_line - 1 : first_line - 1 + line_count]
    )
