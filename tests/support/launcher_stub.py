"""What xpukit/runtime/ur/stubs/_xpukit_launcher.pyi (the compiled launcher's types) declares, read
with ast: the host test holds it against _launcher.c, the image test against the compiled module."""

from __future__ import annotations

import ast

from tests.support import ROOT

STUB = ROOT / "xpukit" / "runtime" / "ur" / "stubs" / "_xpukit_launcher.pyi"


def stub_names() -> dict[str, set[str]]:
    """Module-level names -> the methods and properties each class declares (empty for the others)."""
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    names: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = set()
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = set()
    return names
