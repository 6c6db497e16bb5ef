"""The kernel report as text, and what changed between two reports: plain Python on the report's
JSON, so the host prints a cached report (and ``--diff``) without Triton, ocloc or a container.

Columns say what they measure and in which unit: per-thread scratch space (``scratch B/thr``, the
zebin's buffer size) is not spill traffic; spill traffic is the scratch sends in the ISA and the
bytes they move per thread (``spill st/ld`` and ``spill B st/ld``).
"""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Callable
from typing import Any

from xpukit.runtime.offline.counts import IsaCounts
from xpukit.runtime.offline.report_model import KernelConfig, Report, Row, WhatIf


def _pair(a: Any, b: Any) -> str:
    return f"{a}/{b}"


def _sends(c: IsaCounts, a: str, b: str) -> str:
    return _pair(c.sends[a], c.sends[b])


def _grf_mode(r: Row) -> str:
    mode = r.grf_mode or "default"
    return f"{mode}, 256 retry" if r.grf_retry else mode


Cell = Callable[[Row, IsaCounts], Any]

# (header, the cell's value from a row and its counts): a new column is one entry here
COLUMNS: tuple[tuple[str, Cell], ...] = (
    ("target", lambda r, c: r.target),
    ("config", lambda r, c: r.config),
    ("SIMD", lambda r, c: r.simd),
    ("GRF", lambda r, c: r.grf),
    ("GRF mode", lambda r, c: _grf_mode(r)),
    ("WG", lambda r, c: r.work_group),
    ("SLM B/WG", lambda r, c: r.slm_bytes),
    ("scratch B/thr", lambda r, c: r.scratch_bytes),
    ("private B/thr", lambda r, c: r.private_bytes),
    ("spill st/ld", lambda r, c: _sends(c, "scratch_spill", "scratch_fill")),
    ("spill B st/ld", lambda r, c: _pair(c.scratch_spill_bytes, c.scratch_fill_bytes)),
    ("instr", lambda r, c: c.instructions),
    ("global ld/st", lambda r, c: _sends(c, "global_load", "global_store")),
    ("SLM ld/st", lambda r, c: _sends(c, "slm_load", "slm_store")),
    ("2D ld/st", lambda r, c: _sends(c, "block2d_load", "block2d_store")),
    ("atomic", lambda r, c: c.sends["atomic"]),
    ("DPAS", lambda r, c: c.dpas),
    ("FMA", lambda r, c: c.fma),
    ("math", lambda r, c: c.math),
    ("ALU", lambda r, c: c.alu),
    ("mov", lambda r, c: c.moves),
    ("ctrl", lambda r, c: c.control_flow),
    ("barrier", lambda r, c: c.barriers),
    ("n_spills", lambda r, c: r.spills.n_spills if r.spills else None),
    ("occupancy", lambda r, c: _occupancy(r)),
    ("over limit", lambda r, c: over_limit(r)),
)
NOT_CHECKED = "not checked"  # no figures for the device: never "-" (none exceeded) nor 0


def _occupancy(r: Row) -> str:
    occ = r.occupancy
    if occ is None:
        return NOT_CHECKED
    text = (
        f"{occ.threads_per_xve:g}/{occ.threads_per_xve_max} thr/XVE, "
        f"{occ.work_groups_per_xe_core} WG/Xe core ({occ.limited_by})"
    )
    if occ.cannot_launch:
        text += ": cannot launch"
    return f"{text} [{'; '.join(occ.figures)}]" if occ.figures else text


def over_limit(r: Row) -> str:
    """The over-limit cell: what stops a launch first, then every limit the row exceeds; "-" when
    none is, "not checked" when the kit has no figures for the device (JSON ``limits`` null)."""
    if r.limits is None:
        return NOT_CHECKED
    refused = r.occupancy.cannot_launch if r.occupancy else None
    parts = ([f"cannot launch: {refused}"] if refused else []) + list(r.limits)
    return "; ".join(parts) or "-"


LEGEND = (
    "SLM B/WG: shared local memory per work-group; scratch B/thr: the zebin's per-thread scratch space; "
    "spill st/ld: scratch write/read sends (register spills/fills) and the bytes they move per thread; "
    "FMA: mad/mac/madm/dp4a; math: extended math unit; ALU: other arithmetic and logic; "
    "GRF mode: the requested mode and whether ocloc was rerun with -cl-intel-256-GRF-per-thread after spills; "
    "n_spills: scratch B/thr / (4 x SIMD), upstream's unit; "
    "occupancy: threads per XVE resident/at most at this GRF, work-groups per Xe core and what limits them, "
    "in brackets the figures used where compute-runtime and Intel's occupancy calculator disagree; "
    "over limit: the target's limits a row exceeds (xpukit/targets.py), first what stops it launching "
    "(SLM or work-items per work-group over the family's cap: 0 work-groups); -: none exceeded; "
    "not checked: the kit has no figures for this device."
)


def format_markdown(report: Report) -> str:
    """One Markdown table: a row per target x config; failed cells say why."""
    header = [name for name, _ in COLUMNS]
    lines = [
        f"**{report.kernel}** ({report.ocloc})",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    for row in report.rows:
        if row.counts is None:
            cells = [row.target, row.config, row.error or "failed"] + [""] * (len(header) - 3)
        else:
            cells = ["-" if (v := get(row, row.counts)) is None else str(v) for _, get in COLUMNS]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    if notes := row_notes(report):
        lines += ["", *(f"- {note}" for note in notes)]
    lines += ["", LEGEND]
    if report.lines:
        from xpukit.runtime.offline.line_view import format_lines_markdown

        lines += ["", format_lines_markdown(report)]
    return "\n".join(lines)


def launch_settings(config: KernelConfig) -> str:
    """What a recorded launch set besides its hints (a ``launch N`` label says none of it):
    ``BLOCK=64, num_warps=2, num_stages=3``."""
    return ", ".join(
        f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in {**config.constexprs, **config.options}.items()
    )


def row_notes(report: Report) -> list[str]:
    """What each config compiled (its specialization, once per config) and each row's warnings."""
    notes: list[str] = []
    seen: set[str] = set()
    launched = {c.label: c for c in report.configs if c.specialization and c.specialization.source == "launch"}
    for row in report.rows:
        if row.specialization is not None and row.config not in seen:
            seen.add(row.config)
            what = f" ({launch_settings(launched[row.config])})" if row.config in launched else ""
            notes.append(f"{row.config}{what}: specialization {row.specialization.describe()}")
    notes += [f"{row.target} {row.config}: warning: {w}" for row in report.rows for w in row.warnings]
    for row in report.rows:
        occ = row.occupancy
        if occ is None:
            continue
        if occ.what_if is not None and occ.what_if.next:
            notes.append(f"{row.target} {row.config}: occupancy's next steps: {next_steps(occ.what_if)}")
        if occ.n_regs is not None and occ.n_regs.differs:
            notes.append(
                f"{row.target} {row.config}: GRF {occ.n_regs.grf_count} chosen by IGC; upstream's launcher reports "
                f"n_regs {occ.n_regs.upstream_n_regs} for this build (intel-xpu-backend-for-triton #7416)"
            )
        if occ.calculator is not None and occ.calculator.prefilled:
            notes.append(f"{row.target}: Intel's occupancy calculator has no entry; pre-filled: {occ.calculator.url}")
    return list(dict.fromkeys(notes))


def next_steps(what_if: WhatIf) -> str:
    """``SLM 24 KB: 5 WG/Xe core (62.5%); num_warps 2: 16 WG/Xe core (100%)``: the nearest change each
    way that changes the row's occupancy."""
    parts = []
    for step in what_if.next:
        what = f"SLM {step.to // 1024} KB" if step.change == "slm_bytes" else f"num_warps {step.to}"
        parts.append(f"{what}: {step.work_groups_per_xe_core} WG/Xe core ({step.occupancy_pct:g}%, {step.limited_by})")
    return "; ".join(parts)


# What --diff compares, by name: what a kernel author changes a tile size or a loop for.
DIFF_METRICS: tuple[tuple[str, Cell], ...] = (
    ("instructions", lambda r, c: c.instructions),
    ("sends", lambda r, c: c.send_total),
    ("global loads", lambda r, c: c.sends["global_load"]),
    ("global stores", lambda r, c: c.sends["global_store"]),
    ("SLM loads", lambda r, c: c.sends["slm_load"]),
    ("SLM stores", lambda r, c: c.sends["slm_store"]),
    ("spill sends", lambda r, c: c.sends["scratch_spill"]),
    ("fill sends", lambda r, c: c.sends["scratch_fill"]),
    ("spill B/thr", lambda r, c: c.scratch_spill_bytes),
    ("fill B/thr", lambda r, c: c.scratch_fill_bytes),
    ("scratch B/thr", lambda r, c: r.scratch_bytes),
    ("GRF", lambda r, c: r.grf),
    ("GRF mode", lambda r, c: _grf_mode(r)),
    ("SLM B/WG", lambda r, c: r.slm_bytes),
    ("DPAS", lambda r, c: c.dpas),
    ("FMA", lambda r, c: c.fma),
    ("math", lambda r, c: c.math),
    ("ALU", lambda r, c: c.alu),
    ("over limit", lambda r, c: over_limit(r)),
)


def diff_reports(before: Report, after: Report) -> list[tuple[str, str, str, Any, Any]]:
    """(target, config, metric, before, after) for every metric that differs between two reports
    of one kernel; a cell only one report has, or that failed in one, is one line with metric "row"."""
    old = {(r.target, r.config): r for r in before.rows}
    new = {(r.target, r.config): r for r in after.rows}
    changes: list[tuple[str, str, str, Any, Any]] = []
    for key in list(dict.fromkeys([*new, *old])):
        a, b = old.get(key), new.get(key)
        state = [("absent" if r is None else "failed" if r.counts is None else "ok") for r in (a, b)]
        if a is None or b is None or a.counts is None or b.counts is None:
            if state[0] != state[1] or (a and b and a.error != b.error):
                changes.append((*key, "row", state[0], state[1]))
            continue
        for name, get in DIFF_METRICS:
            x, y = get(a, a.counts), get(b, b.counts)
            if x != y:
                changes.append((*key, name, x, y))
    return changes


def format_diff(before: Report, after: Report) -> str:
    """Markdown: what changed since the previous report of the same kernel."""
    changes = diff_reports(before, after)
    since = before.stored_at or "the previous report"
    if not changes:
        return f"No change since {since}."
    lines = [
        f"Changes since {since}:",
        "",
        "| target | config | metric | before | after | change |",
        "|---|---|---|---|---|---|",
    ]
    for target, config, metric, x, y in changes:
        delta = f"{y - x:+d}" if isinstance(x, int) and isinstance(y, int) and not isinstance(x, bool) else ""
        lines.append(f"| {target} | {config} | {metric} | {x} | {y} | {delta} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- one HTML page

_HTML = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kernel-report: __TITLE__</title>
__HEAD__
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; }
th, td { border: 1px solid #bbb; padding: .35em .6em; vertical-align: top; }
th { background: #f2f2f2; text-align: left; }
td.cell.ok { background: #eef8ee; }
td.cell.spill { background: #fde8e6; }
td.cell.over { outline: 3px solid #c00; outline-offset: -3px; }
td.cell.error { background: #eee; color: #600; }
.tag { display: inline-block; margin-right: .4em; padding: 0 .3em; border-radius: 3px; font-size: 12px; }
.tag.dpas { background: #d6e6ff; } .tag.fma { background: #fff1c2; } .tag.spill { background: #f7b7ae; }
ul.notes li.warning { color: #900; } table.what-if td.own { font-weight: bold; background: #e8f0ff; }
.legend { margin-top: 1em; color: #555; max-width: 60em; }
__LINES_CSS__
</style>
</head>
<body>
__TOP__<h1>__TITLE__</h1>
<p id="compiler"></p>
<table id="grid"><thead></thead><tbody></tbody></table>
__NOTES__<p class="legend">Rows: targets; columns: configs. Red: the kernel spills (scratch sends or per-thread scratch
space). Red outline: over a target limit (SLM, GRF, sub-group, work-group; xpukit/targets.py; SLM or work-items per
work-group over the family's cap: it cannot launch); no outline for a device the kit has no figures for: not
checked. Occupancy, and the figures it used where compute-runtime and Intel's occupancy calculator disagree: the
JSON and the per-line view. DPAS: matrix
instructions; FMA: mad/mac where tl.dot has no DPAS. GRF: registers per thread. Grey: the cell failed to compile.</p>
__LINES__
<script type="application/json" id="report-data">__DATA__</script>
<script>
(function () {
  "use strict";
  var report = JSON.parse(document.getElementById("report-data").textContent);
  document.getElementById("compiler").textContent = report.ocloc;
  var configs = report.configs.map(function (c) { return c.label; });
  var head = document.querySelector("#grid thead"), body = document.querySelector("#grid tbody");
  var tr = document.createElement("tr"), th = document.createElement("th");
  th.textContent = "target \\\\ config"; tr.appendChild(th);
  configs.forEach(function (c) { var h = document.createElement("th"); h.textContent = c; tr.appendChild(h); });
  head.appendChild(tr);
  var rows = {};
  report.rows.forEach(function (r) { rows[r.target + "\\u0000" + r.config] = r; });
  function tag(cls, text) {
    var s = document.createElement("span");
    s.className = "tag " + cls;
    s.textContent = text;
    return s;
  }
  report.targets.forEach(function (t) {
    var line = document.createElement("tr"), name = document.createElement("th");
    name.textContent = t; line.appendChild(name);
    configs.forEach(function (c) {
      var r = rows[t + "\\u0000" + c], td = document.createElement("td");
      td.className = "cell"; td.dataset.target = t; td.dataset.config = c;
      if (!r || !r.counts) {
        td.classList.add("error"); td.dataset.error = r ? (r.error || "") : "missing";
        td.textContent = r ? (r.error || "failed") : "missing";
      } else {
        var k = r.counts, st = k.sends.scratch_spill, ld = k.sends.scratch_fill;
        var spills = st + ld > 0 || (r.scratch_bytes || 0) > 0, limits = r.limits || [];
        td.classList.add(spills ? "spill" : "ok");
        if (limits.length) { td.classList.add("over"); }
        td.dataset.spill = st + "/" + ld; td.dataset.scratch = r.scratch_bytes;
        td.dataset.grf = r.grf; td.dataset.slm = r.slm_bytes;
        td.dataset.dpas = k.dpas; td.dataset.fma = k.fma; td.dataset.limits = limits.join("; ");
        var summary = "GRF " + r.grf + " \\u00b7 SLM " + r.slm_bytes + " B \\u00b7 " + k.instructions + " instr ";
        td.appendChild(document.createTextNode(summary));
        td.appendChild(document.createElement("br"));
        td.appendChild(k.dpas > 0 ? tag("dpas", "DPAS " + k.dpas) : tag("fma", "FMA " + k.fma));
        if (spills) { td.appendChild(tag("spill", "spill " + st + "/" + ld + ", " + r.scratch_bytes + " B/thr")); }
        if (limits.length) {
          var over = document.createElement("div");
          over.textContent = "over: " + limits.join("; ");
          td.appendChild(over);
        }
      }
      line.appendChild(td);
    });
    body.appendChild(line);
  });
  document.body.dataset.rendered = String(report.rows.length);
})();
__LINES_SCRIPT__
</script>
</body>
</html>
"""


def format_html(report: Report, changes: dict[Any, str] | None = None, head: str = "", top: str = "") -> str:
    """One self-contained page: a target-by-config grid built in the browser by a small inline script
    from the report's JSON (embedded in the page); nothing is fetched when it is viewed. With
    ``--lines`` the page also carries the per-line view as HTML (readable without the script);
    ``changes``: what changed per line since the last save (``--watch``); ``head``: extra head tags;
    ``top``: HTML first in the body (the watch's status line). ``head`` and ``top`` are the caller's
    markup, never the report's text."""
    from xpukit.runtime.offline import line_view

    title = html.escape(f"{report.kernel} ({len(report.targets)} targets x {len(report.configs)} configs)")
    with_lines = report.lines
    values = {
        "TITLE": title,
        "HEAD": head,
        "TOP": top,
        "DATA": script_json(_without_asm(report)),
        "LINES": line_view.lines_html(report, changes) if with_lines else "",
        "LINES_CSS": line_view.LINES_CSS if with_lines else "",
        "LINES_SCRIPT": line_view.LINES_SCRIPT if with_lines else "",
        "NOTES": _notes_html(report),
    }
    # One pass: a placeholder's text inside a value (the kernel's source) is never replaced.
    return re.sub(r"__(TITLE|HEAD|TOP|DATA|LINES_CSS|LINES_SCRIPT|LINES|NOTES)__", lambda m: values[m.group(1)], _HTML)


def _notes_html(report: Report) -> str:
    """What each config compiled and each row's warnings, as the Markdown's notes say them."""
    notes = row_notes(report)
    tables = "".join(what_if_html(row) for row in report.rows)
    if not notes:
        return tables
    items = "".join(
        f'<li class="{"warning" if ": warning: " in n else "specialization"}">{html.escape(n)}</li>' for n in notes
    )
    return f'<ul class="notes" id="notes">{items}</ul>\n{tables}'


def what_if_html(row: Row) -> str:
    """The row's occupancy what-if (work-groups per Xe core and occupancy, num_warps by SLM), its own
    cell marked: the table Intel's calculator draws."""
    table = row.occupancy.what_if if row.occupancy else None
    if table is None:
        return ""
    own = table.row or {}
    head = "".join(f"<th>{b // 1024} KB</th>" for b in table.slm_bytes)
    body = []
    for i, warps in enumerate(table.num_warps):
        cells = []
        for j, slm in enumerate(table.slm_bytes):
            text = f"{table.work_groups_per_xe_core[i][j]} ({table.occupancy_pct[i][j]:g}%)"
            mine = own.get("num_warps") == warps and own.get("slm_bytes") == slm
            cells.append(
                f'<td class="{"own" if mine else "n"}" title="{html.escape(table.limited_by[i][j])}">{text}</td>'
            )
        body.append(f"<tr><th>{warps}</th>{''.join(cells)}</tr>")
    summary = html.escape(f"{row.target} {row.config}: occupancy what-if (WG/Xe core, occupancy) by num_warps x SLM")
    return (
        f'<details class="what-if"><summary>{summary}</summary><table class="what-if">'
        f"<thead><tr><th>warps \\ SLM</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"<p>{html.escape(table.assumes)}</p></details>\n"
    )


def script_json(value: Any) -> str:
    """JSON to put inside a <script> element. ``<`` (and ``>``, ``&``) become \\u escapes, which
    JSON.parse reads back as the same characters: no text in the value can end the element
    (``</script>``) or switch the HTML parser into its escaped states (``<!--``, ``<script>``), which
    would swallow the rest of the page into the script."""
    import json

    text = json.dumps(value, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _without_asm(report: Report) -> dict[str, Any]:
    """The report for the page's embedded JSON: the instructions are in the HTML already."""
    rows = [dataclasses.replace(r, lines=None) for r in report.rows]
    return dataclasses.replace(report, rows=rows).to_dict()
