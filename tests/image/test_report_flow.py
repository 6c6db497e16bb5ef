"""kernel-report --lines says why, per line: live GRF bytes and the peak with the lines whose values
are live there, the part of each line inside a loop, and static stall sources, the lines adding up
to the row. Real compiles and the image's iga64 (kernel_flow); the analysis itself is checked
against IGA's own liveTotals in test_kernel_flow.py."""

from __future__ import annotations

import pytest

from tests.support import ROOT
from tests.support.reports import report_of
from xpukit.runtime.offline import line_view
from xpukit.runtime.offline.report_format import format_html, format_markdown
from xpukit.runtime.offline.report_model import Report

MATMUL = ROOT / "examples" / "matmul.py"
TILE = "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,num_warps=4"


@pytest.fixture(scope="module")
def matmul() -> dict:
    return report_of(f"{MATMUL}:matmul_kernel", ["pvc,bmg,ptl"], [TILE], lines=True)


def _kernel_lines(row: dict) -> dict[int, dict]:
    return {e["line"]: e for e in row["lines"] if e["file"] == str(MATMUL)}


def _line_of(text: str) -> int:
    return next(i for i, ln in enumerate(MATMUL.read_text().splitlines(), 1) if ln.strip() == text)


@pytest.mark.container
def test_every_line_has_live_bytes_loops_and_stalls_adding_up_to_the_row(matmul):
    for row in matmul["rows"]:
        assert row["error"] is None and row["flow_info"] == "", row
        lines = row["lines"]
        for entry in lines:
            assert len(entry["live"]["bytes"]) == len(entry["asm"]) == len(entry["loop_depth"])
            assert entry["live"]["peak_bytes"] == max(entry["live"]["bytes"], default=0)
            assert entry["in_loop"]["instructions"] <= entry["counts"]["instructions"]
        for kind, total in row["stalls"].items():
            assert total == sum(e["stalls"][kind] for e in lines), (row["target"], kind)
        assert sum(row["stalls"].values()) > 0
        live = row["live"]
        assert live["peak_bytes"] == max(e["live"]["peak_bytes"] for e in lines)
        assert 0 < live["peak_bytes"] <= live["grf_bytes"] == row["grf"] * (64 if row["target"] != "acm-g10" else 32)
        peak_entry = next(e for e in lines if live["peak_pc"] in [pc for pc, _ in e["asm"]])
        assert peak_entry["line"] == live["peak_line"]
        assert live["live_from_lines"] and set(live["live_from_lines"]) <= set(_kernel_lines(row))


@pytest.mark.container
def test_the_k_loop_holds_the_dpas_and_the_store_runs_once(matmul):
    """The matmul's one loop (over K) is found; every DPAS of the tl.dot line runs inside it and the
    tl.store line's instructions run once, after it."""
    dot, store = _line_of("acc += tl.dot(a, b)"), _line_of("tl.store(c_block, acc, boundary_check=(0, 1))")
    for row in matmul["rows"]:
        assert len(row["loops"]) == 1 and row["loops"][0]["depth"] == 1
        by_line = _kernel_lines(row)
        assert by_line[dot]["counts"]["dpas"] > 0
        assert by_line[dot]["in_loop"]["dpas"] == by_line[dot]["counts"]["dpas"]
        assert by_line[store]["in_loop"]["instructions"] == 0 and by_line[store]["counts"]["instructions"] > 0
        assert set(by_line[dot]["loop_depth"]) == {1}


@pytest.mark.container
def test_every_format_says_it(matmul):
    report = Report.from_dict(matmul)
    text = format_markdown(report)
    for row in report.rows:
        assert f"- {row.target} {TILE}: {line_view.flow_summary(row)}" in text
        assert row.live is not None and f"GRF peak {row.live.peak_bytes} of {row.live.grf_bytes} B" in text
    assert "| pvc | bmg | ptl |" in text and "L" in line_view.COMPACT_KEY
    page = format_html(report)
    assert "GRF peak" in page and "static stall sources" in page
