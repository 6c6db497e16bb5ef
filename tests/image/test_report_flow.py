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


@pytest.mark.container
def test_a_baseline_config_and_family_give_each_lines_delta(matmul):
    """--baseline-config and --baseline-target: each line's delta is its counts minus the same line's
    in the baseline's own report, the row names its baseline and carries its counts and live peak."""
    big = "BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,num_warps=4"
    against_big = report_of(f"{MATMUL}:matmul_kernel", ["pvc"], [TILE], lines=True, baseline_config=big)
    alone_big = report_of(f"{MATMUL}:matmul_kernel", ["pvc"], [big], lines=True)
    (row,), (base,) = against_big["rows"], alone_big["rows"]
    assert row["baseline"]["target"] == "pvc" and row["baseline"]["config"] == big
    assert row["baseline"]["counts"] == base["counts"] and row["baseline"]["live"] == base["live"]
    old = _kernel_lines(base)
    for number, entry in _kernel_lines(row).items():
        was = old.get(number)
        want = entry["counts"]["instructions"] - (was["counts"]["instructions"] if was else 0)
        assert entry["delta"]["instructions"] == want, number
        assert entry["live_delta"] == entry["live"]["peak_bytes"] - (was["live"]["peak_bytes"] if was else 0)
    text = format_markdown(Report.from_dict(against_big))
    assert f"against pvc {big}: " in text and "| vs baseline |" in text
    by_family = report_of(f"{MATMUL}:matmul_kernel", ["pvc,bmg"], [TILE], lines=True, baseline_target="pvc")
    pvc_row, bmg_row = by_family["rows"]
    assert pvc_row["baseline"]["target"] == bmg_row["baseline"]["target"] == "pvc"
    assert all(e["delta"]["instructions"] == 0 for e in pvc_row["lines"])  # itself
    assert bmg_row["baseline"]["counts"] == pvc_row["counts"]


@pytest.mark.container
def test_n_regs_is_set_beside_the_grf_igc_chose_not_one_triton_asked_for(matmul):
    """On ptl (Xe3: IGC picks the GRF count when none is asked) the row shows the zebin's GRF beside
    upstream's n_regs: 128 when nothing was asked, 256 when Triton asked for 256 (the spill retry)."""
    for row in matmul["rows"]:
        note = row["occupancy"]["n_regs"]
        if row["target"] != "ptl":
            assert note is None
            continue
        asked = "-cl-intel-256-GRF-per-thread" in row["build_flags"]
        assert note["grf_count"] == row["grf"] and note["upstream_n_regs"] == (256 if asked else 128)
