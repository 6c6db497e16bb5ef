"""What the compiled launch path's type stubs declare, read with ast: the host test holds each against
its C source, the image test against the compiled module. Two modules: the UR launcher
(xpukit/runtime/ur/_launcher.c, stub ur/stubs/_xpukit_launcher.pyi) and Triton's dispatch on it
(xpukit/runtime/triton/_dispatch.c, stub triton/stubs/_xpukit_dispatch.pyi)."""

from __future__ import annotations

import ast
from pathlib import Path

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
