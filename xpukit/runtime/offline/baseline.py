"""A diff of two compiles of one kernel, by source line: this row against a baseline row (another
config, another family, or in ``--watch`` the compile pinned when the watch started).

Lines are matched by their text (difflib over the kernel's source lines, as the watch matches one
save to the last), so an edit that moves lines down does not show as a change on every line below
it; a line whose text is new is paired with the line it replaced, so an edited line keeps its own
before and after numbers. Each line gains ``delta`` (its counts minus the baseline line's, in the
counts' shape) and ``live_delta``; the row gains ``baseline`` (what it is compared with: its target,
config, counts and live registers). Plain Python on the report's records.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from typing import Any

from xpukit.runtime.offline.counts import SEND_KINDS, IsaCounts
from xpukit.runtime.offline.report_model import Baseline, KernelSource, Row

LineKey = tuple[str | None, int | None]

ZERO = IsaCounts(0, dict.fromkeys(SEND_KINDS, 0), dpas=0, math=0, moves=0, control_flow=0, barriers=0)


def counts_delta(after: IsaCounts | None, before: IsaCounts | None) -> IsaCounts:
    """``after`` minus ``before``, field by field (sends by kind); a missing side counts as zero."""
    a, b = after or ZERO, before or ZERO
    values: dict[str, Any] = {}
    for field in dataclasses.fields(IsaCounts):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, dict):
            values[field.name] = {k: x.get(k, 0) - y.get(k, 0) for k in dict.fromkeys([*x, *y])}
        else:
            values[field.name] = x - y
    return IsaCounts(**values)


def match_lines(before: KernelSource | None, after: KernelSource | None) -> tuple[dict[int, int], dict[int, int]]:
    """(unchanged, replaced): the new source's line numbers -> the old source's, for lines of the same
    text (``unchanged``) and for edited lines paired in order with the lines they replaced."""
    if before is None or after is None:
        return {}, {}
    unchanged: dict[int, int] = {}
    replaced: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(a=before.lines, b=after.lines, autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            for i in range(b1 - b0):
                unchanged[after.first + b0 + i] = before.first + a0 + i
        elif tag == "replace":
            for i in range(min(a1 - a0, b1 - b0)):
                replaced[after.first + b0 + i] = before.first + a0 + i
    return unchanged, replaced


def old_key(key: LineKey, source: KernelSource | None, before: KernelSource | None, lines: dict[int, int]) -> LineKey:
    """The baseline's key for a line of this report: the kernel's lines through ``lines``, any other
    file's (Triton's own, unchanged by an edit of the kernel) as they are."""
    file, line = key
    if source is not None and file == source.file and line is not None:
        old = lines.get(line)
        return (before.file if before else file, old) if old is not None else (None, -1)
    return key


def apply_baseline(
    row: Row,
    base: Row,
    source: KernelSource | None,
    base_source: KernelSource | None,
) -> None:
    """Compare ``row`` with ``base``: the row's ``baseline`` and each line's ``delta``/``live_delta``.
    Lines matched by text; an edited line with the line it replaced."""
    row.baseline = Baseline(base.target, base.config, base.counts, base.live, base.error)
    if row.lines is None or base.lines is None:
        return
    unchanged, replaced = match_lines(base_source, source)
    mapping = {**replaced, **unchanged}
    old = {(e.file, e.line): e for e in base.lines}
    for entry in row.lines:
        was = old.get(old_key((entry.file, entry.line), source, base_source, mapping))
        entry.delta = counts_delta(entry.counts, was.counts if was else None)
        peak = entry.live.peak_bytes if entry.live else 0
        entry.live_delta = peak - (was.live.peak_bytes if was and was.live else 0)


def describe_delta(delta: IsaCounts | None, live_delta: int | None = None) -> str:
    """``+12 instr, -2 sends, +512 live B``: what a line's delta says, or "" when nothing changed."""
    if delta is None:
        return ""
    parts = [
        f"{value:+d} {name}"
        for value, name in (
            (delta.instructions, "instr"),
            (delta.send_total, "sends"),
            (delta.dpas, "DPAS"),
            (delta.fma, "FMA"),
            (delta.scratch_spill_bytes + delta.scratch_fill_bytes, "spill B"),
            (live_delta or 0, "live B"),
        )
        if value
    ]
    return ", ".join(parts)


def totals_delta(row: Row, base_counts: IsaCounts | None, base_live: int | None) -> str:
    """The row's totals against its baseline's, the way ``describe_delta`` says a line's."""
    live = (row.live.peak_bytes if row.live else 0) - (base_live or 0) if base_live is not None else None
    return describe_delta(counts_delta(row.counts, base_counts), live) or "no change"


def pair_rows(
    rows: Sequence[Row], base_rows: Sequence[Row], target: str | None, config: str | None
) -> list[tuple[Row, Row]]:
    """Each row with the baseline row of ``target`` (or its own) and ``config`` (or its own)."""
    by_key = {(r.target, r.config): r for r in base_rows}
    pairs = []
    for row in rows:
        base = by_key.get((target or row.target, config or row.config))
        if base is not None:
            pairs.append((row, base))
    return pairs
