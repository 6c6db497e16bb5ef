"""What the compiled launch path's type stubs declare, read with ast: the host test holds each against
its C source, the image test against the compiled module. Two modules: the UR launcher
(xpukit/runtime/ur/_launcher.c, stub ur/stubs/_xpukit_launcher.pyi) and Triton's dispatch on it
(xpukit/runtime/triton/_dispatch.c, stub triton/stubs/_xpukit_dispatch.pyi)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.support import ROOT

RUNTIME = ROOT / "xpukit" / "runtime"
# module -> (its main C source, which holds its module table; its stub); the launcher first (the dispatch imports it)
MODULES: dict[str, tuple[Path, Path]] = {
    "_xpukit_launcher": (RUNTIME / "ur" / "_launcher.c", RUNTIME / "ur" / "stubs" / "_xpukit_launcher.pyi"),
    "_xpukit_dispatch": (RUNTIME / "triton" / "_dispatch.c", RUNTIME / "triton" / "stubs" / "_xpukit_dispatch.pyi"),
}


def sources(module: str) -> list[Path]:
    """A module's C sources: its main file, then its parts (_NAME_PART.c beside it)."""
    main = MODULES[module][0]
    return [main, *sorted(main.parent.glob(f"{main.stem}_*.c"))]


def build_on_host(out: Path, modules: Iterable[str], elsewhere: str) -> Path:
    """``modules`` compiled into ``out`` from their C with scripts/build-launcher.sh, as the image's
    build stage runs it, for this interpreter; the test is skipped (naming ``elsewhere``, where it
    runs instead) on a host without gcc or Python's headers."""
    if not shutil.which("gcc") or not (Path(sysconfig.get_path("include")) / "Python.h").exists():
        pytest.skip(f"no gcc or Python headers here: {elsewhere}")
    paths = [str(p) for module in modules for p in sources(module)]
    built = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-launcher.sh"), str(out), *paths],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    return out


# Declared but exported by no name: Dispatch[grid] returns it.
HIDDEN_TYPES = {"_GridCall"}


def stub_names(module: str) -> dict[str, set[str]]:
    """Module-level names -> the methods and properties each class declares (empty for the others)."""
    tree = ast.parse(MODULES[module][1].read_text(encoding="utf-8"))
    names: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = set()
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = set()
    return names
