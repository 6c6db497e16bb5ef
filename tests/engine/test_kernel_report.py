"""kernel-report: every target x config compiled for real, one table; bad input as one line each.

The tests that run against a container engine; the others are in tests/image/test_kernel_report.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.support.invoke import invoke_with_cache
from tests.support.report_page import check_cells, render_cells
from xpukit.targets import FAMILIES


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


@pytest.mark.docker
def test_invoke_json_names_host_paths_and_keeps_errors_off_stdout(test_image, tmp_path):
    """Under `--format json` the image's error line goes to stderr (stdout stays empty, not a line of
    text where JSON is expected); a report names the kernel's file as it was given, in every field
    (`source`, `kernel_source.file`, each line's `file`), never the container's /workspace."""
    kernel = ("kernel-report", "examples/kernels.py:scale_kernel", "--target", "pvc", "--format", "json")
    bad = invoke_with_cache(*kernel, "--config", "BLOCK=abc", cache=tmp_path)
    assert bad.returncode != 0 and bad.stdout == "", bad.stdout
    errors = [ln for ln in bad.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and "BLOCK" in errors[0] and "Traceback" not in bad.stderr, bad.stderr
    result = invoke_with_cache(*kernel, "--lines", cache=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    files = {entry["file"] for row in report["rows"] for entry in row["lines"]}
    assert report["source"] == report["kernel_source"]["file"] == "examples/kernels.py"
    assert "examples/kernels.py" in files and not any(f and f.startswith("/workspace") for f in files), files
    stored = [p.read_text() for p in (tmp_path / "kernel-reports").glob("*.json")]
    assert len(stored) == 1 and "/workspace/" not in stored[0] and str(ROOT / "examples" / "kernels.py") in stored[0]


@pytest.mark.docker
def test_html_report_of_every_family_renders_in_chromium(test_image, tmp_path):
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
    assert report["targets"] == [f.name for f in FAMILIES]  # the image's ocloc builds every family
    assert len(report["rows"]) == 2 * len(FAMILIES)
    page = tmp_path / "report.html"
    page.write_text(html.stdout)
    cells = render_cells(page, tmp_path / "chromium-profile")
    check_cells(cells, report)
    dpas = {c["data-target"] for c in cells if int(c.get("data-dpas", "0")) > 0}
    # Triton 3.3 makes DPAS where the family's properties have DPAS and 2D block IO (acm-g10 and
    # arl-h have DPAS without 2D block IO: their matmul is FMAs)
    assert dpas == {f.name for f in FAMILIES if f.triton.dpas and f.triton.block_io_2d}
