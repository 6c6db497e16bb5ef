"""The per-line report's plain-Python parts on the host: PCs from the ISA text, static occupancy
(checked against Intel's GPU Occupancy Calculator's own algorithm and device table), the per-line
Markdown/HTML, what changed per line between two saves, and "source changed since compile".
The real zebins and the seven families are tests/image/test_kernel_lines.py's."""

from __future__ import annotations

import hashlib
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.reports import as_report
from xpukit.errors import XpukitError
from xpukit.runtime.offline import isa, line_view
from xpukit.runtime.offline.line_view import SOURCE_CHANGED, format_lines_markdown, line_changes
from xpukit.runtime.offline.report_format import format_html, format_markdown
from xpukit.targets import iga_platform, occupancy

pytestmark = pytest.mark.unit

ISA = """L0:
(W)     mov (16|M0)              r255.0<1>:ud  0x0:ud
(W)     send.ugm (1|M0)   r1  r255  null:0  0xFF000000  0x6228E500  {A@1,$0} // wr:1+0, rd:2; load.ugm.d32x32t.a32
(W)     mov (1|M0)               null<1>:ud    r255.0<0;1,0>:ud                 {Compacted}
        sync.nop                             null                             {Compacted,I@1}
L1:
        dpas.8x8 (16|M0)         r10:f         r10:f   r20:hf  r30:hf           {Atomic}
(W)     send.gtwy (1|M0)         null     r112    null:0  0x0  0x02000010  {EOT} // wr:1+0, rd:0; end of thread
        illegal
"""


def test_pcs_come_from_the_one_parse():
    """16 bytes an instruction, 8 when compacted; labels take none; the counts are the tally's."""
    instructions = isa.parse_isa(ISA)
    assert [i.pc for i in instructions] == [0, 16, 32, 40, 48, 64, 80]
    assert isa.code_bytes(instructions) == 96
    assert [i.category for i in instructions][:2] == ["moves", "send:global_load"]
    counts = isa.tally(instructions)
    assert counts == isa.count_isa(ISA)
    assert (counts.instructions, counts.padding, counts.dpas, counts.sends["eot"]) == (4, 2, 1, 1)


# Intel GPU Occupancy Calculator (oneAPI-samples 6f5ade58, 2026-06, Tools/GPU-Occupancy-Calculator/
# index.html): its device table's entries for the families whose limits the kit shares with it, and its
# compute_ss_occupancy() in Python. bmg (SLM 128 there, 160 KB in compute-runtime) and mtl (128 vs 96)
# are left out: the kit follows the driver there (docs/isa.md).
CALCULATOR = {
    "pvc": {"threads": 64, "slm": 128, "steps": [0, 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128], "wgs": 64, "bars": 64},
    "acm-g10": {"threads": 128, "slm": 128, "steps": [0, 1, 2, 4, 8, 16, 32, 64], "wgs": 128, "bars": 128},
    "lnl": {"threads": 64, "slm": 128, "steps": [0, 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128], "wgs": 64, "bars": 64},
}


def calculator_work_groups(gpu: dict, wg: int, sg: int, slm_kb: int, large_grf: bool, barriers: bool) -> int:
    threads = gpu["threads"] // 2 if large_grf else gpu["threads"]
    per_wg = math.ceil(wg / sg)
    max_wg = gpu["bars"] if barriers else gpu["wgs"]
    by_slm = max_wg if slm_kb == 0 else gpu["slm"] // slm_kb
    return min(threads // per_wg, by_slm, max_wg)


@pytest.mark.parametrize("family", sorted(CALCULATOR))
@pytest.mark.parametrize(
    ("wg", "sg", "slm_kb", "large"),
    [(128, 16, 0, False), (256, 32, 0, False), (512, 16, 16, False), (64, 16, 48, False), (1024, 32, 8, False),
     (128, 16, 0, True), (256, 16, 24, True), (32, 16, 0, False)],
)  # fmt: skip
def test_occupancy_matches_the_occupancy_calculator(family, wg, sg, slm_kb, large):
    gpu = CALCULATOR[family]
    if large and family != "pvc":
        pytest.skip("the calculator offers large GRF for pvc only")
    if slm_kb not in gpu["steps"]:
        pytest.skip("the calculator only takes its SLM steps")
    ours = occupancy(family, sg, 256 if large else 128, wg, slm_kb * 1024, barriers=1)
    assert ours is not None
    assert ours["work_groups_per_xe_core"] == calculator_work_groups(gpu, wg, sg, slm_kb, large, True)


def test_occupancy_names_what_limits_it():
    assert occupancy("pvc", 16, 128, 128)["limited_by"] == "threads"
    assert occupancy("pvc", 16, 256, 128)["limited_by"] == "grf"
    assert occupancy("pvc", 16, 128, 128, 64 * 1024)["limited_by"] == "slm"
    big = occupancy("pvc", 16, 256, 1024)  # SIMD16 at 256 GRF: at most 512 work-items
    assert big is not None
    keys = (
        "threads_per_xve",
        "threads_per_xve_max",
        "work_groups_per_xe_core",
        "limited_by",
        "figures",
        "cannot_launch",
    )
    assert {k: big[k] for k in keys} == {"threads_per_xve": 0, "threads_per_xve_max": 4, "work_groups_per_xe_core": 0,
                   "limited_by": "work_group_size", "figures": [],
                   "cannot_launch": "work-group 1024 > 512 work-items on pvc (SIMD16, 256 GRF)"}  # fmt: skip
    ptl = occupancy("ptl", 16, 96, 64)
    assert ptl["threads_per_xve_max"] == 10 and occupancy("ptl", 16, 160, 64)["threads_per_xve_max"] == 6
    assert occupancy("not-a-family", 16, 128, 64) is None


def test_an_unknown_iga_platform_is_one_line():
    assert iga_platform("pvc") == "xehpc" and iga_platform("dg2") == "xehpg"
    with pytest.raises(XpukitError) as info:
        iga_platform("tgllp")  # ocloc knows it; the kit has no IGA platform for it
    line = info.value.one_line()
    assert "tgllp" in line and "FAMILIES" in line and "\n" not in line


def test_grf_mode_check_names_the_known_modes():
    from xpukit.runtime.offline.ocloc import GRF_MODES, check_grf_mode

    assert GRF_MODES == ("small", "large", "auto", "default")
    with pytest.raises(XpukitError, match="small, large, auto, default"):
        check_grf_mode("256")


def _counts(instr: int) -> dict:
    sends = dict.fromkeys(isa.SEND_KINDS, 0)
    sends["global_load"] = 1
    return isa.IsaCounts(instr, sends, dpas=0, math=0, moves=0, control_flow=0, barriers=0).to_dict()


def _report(source: list[str], lines: dict[int, int], first: int = 10) -> dict:
    entries = [{"file": "/k.py", "line": n, "source": source[n - first], "counts": _counts(c), "via": [],
                "asm": [[16 * n, f"add (1|M0) r{n}"]]} for n, c in lines.items()]  # fmt: skip
    row = {"target": "pvc", "config": "declared", "error": None, "counts": _counts(sum(lines.values())),
           "simd": 16, "grf": 128, "grf_mode": "default", "scratch_bytes": 0, "private_bytes": 0, "slm_bytes": 0,
           "work_group": 64, "lines": entries, "line_info": "", "limits": [], "grf_rule": "no spills",
           "spills": {"bytes_per_thread": 0, "n_spills": 0}, "occupancy": occupancy("pvc", 16, 128, 64)}  # fmt: skip
    kernel_source = {"file": "/k.py", "first": first, "lines": source, "sha256": "0"}
    return {"kernel": "k", "ocloc": "ocloc", "targets": ["pvc"], "configs": [{"label": "declared"}], "rows": [row],
            "lines": True, "kernel_source": kernel_source}  # fmt: skip


SOURCE = ["@triton.jit", "def k(x):", "    a = tl.load(x)  # __DATA__", "    tl.store(x, a)"]


def test_markdown_shows_the_source_with_counts_beside_it():
    text = format_markdown(as_report(_report(SOURCE, {11: 5, 12: 7, 13: 3})))
    table = [line for line in text.splitlines() if line.startswith("| 1")]
    assert table[0].startswith("| 10 | `@triton.jit` |")
    assert table[2].startswith("| 12 | `    a = tl.load(x)  # __DATA__` | 7 | ld 1 |")
    assert "8/8 thr/XVE" in text


def test_html_reads_without_script_and_keeps_placeholders_in_the_source():
    page = format_html(as_report(_report(SOURCE, {11: 5, 12: 7, 13: 3})))
    body = page.split("<script>")[0]
    assert "a = tl.load(x)  # __DATA__" in body and "<details><summary>" in body and "add (1|M0) r12" in body
    assert 'id="report-data"' in page and "__LINES__" not in page


def test_changes_follow_lines_that_moved():
    """A line inserted above moves the others down: only the new line and the one whose counts
    changed are marked, matched by text."""
    before = as_report(_report(SOURCE, {11: 5, 12: 7, 13: 3}))
    moved = [SOURCE[0], SOURCE[1], "    n = 1", SOURCE[2], SOURCE[3]]
    after = as_report(_report(moved, {11: 5, 12: 1, 13: 7, 14: 4}))
    changes = line_changes(before, after)
    assert changes[("declared", ("/k.py", 12))] == "edited"
    assert ("declared", ("/k.py", 13)) not in changes  # the load: same text, same counts, one line down
    assert changes[("declared", ("/k.py", 14))] == "pvc +1 instr"
    assert "changed since last save" in format_lines_markdown(after, changes)


def test_source_changed_since_compile_is_said(tmp_path):
    """The file's hash differs from the one the report compiled: the report says so and shows the
    source it compiled, not the file now."""
    from xpukit.host.commands.zebin import mark_source_changed

    kernel = tmp_path / "k.py"
    kernel.write_text("\n".join(SOURCE))
    report = as_report(_report(SOURCE, {12: 7}))
    assert report.kernel_source is not None
    report.kernel_source.sha256 = hashlib.sha256(kernel.read_bytes()).hexdigest()
    assert not mark_source_changed(report, kernel)
    kernel.write_text("# edited\n" + "\n".join(SOURCE))
    assert mark_source_changed(report, kernel)
    text = format_markdown(report)
    assert SOURCE_CHANGED in text and "| 12 | `    a = tl.load(x)  # __DATA__` | 7 |" in text
    assert SOURCE_CHANGED in format_html(report)


def test_three_families_or_more_take_one_column_each():
    """--target all --lines in a terminal: one compact cell per family and a key under the table;
    two families keep every column."""
    from xpukit.runtime.offline.line_view import COMPACT_KEY

    one = _report(SOURCE, {12: 7})
    rows = []
    for target, dpas in (("pvc", 16), ("bmg", 0), ("lnl", 2)):
        row = dict(one["rows"][0]) | {"target": target}
        entry = dict(row["lines"][0])
        entry["counts"] = entry["counts"] | {"dpas": dpas, "scratch_spill_bytes": 64 if target == "bmg" else 0}
        rows.append(row | {"lines": [entry]})
    text = format_lines_markdown(as_report(one | {"rows": rows, "targets": ["pvc", "bmg", "lnl"]}))
    assert "| line | source | pvc | bmg | lnl |" in text and COMPACT_KEY in text
    assert "| 12 | `    a = tl.load(x)  # __DATA__` | 7 s1 D16 | 7 s1 sp64 | 7 s1 D2 |" in text
    two = format_lines_markdown(as_report(one | {"rows": rows[:2], "targets": ["pvc", "bmg"]}))
    assert "pvc instr" in two and COMPACT_KEY not in two


def test_an_edited_line_keeps_its_own_numbers_before_and_after():
    """A line whose text changed is paired with the line it replaced: the watch says what it was and
    what it is, per family, instead of only "edited"; a baseline gives its delta the same way."""
    from xpukit.runtime.offline.baseline import apply_baseline

    before = as_report(_report(SOURCE, {11: 5, 12: 7, 13: 3}))
    edited = [SOURCE[0], SOURCE[1], "    a = tl.load(x) * 2", SOURCE[3]]
    after = as_report(_report(edited, {11: 5, 12: 9, 13: 3}))
    assert line_changes(before, after)[("declared", ("/k.py", 12))] == "edited: pvc 7 -> 9 instr"
    apply_baseline(after.rows[0], before.rows[0], after.kernel_source, before.kernel_source)
    lines = {e.line: e for e in after.rows[0].lines or []}
    assert lines[12].delta is not None and lines[12].delta.instructions == 2 and lines[13].delta.instructions == 0
    assert after.rows[0].baseline is not None and after.rows[0].baseline.counts == before.rows[0].counts


def test_program_order_view_marks_a_lines_instructions_and_back(tmp_path):
    """The HTML's ISA in program order: labels, the loop's start and end, each instruction with its
    line and live bytes; in Debian's headless chromium, pointing at a source line marks its
    instructions and pointing at an instruction marks its line."""
    from tests.support.browser import Browser

    data = _report(SOURCE, {11: 5, 12: 7, 13: 3})
    row = data["rows"][0]
    for entry in row["lines"]:
        pcs = [pc for pc, _ in entry["asm"]]
        entry["live"] = {"peak_bytes": 64 * entry["line"], "bytes": [64 * entry["line"] for _ in pcs]}
        entry["loop_depth"] = [1 if entry["line"] == 12 else 0 for _ in pcs]
    row["labels"] = [[176, "L176"], [192, "L192"]]
    row["loops"] = [{"start_pc": 192, "end_pc": 208, "header_pc": 192, "depth": 1}]
    page = tmp_path / "page.html"
    page.write_text(format_html(as_report(data)))
    text = page.read_text()
    assert "ISA in program order: 3 instructions, 1 loop" in text and "L176:" in text
    assert "loop (depth 1): [0000c0, 0000d0), back to 0000c0" in text and "end of loop (depth 1)" in text
    browser = Browser(tmp_path / "profile")
    try:
        browser.open(page.as_uri())
        browser.wait_for("document.body && document.body.dataset.rendered === '1'", 60)
        marked = """(function (selector) {
          var tr = document.querySelector(selector);
          tr.dispatchEvent(new MouseEvent('mouseenter'));
          var hl = Array.from(document.querySelectorAll('section[data-family] tr.hl')).map(function (t) {
            return (t.closest('table.isa') ? 'isa ' : 'src ') + t.dataset.line; });
          tr.dispatchEvent(new MouseEvent('mouseleave'));
          return hl.sort(); })"""
        assert browser.evaluate(f"{marked}('section[data-family] table.lines:not(.isa) tr[data-line=\"12\"]')") == [
            "isa 12",
            "src 12",
        ]
        assert browser.evaluate(f"{marked}('table.isa tr[data-line=\"13\"]')") == ["isa 13", "src 13"]
        assert browser.evaluate("document.querySelectorAll('tr.hl').length") == 0
    finally:
        browser.close()


def _read_code_span(span: str) -> str:
    """CommonMark's reading of a code span that is the whole string: the opening backtick run, the
    content up to the next run of the same length, one space stripped from each end when both are."""
    fence = re.match("`+", span)
    assert fence, span
    runs = [m for m in re.finditer("`+", span) if m.start() > 0 and len(m.group()) == len(fence.group())]
    assert runs and runs[0].end() == len(span), f"the span closes early: {span!r}"
    content = span[fence.end() : runs[0].start()]
    if len(content) >= 2 and content[0] == content[-1] == " " and content.strip(" "):
        content = content[1:-1]
    return content


@given(st.text(alphabet=st.sampled_from("`a |x"), min_size=1, max_size=40))
def test_a_source_line_with_backticks_is_one_code_span_of_its_text(text):
    """A kernel line may hold backticks (a comment, a string): its cell is one code span that reads
    back as the line, never a span closed early with the rest as Markdown."""
    assert _read_code_span(line_view.code_span(text)) == text


def test_another_files_text_saved_after_the_import_is_not_shown_as_compiled(tmp_path):
    """A helper's file (another file than the kernel's, read when its lines are shown) saved after
    the kernel's import, or gone, is in ``changed``: the report then says 'source changed since
    compile' and is not stored. One older than the import is the text compiled."""
    import os
    import time

    from xpukit.runtime.offline.lines import SourceFiles

    old, saved, gone = tmp_path / "old.py", tmp_path / "saved.py", tmp_path / "gone.py"
    old.write_text("a\nb\n")
    saved.write_text("c\n")
    os.utime(old, (time.time() - 60, time.time() - 60))
    sources = SourceFiles({str(tmp_path / "k.py"): b"kernel\n"}, since=time.time() - 30)
    assert sources.line(str(tmp_path / "k.py"), 1) == "kernel" and sources.line(str(old), 2) == "b"
    assert sources.changed == set()
    assert sources.line(str(saved), 1) == "c" and sources.line(str(gone), 1) == ""
    assert sources.changed == {str(saved), str(gone)}
    assert SourceFiles(since=None).line(str(saved), 1) == "c"  # no import time: nothing said
