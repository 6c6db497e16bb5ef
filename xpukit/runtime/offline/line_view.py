"""The kernel report by source line: the kernel's source with each family's counts beside each line.

Plain Python on the report's JSON (``kernel-report --lines``), like ``report_format``: Markdown with
one column block per family, an HTML section readable without JavaScript (instructions behind
``<details>``; a small script only switches families and configs), and what changed per line
between two reports, with the lines of the two sources aligned by their text (difflib), so an edit
that moves lines down does not show as a change on every line below it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from xpukit.runtime.offline.baseline import describe_delta, match_lines, totals_delta
from xpukit.runtime.offline.counts import IsaCounts
from xpukit.runtime.offline.report_model import Line, Report, Row

SOURCE_CHANGED = "source changed since compile"

_SEND_ABBREV = (
    ("global_load", "ld"),
    ("global_store", "st"),
    ("slm_load", "slm-ld"),
    ("slm_store", "slm-st"),
    ("block2d_load", "2d-ld"),
    ("block2d_store", "2d-st"),
    ("atomic", "atomic"),
    ("scratch_fill", "fill"),
    ("scratch_spill", "spill"),
    ("barrier", "bar"),
    ("fence", "fence"),
    ("eot", "eot"),
    ("other", "other"),
)
BLOCK = ("instr", "sends", "DPAS", "FMA", "spill B st/ld", "live B", "in loop", "stalls")
_STALL_ABBREV = (("sbid", "sb"), ("send", "se"), ("dist", "d"), ("sync", "sy"))


def stall_text(stalls: dict[str, int] | None) -> str:
    """``sb3 se2 d5``: the static stall sources that are not 0 (stalls.py's kinds)."""
    found = stalls or {}
    return " ".join(f"{abbrev}{found[kind]}" for kind, abbrev in _STALL_ABBREV if found.get(kind))


def _cells(entry: Line | None) -> list[str]:
    if entry is None:
        return [""] * len(BLOCK)
    live = str(entry.live.peak_bytes) if entry.live else ""
    in_loop = str(entry.in_loop.instructions or "") if entry.in_loop else ""
    return [*_count_cells(entry.counts), live, in_loop, stall_text(entry.stalls)]


def _count_cells(counts: IsaCounts) -> list[str]:
    sends = ", ".join(f"{abbrev} {counts.sends[kind]}" for kind, abbrev in _SEND_ABBREV if counts.sends.get(kind))
    spill = counts.scratch_spill_bytes, counts.scratch_fill_bytes
    return [
        str(counts.instructions),
        sends,
        str(counts.dpas or ""),
        str(counts.fma or ""),
        f"{spill[0]}/{spill[1]}" if any(spill) else "",
    ]


COMPACT_FROM = 3  # families in one table: from this many on, one column each (a terminal's width)
COMPACT_KEY = (
    "each family's cell: instructions, then s sends, D DPAS, F FMA, sp spill+fill bytes per thread where not 0, "
    "L the most GRF bytes live before the line's instructions, ^ its instructions inside a loop "
    f"(fewer than {COMPACT_FROM} --target families show each in its own columns)"
)


def _compact(entry: Line | None) -> str:
    """One family's line in one short cell: ``42 s3 D16 sp64 L15086 ^30``."""
    if entry is None:
        return ""
    counts = entry.counts
    spill = counts.scratch_spill_bytes + counts.scratch_fill_bytes
    tagged = (("s", counts.send_total), ("D", counts.dpas), ("F", counts.fma), ("sp", spill))
    parts = [str(counts.instructions), *(f"{tag}{value}" for tag, value in tagged if value)]
    parts += [f"L{entry.live.peak_bytes}"] if entry.live else []
    parts += [f"^{entry.in_loop.instructions}"] if entry.in_loop and entry.in_loop.instructions else []
    return " ".join(parts)


LineKey = tuple[str | None, int | None]


def _source(report: Report) -> tuple[str | None, int, list[str]]:
    src = report.kernel_source
    return (src.file, src.first, src.lines) if src is not None else (None, 1, [])


def view_rows(report: Report, config: str) -> list[tuple[LineKey, str, dict[str, Line]]]:
    """((file, line), source text, {target: line entry}) in display order: the kernel's lines as
    compiled, then lines elsewhere (other files, helpers), then instructions with no line."""
    kernel_file, first, source_lines = _source(report)
    by_key: dict[LineKey, dict[str, Line]] = {}
    texts: dict[LineKey, str] = {}
    for row in report.rows:
        if row.config != config:
            continue
        for entry in row.lines or []:
            key = (entry.file, entry.line)
            by_key.setdefault(key, {})[row.target] = entry
            texts.setdefault(key, entry.source)
    out: list[tuple[LineKey, str, dict[str, Line]]] = []
    for offset, text in enumerate(source_lines):
        key = (kernel_file, first + offset)
        out.append((key, text, by_key.pop(key, {})))
    for key in sorted(by_key, key=lambda k: (k[0] is None, k[0] or "", k[1] or 0)):
        out.append((key, texts.get(key, ""), by_key[key]))
    return out


NO_LOCATION = "(no location of its own)"  # DWARF line 0, or no line row covers the instructions


def _where(key: LineKey, kernel_file: str | None) -> str:
    file, line = key
    if file is None:
        return NO_LOCATION
    return str(line) if file == kernel_file else f"{Path(file).name}:{line}"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def code_span(text: str) -> str:
    """``text`` as one Markdown code span, whatever backticks it holds (CommonMark: a fence one
    backtick longer than its longest run, and a space inside where it starts or ends with one, or
    starts and ends with a space)."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    spaced = text[:1] == text[-1:] == " " and text.strip(" ")  # a reader would strip one of each
    pad = " " if text.startswith("`") or text.endswith("`") or spaced else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _with_lines(report: Report, label: str) -> list[str]:
    """The targets whose row of config ``label`` has per-line counts, in the report's order."""
    have = {r.target for r in report.rows if r.config == label and r.lines}
    return [t for t in report.targets if t in have]


def format_lines_markdown(report: Report, changes: dict[Any, str] | None = None) -> str:
    """Per config: one table, the source in the middle, a column block per family on the right."""
    out: list[str] = []
    kernel_file = _source(report)[0]
    if report.source_changed:
        out += [f"**{SOURCE_CHANGED}**: the lines below are the source as compiled, not the file now.", ""]
    for row in report.rows:
        if row.line_info:
            out.append(f"{row.target} {row.config}: {row.line_info} (totals above)")
        elif row.lines is not None and (why := flow_summary(row)):
            out.append(f"- {row.target} {row.config}: {why}")
        if row.baseline is not None:
            out.append(f"- {row.target} {row.config}: {baseline_summary(row)}")
    for cfg in report.configs:
        label = cfg.label
        present = _with_lines(report, label)
        if not present:
            continue
        compact = len(present) >= COMPACT_FROM
        blocks = list(present) if compact else [f"{t} {b}" for t in present for b in BLOCK]
        header = ["line", "source", *blocks]
        based = any(r.baseline is not None for r in report.rows if r.config == label)
        if based:
            header.append(BASELINE_COLUMN)
        if changes is not None:
            header.append("changed since last save")
        out += ["", f"**{report.kernel}** by line, config {label}", ""]
        out += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        for key, text, entries in view_rows(report, label):
            cells = [_where(key, kernel_file), code_span(text.rstrip()) if text.strip() else ""]
            for target in present:
                entry = entries.get(target)
                cells += [_compact(entry)] if compact else _cells(entry)
            if based:
                cells.append(_against_baseline(present, entries))
            if changes is not None:
                cells.append(changes.get((label, key), ""))
            out.append("| " + " | ".join(_md(c) for c in cells) + " |")
        if compact:
            out += ["", COMPACT_KEY]
    return "\n".join(out).strip()


# --------------------------------------------------------------------------- against a baseline

BASELINE_COLUMN = "vs baseline"


def _against_baseline(targets: list[str], entries: dict[str, Line]) -> str:
    """Per family, what the line's counts and live peak are against the baseline's line of its text."""
    parts = []
    for target in targets:
        entry = entries.get(target)
        if entry is not None and (said := describe_delta(entry.delta, entry.live_delta)):
            parts.append(f"{target} {said}")
    return "; ".join(parts)


def baseline_summary(row: Row) -> str:
    """What the row is compared with and its totals' change: ``against pvc BLOCK=128: -1408 instr``."""
    base = row.baseline
    if base is None:
        return ""
    if base.counts is None:
        return f"against {base.target} {base.config}: the baseline did not compile ({base.error})"
    peak = base.live.peak_bytes if base.live else None
    return f"against {base.target} {base.config}: {totals_delta(row, base.counts, peak)}"


# --------------------------------------------------------------------------- what changed per line

_DELTA = (("instructions", "instr"), ("send_total", "sends"), ("dpas", "DPAS"), ("scratch_spill_bytes", "spill B"))


def line_changes(before: Report | None, after: Report) -> dict[Any, str]:
    """(config, line key of ``after``) -> what changed on that line: the count deltas per family
    ("pvc +12 instr, +2 sends"), or for an edited line its own numbers before and after ("edited: pvc
    12 -> 15 instr"; "edited" alone for a new line). Lines are matched by their text (difflib)."""
    if before is None:
        return {}
    old_file, _, _ = _source(before)
    new_file, _, _ = _source(after)
    matched, replaced = match_lines(before.kernel_source, after.kernel_source)
    out: dict[Any, str] = {}
    for cfg in after.configs:
        label = cfg.label
        old_rows = {key: entries for key, _, entries in view_rows(before, label)}
        for key, _text, entries in view_rows(after, label):
            file, line = key
            edited = file == new_file and line is not None and line not in matched
            if edited and line not in replaced:
                out[(label, key)] = "edited"
                continue
            old_key: LineKey = key
            if file == new_file and line is not None:
                old_key = (old_file, (replaced if edited else matched)[line])
            old_entries = old_rows.get(old_key, {})
            parts = []
            for target in sorted(set(entries) | set(old_entries)):
                a, b = _delta_counts(old_entries.get(target)), _delta_counts(entries.get(target))
                if edited:
                    parts.append(f"{target} {a['instructions']} -> {b['instructions']} instr")
                    continue
                deltas = [f"{b[k] - a[k]:+d} {name}" for k, name in _DELTA if b[k] != a[k]]
                if deltas:
                    parts.append(f"{target} {', '.join(deltas)}")
            if edited:
                out[(label, key)] = "edited: " + "; ".join(parts) if parts else "edited"
            elif parts:
                out[(label, key)] = "; ".join(parts)
    return out


def _delta_counts(entry: Line | None) -> dict[str, int]:
    counts = entry.counts if entry is not None else None
    return {k: int(getattr(counts, k)) if counts is not None else 0 for k, _ in _DELTA}


# --------------------------------------------------------------------------- HTML, readable without script

LINES_CSS = """
.lines { border-collapse: collapse; font: 12px/1.35 ui-monospace, monospace; margin: .5em 0 1.5em; }
.lines td, .lines th { border: 1px solid #ccc; padding: .1em .4em; white-space: pre; vertical-align: top; }
.lines td.src { min-width: 30em; }
.lines tr.hot td.src { background: #fff4e0; } .lines tr.changed td { background: #e8f0ff; }
.lines td.n { text-align: right; color: #333; } .lines td.spill { background: #fde8e6; }
.lines details pre { margin: .2em 0; font-size: 11px; color: #333; }
nav.switch button { margin: 0 .3em .3em 0; } nav.switch button[aria-pressed=true] { font-weight: bold; }
.note { padding: .4em .6em; background: #fff3c4; border: 1px solid #e0c060; }
table.isa td { white-space: pre; } table.isa tr.label td { font-weight: bold; background: #f6f6f6; }
table.isa tr.loop td { color: #05a; } table.isa tr.in-loop td.pc { border-left: 3px solid #05a; }
.hl td { background: #ffe9a8 !important; }
"""

LINES_SCRIPT = """
(function () {
  "use strict";
  function pick(kind, value) {
    document.querySelectorAll("section[data-" + kind + "]").forEach(function (s) {
      s.hidden = s.dataset[kind] !== value;
    });
    document.querySelectorAll("nav.switch button[data-" + kind + "]").forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.dataset[kind] === value));
    });
  }
  document.querySelectorAll("nav.switch button").forEach(function (b) {
    b.addEventListener("click", function () {
      if (b.dataset.family) { pick("family", b.dataset.family); } else { pick("config", b.dataset.config); }
    });
  });
  var first = document.querySelector("nav.switch button[data-family]");
  if (first) { pick("family", first.dataset.family); }
  var cfg = document.querySelector("nav.switch button[data-config]");
  if (cfg) { pick("config", cfg.dataset.config); }
  // Pointing at a source line marks its instructions in the program-order view, and back.
  document.querySelectorAll("section[data-family]").forEach(function (section) {
    function mark(line, on) {
      section.querySelectorAll("tr[data-line]").forEach(function (tr) {
        if (tr.dataset.line === line) { tr.classList.toggle("hl", on); }
      });
    }
    section.querySelectorAll("tr[data-line]").forEach(function (tr) {
      tr.addEventListener("mouseenter", function () { mark(tr.dataset.line, true); });
      tr.addEventListener("mouseleave", function () { mark(tr.dataset.line, false); });
    });
  });
})();
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _text(text: str) -> str:
    """``text`` escaped as an element's content (no quotes to escape there): the ISA's tens of
    thousands of instructions on an eleven-family page."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _overview(report: Report, label: str, present: list[str], changes: dict[Any, str]) -> Iterator[str]:
    kernel_file = _source(report)[0]
    yield '<table class="lines overview"><thead><tr><th>line</th><th>source</th>'
    yield "".join(f"<th>{_e(t)} instr</th>" for t in present) + "<th>changed since last save</th></tr></thead><tbody>"
    for key, text, entries in view_rows(report, label):
        change = changes.get((label, key), "")
        hot = any(e.counts.scratch_spill_bytes + e.counts.scratch_fill_bytes for e in entries.values())
        cls = " ".join(c for c in ("hot" if hot else "", "changed" if change else "") if c)
        where = _e(_where(key, kernel_file))
        yield f'<tr class="{cls}" data-line="{where}"><td class="n">{where}</td>'
        yield f'<td class="src">{_e(text.rstrip())}</td>'
        for t in present:
            counts = entries[t].counts if t in entries else None
            yield f'<td class="n" data-target="{_e(t)}">{_e(counts.instructions) if counts else ""}</td>'
        yield f'<td class="change">{_e(change)}</td></tr>'
    yield "</tbody></table>"


def flow_summary(row: Row) -> str:
    """Where the row's register pressure peaks, whose values are live there, its stall sources and
    loops, in one sentence; why there is none when the analysis did not run."""
    if row.live is None:
        return row.flow_info
    live = row.live
    where = f"line {live.peak_line}" if live.peak_line is not None else "no line"
    text = f"GRF peak {live.peak_bytes} of {live.grf_bytes} B live before pc {live.peak_pc:#x} ({where})"
    if live.live_from_lines:
        text += f"; live there: values from lines {', '.join(map(str, live.live_from_lines))}"
    if not live.exact:
        text += " (IGA's own count may differ here)"
    loops = len(row.loops)
    text += f"; {loops} loop{'s' if loops != 1 else ''}"
    if row.stalls:
        text += f"; static stall sources {stall_text(row.stalls) or 'none'}"
    return text


def occupancy_summary(row: Row) -> str:
    """A row's occupancy in words: what fits per Xe core and what limits it, why it cannot launch,
    the figures used where the sources disagree; "not checked" for a device without the kit's figures."""
    occ = row.occupancy
    if occ is None:
        return "occupancy not checked (the kit has no figures for this device)"
    text = (
        f"occupancy {occ.threads_per_xve:g}/{occ.threads_per_xve_max} threads per XVE, "
        f"{occ.work_groups_per_xe_core} work-groups per Xe core (limited by {occ.limited_by})"
    )
    if occ.cannot_launch:
        text += f": cannot launch: {occ.cannot_launch}"
    if occ.figures:
        text += f"; figures used: {'; '.join(occ.figures)}"
    return text


def _family_table(report: Report, label: str, target: str) -> Iterator[str]:
    kernel_file = _source(report)[0]
    row = report.row(target, label)
    assert row is not None  # the caller lists only targets with lines for this config
    spills = row.spills
    summary = (
        f"{target}: SIMD {row.simd}, GRF {row.grf} ({row.grf_rule}); "
        f"spills {spills.bytes_per_thread if spills else 0} B/thread = n_spills {spills.n_spills if spills else 0}; "
        f"{occupancy_summary(row)}; {flow_summary(row)}"
    )
    yield f'<p class="family-summary">{_e(summary)}</p>'

    if row.baseline is not None:
        yield f'<p class="baseline">{_e(baseline_summary(row))}</p>'
    columns = [*BLOCK, *([BASELINE_COLUMN] if row.baseline is not None else [])]
    yield '<table class="lines"><thead><tr><th>line</th><th>source and instructions</th>'
    yield "".join(f"<th>{_e(b)}</th>" for b in columns) + "</tr></thead><tbody>"
    for key, text, entries in view_rows(report, label):
        entry = entries.get(target)
        cells = _cells(entry)
        if row.baseline is not None:
            cells.append(describe_delta(entry.delta, entry.live_delta) if entry else "")
        src = _e(text.rstrip())
        if entry and entry.asm:
            via = f" (with {', '.join(entry.via)})" if entry.via else ""
            asm = "\n".join(f"[{pc:06x}] {ins}" for pc, ins in entry.asm)
            src = f"<details><summary>{src}{_e(via)}</summary><pre>{_e(asm)}</pre></details>"
        spill_cls = ' class="n spill"' if cells[4] else ' class="n"'
        where = _e(_where(key, kernel_file))
        yield f'<tr data-line="{where}"><td class="n">{where}</td><td class="src">{src}</td>'
        yield "".join(f"<td{spill_cls if i == 4 else ' class=n'}>{_e(c)}</td>" for i, c in enumerate(cells)) + "</tr>"
    yield "</tbody></table>"
    yield from _program_order(report, row)


def _program_order(report: Report, row: Row) -> Iterator[str]:
    """The row's ISA in program order, in Compiler Explorer's manner: its labels and loops, each
    instruction with its source line, the GRF bytes live before it and its loop depth."""
    kernel_file = _source(report)[0]
    listing = []
    for entry in row.lines or []:
        where = _e(_where((entry.file, entry.line), kernel_file))  # escaped once for its instructions
        before = entry.live.bytes if entry.live else []
        for i, (pc, text) in enumerate(entry.asm):
            depth = entry.loop_depth[i] if i < len(entry.loop_depth) else 0
            listing.append((pc, text, where, before[i] if i < len(before) else None, depth))
    if not listing:
        return
    listing.sort()
    labels = dict(row.labels)
    starts = {loop.start_pc: loop for loop in row.loops}
    ends: dict[int, list[Any]] = {}
    for loop in row.loops:
        ends.setdefault(loop.end_pc, []).append(loop)
    count, loops = len(listing), len(row.loops)
    what = f"{count} instruction{'s' if count != 1 else ''}, {loops} loop{'s' if loops != 1 else ''}"
    yield f'<details class="isa"><summary>ISA in program order: {what}</summary>'
    yield '<table class="lines isa"><thead><tr><th>pc</th><th>line</th><th>live B</th><th>instruction</th></tr>'
    yield "</thead><tbody>"
    for pc, text, where, live, depth in listing:
        for loop in ends.pop(pc, []):
            yield f'<tr class="loop"><td colspan="4">end of loop (depth {loop.depth})</td></tr>'
        if pc in labels:
            yield f'<tr class="label"><td colspan="4">{_e(labels[pc])}:</td></tr>'
        if pc in starts:
            loop = starts[pc]
            head = f"loop (depth {loop.depth}): [{loop.start_pc:06x}, {loop.end_pc:06x}), back to {loop.header_pc:06x}"
            yield f'<tr class="loop"><td colspan="4">{_e(head)}</td></tr>'
        cls = ' class="in-loop"' if depth else ""
        shown = "" if live is None else str(live)
        yield f'<tr{cls} data-line="{where}"><td class="n pc">{pc:06x}</td><td class="n">{where}</td>'
        yield f'<td class="n">{shown}</td><td>{_text(text)}</td></tr>'
    for remaining in ends.values():
        for loop in remaining:
            yield f'<tr class="loop"><td colspan="4">end of loop (depth {loop.depth})</td></tr>'
    yield "</tbody></table></details>"


def lines_html(report: Report, changes: dict[Any, str] | None = None) -> str:
    """The per-line view as HTML that reads without JavaScript: per config, an overview (every
    family's instructions per line) and a table per family whose lines open into their instructions."""
    changes = changes or {}
    parts: list[str] = []
    if report.source_changed:
        parts.append(f'<p class="note" id="source-changed">{SOURCE_CHANGED}: the lines are the source as compiled.</p>')
    for row in report.rows:
        if row.line_info:
            parts.append(f'<p class="note">{_e(row.target)} {_e(row.config)}: {_e(row.line_info)}</p>')
    labels = [c.label for c in report.configs]
    families = [t for t in report.targets if any(r.target == t and r.lines for r in report.rows)]
    parts.append('<nav class="switch">')
    parts += [f'<button type="button" data-family="{_e(t)}">{_e(t)}</button>' for t in families]
    if len(labels) > 1:
        parts += [f'<button type="button" data-config="{_e(c)}">{_e(c)}</button>' for c in labels]
    parts.append("</nav>")
    for label in labels:
        present = _with_lines(report, label)
        parts.append(f'<section data-config="{_e(label)}"><h2>By line: {_e(label)}</h2>')
        parts += list(_overview(report, label, present, changes))
        for target in present:
            parts.append(f'<section data-family="{_e(target)}"><h3>{_e(target)}</h3>')
            parts += list(_family_table(report, label, target))
            parts.append("</section>")
        parts.append("</section>")
    return "\n".join(parts)
