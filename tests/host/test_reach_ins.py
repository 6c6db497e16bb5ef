"""Objects keep their own state: code in xpukit/ reads no other object's private fields. A
*reach-in* is ``x._name`` (or ``getattr(x, "_name")``) where ``x`` is not ``self``/``cls``; the
owner gives its callers a public surface instead. The few left are another library's fields the kit
has no public way to reach, each with a ``# reach-in: <reason>`` comment on its line.

Not reach-ins: namedtuple's public API (``_replace``, ``_asdict``, ``_fields``...), ctypes' structure
declarations (``_fields_``...), C++ symbols looked up in a ctypes library (Itanium-mangled ``_Z...``),
the kit's own tags on another library's objects (``_xpukit_...``) and a module's non-public names
(``ctypes._SimpleCData``: a module, not an object's state).

Run as a script (``python tests/host/test_reach_ins.py [root]``) it lists every reach-in, commented
or not, and their count.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.unit

NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}
CTYPES_DECLARATIONS = {"_fields_", "_pack_", "_anonymous_", "_type_", "_length_"}
REASON = "# reach-in:"
HANDFUL = 5  # the most reach-ins with a reason the house keeps


class ReachIn(NamedTuple):
    path: str
    line: int
    text: str
    reason: str  # "" when its line gives none


def _exempt(attr: str) -> bool:
    return (
        attr.startswith("__")
        or not attr.startswith("_")
        or attr in NAMEDTUPLE_API
        or attr in CTYPES_DECLARATIONS
        or attr.startswith("_Z")  # a mangled C++ symbol of a ctypes library (libsycl)
        or attr.startswith("_xpukit_")  # the kit's own attribute on a function or object it wrapped
    )


def _modules(tree: ast.AST) -> set[str]:
    """The names ``import`` statements bind to modules in ``tree``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.asname or alias.name.partition(".")[0] for alias in node.names)
    return names


def _own(receiver: ast.expr, modules: set[str]) -> bool:
    return isinstance(receiver, ast.Name) and (receiver.id in ("self", "cls") or receiver.id in modules)


def reach_ins(source: str, path: str = "<source>") -> list[ReachIn]:
    """Every reach-in of ``source``, with the reason its line gives."""
    lines = source.splitlines()
    found: list[ReachIn] = []
    tree = ast.parse(source, path)
    modules = _modules(tree)
    for node in ast.walk(tree):
        receiver, attr = None, ""
        if isinstance(node, ast.Attribute):
            receiver, attr = node.value, node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            receiver, attr = node.args[0], node.args[1].value
        if receiver is None or _exempt(attr) or _own(receiver, modules):
            continue
        line = lines[node.lineno - 1]
        reason = line.partition(REASON)[2].strip() if REASON in line else ""
        found.append(ReachIn(path, node.lineno, ast.unparse(node), reason))
    return sorted(found)


def package_reach_ins(root: Path) -> list[ReachIn]:
    out: list[ReachIn] = []
    for p in sorted(root.rglob("*.py")):
        if "__pycache__" not in p.parts:
            out += reach_ins(p.read_text(encoding="utf-8"), str(p.relative_to(root.parent)))
    return out


def test_the_counter_tells_reach_ins_from_the_rest():
    source = "\n".join(
        [
            "import ctypes",
            "def f(session, lib, t, Point, proxy):",
            "    session._ctx",  # a reach-in
            "    getattr(session, '_device', None)",  # so is this
            "    self._ctx, cls._registry, session.__class__",  # own state, a dunder
            "    t._replace(x=1), Point._fields, Point._fields_",  # namedtuple and ctypes APIs
            "    lib._ZNK4sycl3_V15queue9getNativeERi, t._xpukit_original",  # a C++ symbol, the kit's tag
            "    ctypes._SimpleCData",  # a module's name
            "    proxy._init_fn  # reach-in: the library offers no public way",
        ]
    )
    found = reach_ins(source)
    assert [(r.line, r.text, r.reason) for r in found] == [
        (3, "session._ctx", ""),
        (4, "getattr(session, '_device', None)", ""),
        (9, "proxy._init_fn", "the library offers no public way"),
    ]


def test_no_object_reads_another_objects_private_state():
    found = package_reach_ins(ROOT / "xpukit")
    bare = [f"{r.path}:{r.line}: {r.text}" for r in found if not r.reason]
    assert not bare, (
        "reading another object's private field; give its owner a public attribute or method (or move the "
        f"code to it), or, for another library's object, say why with `{REASON} <reason>` on the line:\n"
        + "\n".join(bare)
    )
    assert len(found) <= HANDFUL, "more reach-ins than a handful:\n" + "\n".join(f"{r.path}:{r.line}" for r in found)


if __name__ == "__main__":
    hits = package_reach_ins(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT / "xpukit")
    for r in hits:
        print(f"{r.path}:{r.line}: {r.text}" + (f"  [{r.reason}]" if r.reason else ""))
    print(len(hits), "reach-ins")
