"""No class in xpukit/ runs past ~250 lines: a class that long holds more than one subject (the
session once held device discovery, its USM ledger and DLPack export; each is its own module now).
A class that must be longer is listed here with its reason."""

from __future__ import annotations

import ast

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.unit

MAX_CLASS_LINES = 250
LONGER_WITH_A_REASON: dict[str, str] = {}  # "path:Class" -> why it stays whole


def class_sizes(source: str, path: str) -> dict[str, int]:
    """``"path:Class"`` -> lines from its ``class`` line to its last (nested classes too)."""
    return {
        f"{path}:{node.name}": node.end_lineno - node.lineno + 1
        for node in ast.walk(ast.parse(source, path))
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None
    }


def test_sizes_count_from_the_class_line_to_its_last():
    source = "class A:\n    x = 1\n\n    def f(self):\n        return 2\n\n\nclass B:\n    pass\n"
    assert class_sizes(source, "m.py") == {"m.py:A": 5, "m.py:B": 2}


def test_no_class_runs_past_the_limit():
    sizes: dict[str, int] = {}
    for p in sorted((ROOT / "xpukit").rglob("*.py")):
        sizes.update(class_sizes(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT))))
    long = {k: v for k, v in sizes.items() if v > MAX_CLASS_LINES and k not in LONGER_WITH_A_REASON}
    assert not long, f"classes over {MAX_CLASS_LINES} lines (split them by subject, or give a reason here): {long}"
