"""kernel-report: every target x config compiled for real, one table; bad input as one line each.

The tests that run against a container engine; the others are in tests/image/test_kernel_report.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.invoke import invoke_with_cache


@pytest.mark.docker
def test_invoke_json_report_is_all_of_stdout(test_image, tmp_path):
    """`--format json` through invoke: stdout parses as the report; the kit's progress lines
    (profile, base, any build log) went to stderr. The same command again is a stored-report hit:
    no container (no "compiling" line), the same report; --diff finds no earlier report to compare."""
    command = ("kernel-report", "examples/kernels.py:scale_kernel", "--target", "pvc", "--format", "json")
    result = invoke_with_cache(*command, cache=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report and "xpukit:" not in result.stdout
    assert "xpukit: compiling every target x config in the image" in result.stderr
    assert list((tmp_path / "triton-cache").iterdir())  # Triton's cache persists in the kit's folder
    again = invoke_with_cache(*command, "--diff", cache=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "compiling" not in again.stderr and f"the report of {report['stored_at']}" in again.stderr
    assert json.loads(again.stdout) == report
    assert "No previous report of this kernel." in again.stderr  # JSON on stdout: the diff goes to stderr


class _Cells(HTMLParser):
    """The grid cells of the rendered kernel-report page: each td.cell's classes and data-* values."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict[str, str]] = []
        self.rendered: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "body":
            self.rendered = values.get("data-rendered")
        if tag == "td" and "cell" in values.get("class", "").split():
            self.cells.append(values)


def _render(page: Path, profile: Path) -> str:
    """The DOM after the page's script ran, from Debian's chromium headless (no network, no profile)."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed (.ci/run installs Debian's chromium)")
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
               "--dump-dom", page.as_uri()]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.docker
def test_html_report_of_seven_families_renders_in_chromium(test_image, tmp_path):
    """`kernel-report --target all` over two configs of a tl.dot matmul in one run, as one
    self-contained page: headless chromium renders the grid from the JSON in the page (the DOM it
    dumps has the cells only if the inline script ran), and every cell's marks (spills, GRF, SLM,
    DPAS/FMA, limits) are the report's own values."""
    kernel = "examples/matmul.py:matmul_kernel"
    configs = ["BLOCK_M=16,BLOCK_N=16,BLOCK_K=16,num_warps=1", "BLOCK_M=32,BLOCK_N=32,BLOCK_K=16,num_warps=2"]
    args = ["kernel-report", kernel, "--target", "all", *(a for c in configs for a in ("--config", c))]
    env = {**os.environ, "XPUKIT_PROFILE": "", "XPUKIT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("CI", None)
    run = [sys.executable, "-m", "invoke"]
    html = subprocess.run([*run, *args, "--format", "html"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900, check=False)  # fmt: skip
    assert html.returncode == 0, html.stderr[-2000:]
    assert html.stdout.lstrip().startswith("<!DOCTYPE html>") and "xpukit:" not in html.stdout
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html.stdout), "the page must fetch nothing"
    stored = subprocess.run([*run, *args, "--format", "json"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300, check=False)  # fmt: skip
    assert stored.returncode == 0 and "compiling" not in stored.stderr, stored.stderr[-2000:]
    report = json.loads(stored.stdout)
    assert report["targets"] == ["pvc", "bmg", "acm-g10", "arl-h", "mtl", "lnl", "ptl"]
    assert len(report["rows"]) == 14
    page = tmp_path / "report.html"
    page.write_text(html.stdout)
    parser = _Cells()
    parser.feed(_render(page, tmp_path / "chromium-profile"))
    assert parser.rendered == "14" and len(parser.cells) == 14
    rows = {(r["target"], r["config"]): r for r in report["rows"]}
    for cell in parser.cells:
        row = rows.pop((cell["data-target"], cell["data-config"]))
        counts = row["counts"]
        classes = set(cell["class"].split())
        spills = counts["sends"]["scratch_spill"] + counts["sends"]["scratch_fill"] > 0 or row["scratch_bytes"] > 0
        assert ("spill" in classes) == spills and ("ok" in classes) != spills
        assert ("over" in classes) == bool(row["limits"])
        assert cell["data-spill"] == f"{counts['sends']['scratch_spill']}/{counts['sends']['scratch_fill']}"
        assert int(cell["data-grf"]) == row["grf"] and int(cell["data-slm"]) == row["slm_bytes"]
        assert int(cell["data-dpas"]) == counts["dpas"] and int(cell["data-fma"]) == counts["fma"]
        assert cell["data-limits"] == "; ".join(row["limits"])
    assert not rows
    dpas = {c["data-target"] for c in parser.cells if int(c["data-dpas"]) > 0}
    assert dpas == {"pvc", "bmg", "lnl", "ptl"}  # DPAS and 2D block IO in the targets table
