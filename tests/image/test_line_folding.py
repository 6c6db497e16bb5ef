"""Inlined code folds into its call site, also where IGC describes it with ``DW_AT_ranges`` (several
pieces) instead of one low/high pc: each call keeps its own counts. Real compiles with the image's
ocloc; the softmax's launch runs on the CPU device (``--launched-by``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.reports import report_of
from xpukit.runtime.kernels import kernel_report
from xpukit.runtime.offline.line_view import NO_LOCATION, format_lines_markdown
from xpukit.runtime.offline.report_model import Report
from xpukit.runtime.triton import debug_locations
from xpukit.targets import FAMILIES, FAMILY

SOFTMAX = ROOT / "examples" / "tutorial_02_fused_softmax.py"

TWO_SUMS = """import triton
import triton.language as tl

XPUKIT_KERNELS = {"two_sums": {"signature": "x_ptr:*fp32, out_ptr:*fp32", "constexprs": {"BLOCK": 256}}}


@triton.jit
def two_sums(x_ptr, out_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    a = tl.sum(x, axis=0)
    b = tl.sum(x * x, axis=0)
    tl.store(out_ptr, a)
    tl.store(out_ptr + 1, b)
"""


def _rows_by_line(row: dict, path: Path) -> dict[int, dict]:
    return {e["line"]: e for e in row["lines"] if e["file"] == str(path)}


@pytest.mark.container
def test_softmax_reductions_fold_into_their_lines(env):
    """tl.max and tl.sum (IGC: DW_AT_ranges) count on the kernel's lines 35 and 37, with the
    library lines in `via`; no row is left on standard.py."""
    kernel = f"{SOFTMAX}:softmax_kernel"
    launches = kernel_report.launch_configs(kernel, SOFTMAX, [])
    report = report_of(kernel, ["bmg", "pvc"], [], lines=True, launches=launches)
    for row in report["rows"]:
        assert not [e for e in row["lines"] if e["file"] and Path(e["file"]).name == "standard.py"], row["target"]
        lines = _rows_by_line(row, SOFTMAX)
        max_line = next(n for n, e in lines.items() if "tl.max" in e["source"])
        sum_line = next(n for n, e in lines.items() if "tl.sum" in e["source"])
        assert any(v.startswith("standard.py:") for v in lines[max_line]["via"])
        assert any(v.startswith("standard.py:") for v in lines[sum_line]["via"])
        assert sum(e["counts"]["instructions"] for e in row["lines"]) == row["counts"]["instructions"]


@pytest.mark.container
def test_two_sum_calls_keep_their_own_counts(env):
    path = env / "two_sums.py"
    path.write_text(TWO_SUMS)
    report = report_of(f"{path}:two_sums", ["bmg", "pvc"], [], lines=True)
    for row in report["rows"]:
        lines = _rows_by_line(row, path)
        first, second = (lines[n] for n in sorted(lines) if "tl.sum" in lines[n]["source"])
        assert first["line"] != second["line"]
        for entry in (first, second):
            assert entry["via"] and entry["counts"]["instructions"] > 0, (row["target"], entry)
        # IGC may schedule a few of a reduction's instructions outside every inlined range it records:
        # those keep their library row (no call site is known for them), never a neighbour's line.
        left = [e for e in row["lines"] if e["file"] and Path(e["file"]).name == "standard.py"]
        assert sum(e["counts"]["instructions"] for e in left) * 20 <= row["counts"]["instructions"]


DPAS_FAMILIES = [f.name for f in FAMILIES if f.triton.dpas]


def _dot_as_dpas(family: str) -> bool:
    """Triton 3.3 lowers tl.dot to DPAS only at 16 threads per warp (its annotate-module pass: "DPAS
    lowering only implemented for 16 threads per warp"): where the smallest sub-group is 8 (acm-g10,
    arl-h) a dot kernel keeps 32 and the dot becomes FMAs, as a launch on those GPUs gets."""
    return min(FAMILY[family].triton.sub_group_sizes) == 16


@pytest.mark.container
def test_dpas_counts_on_the_tl_dot_line_for_every_dpas_family(env):
    """Triton's IR gives the DPAS calls no location; the kit gives them the tl.dot's before the
    SPIR-V is made, so every DPAS family counts them on the `acc += tl.dot(a, b)` line, not on the
    `for` or a load before it. Where Triton 3.3 lowers the dot to FMAs instead (DPAS but sub-groups
    from 8: acm-g10, arl-h), those FMAs are on that line."""
    matmul = ROOT / "examples" / "matmul.py"
    dot_line = next(i for i, text in enumerate(matmul.read_text().splitlines(), 1) if "tl.dot(" in text)
    config = "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,num_warps=4"
    report = report_of(f"{matmul}:matmul_kernel", [",".join(DPAS_FAMILIES)], [config], lines=True)
    assert [row["target"] for row in report["rows"]] == DPAS_FAMILIES
    for row in report["rows"]:
        assert row["error"] is None, row
        if _dot_as_dpas(row["target"]):
            assert row["counts"]["dpas"] > 0, row["target"]
            with_dpas = {e["line"]: e["counts"]["dpas"] for e in row["lines"] if e["counts"]["dpas"]}
            assert with_dpas == {dot_line: row["counts"]["dpas"]}, row["target"]
        else:
            assert row["counts"]["dpas"] == 0, row["target"]
            on_dot = sum(e["counts"]["fma"] for e in row["lines"] if e["line"] == dot_line)
            assert on_dot >= 0.99 * row["counts"]["fma"] > 0, row["target"]


@pytest.mark.container
def test_what_has_no_location_is_its_own_row_never_a_neighbours(env, monkeypatch):
    """Where the kit cannot tell an instruction's op, it gives it DWARF's line 0 and the report shows
    one row, "(no location of its own)", instead of IGC counting it on the row before it. Forced here
    by turning off the passes that find the op, so Triton's location-less DPAS calls keep none."""
    monkeypatch.setattr(debug_locations, "_locate_calls", lambda lines, body, sites: 0)
    monkeypatch.setattr(debug_locations, "_locate_values", lambda lines, body, sites: 0)
    monkeypatch.setattr(debug_locations, "VERSION", "line-0-only")  # another compile key than the kit's
    matmul = ROOT / "examples" / "matmul.py"
    report = report_of(f"{matmul}:matmul_kernel", ["pvc"], ["BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,num_warps=4"], lines=True)
    (row,) = report["rows"]
    (nowhere,) = [e for e in row["lines"] if e["file"] is None]
    assert nowhere["line"] is None and nowhere["counts"]["dpas"] == row["counts"]["dpas"] == 16
    assert sum(e["counts"]["instructions"] for e in row["lines"]) == row["counts"]["instructions"]
    text = format_lines_markdown(Report.from_dict(report))
    assert f"| {NO_LOCATION} |" in text and NO_LOCATION == "(no location of its own)"
