"""Render kernel-report's HTML page in Debian's headless chromium and read its grid back."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest


class _Cells(HTMLParser):
    """The grid cells of the rendered page: each td.cell's attributes, and the body's data-rendered."""

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


def render_cells(page: Path, profile: Path) -> list[dict[str, str]]:
    """The DOM after the page's script ran (chromium --dump-dom: no network, a fresh profile), as
    the grid's cells. A page whose script did not run has no cells and no data-rendered mark."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed (.ci/run installs Debian's chromium)")
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
               "--dump-dom", page.as_uri()]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    parser = _Cells()
    parser.feed(result.stdout)
    assert parser.rendered is not None, "the page's script did not run"
    assert int(parser.rendered) == len(parser.cells)
    return parser.cells


def check_cells(cells: list[dict[str, str]], report: dict[str, Any]) -> None:
    """Every rendered cell is one report row, marked by the row's own values; no row is missing."""
    rows = {(r["target"], r["config"]): r for r in report["rows"]}
    assert len(cells) == len(rows)
    for cell in cells:
        row = rows.pop((cell["data-target"], cell["data-config"]))
        classes = set(cell["class"].split())
        counts = row["counts"]
        if counts is None:
            assert "error" in classes and cell["data-error"] == (row["error"] or "")
            continue
        sends = counts["sends"]
        spills = sends["scratch_spill"] + sends["scratch_fill"] > 0 or (row["scratch_bytes"] or 0) > 0
        assert ("spill" in classes) == spills and ("ok" in classes) != spills
        assert ("over" in classes) == bool(row["limits"])
        assert cell["data-spill"] == f"{sends['scratch_spill']}/{sends['scratch_fill']}"
        assert int(cell["data-grf"]) == row["grf"] and int(cell["data-slm"]) == row["slm_bytes"]
        assert int(cell["data-dpas"]) == counts["dpas"] and int(cell["data-fma"]) == counts["fma"]
        assert cell["data-limits"] == "; ".join(row["limits"])
    assert not rows
