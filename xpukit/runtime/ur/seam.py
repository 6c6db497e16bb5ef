"""The seam between Python and the compiled launch path: every attribute the C reads from a Python
object the kit (or Triton) owns, declared once, here and in :mod:`xpukit.runtime.triton.seam`.

Each extension has a ``bind(table)`` that its loader calls once, right after import
(:func:`xpukit.runtime.ur.launcher.load_extension`, :mod:`xpukit.runtime.triton.dispatch`):
``table`` maps the C's name for a read (its *role*, an identifier of the C) to the attribute's name
(or, for a field of a record tuple, its position). The C interns exactly those names and refuses a
table with a role missing or one it does not know, so the two sides cannot drift apart at import;
:func:`missing` (run by ``tests/host/test_seam.py`` and ``tests/image/test_seam.py``) fails when a
declared name no longer exists on its owner class, so a rename in Python cannot silently send every
launch down the slow path (or break it) at launch time. Imports nothing of the package.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import textwrap
from collections.abc import Iterable
from typing import NamedTuple


class Read(NamedTuple):
    """One attribute the C reads: ``role`` (the C's name for it), ``owner`` (``"module:Class"``, the
    class whose instances or class object carry it; ``"module:Class.method"`` for a keyword the C
    passes to that method), ``name`` (the attribute or keyword) and ``use`` (what the C does with it)."""

    role: str
    owner: str
    name: str
    use: str


# What _xpukit_launcher (ur/_launcher*.c) reads. A type registered with bind() (USMAllocation,
# DeviceArray) is recognised by identity, so its slots are read at their offsets.
LAUNCHER_READS: tuple[Read, ...] = (
    Read(
        "ADDRESS",
        "xpukit.runtime.ur.objects:DeviceArray",
        "ptr",
        "an argument's device address when it is not the kit's own memory (USMAllocation.ptr too; a checked "
        "foreign array's typed pointer and any object with an int .ptr); looked up without raising when absent",
    ),
    Read(
        "ALLOCATION_HANDLE",
        "xpukit.runtime.ur.objects:USMAllocation",
        "raw_handle",
        "the address of the kit's own allocation, read from the instance without the .ptr property (None: closed)",
    ),
    Read("ARRAY_ALLOC", "xpukit.runtime.ur.objects:DeviceArray", "alloc", "a DeviceArray's USMAllocation (a slot)"),
    Read(
        "ARRAY_DTYPE",
        "xpukit.runtime.ur.objects:DeviceArray",
        "dtype",
        "device memory's dtype for the specialization key (a slot; any other object's .dtype, if it has one)",
    ),
)


def table(reads: Iterable[Read]) -> dict[str, str]:
    """What ``bind`` takes: role -> attribute name."""
    return {r.role: r.name for r in reads}


def _declared(owner: str) -> set[str]:
    """The names ``owner`` declares: a class's attributes (:func:`attribute_names`), a function's parameters."""
    module, _, name = owner.partition(":")
    obj: object = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    if isinstance(obj, type):
        return attribute_names(obj)
    if callable(obj):
        return set(inspect.signature(obj).parameters)
    raise TypeError(f"{owner} is neither a class nor a function")


def _assigned_on_self(cls: type) -> set[str]:
    """Names a method of ``cls`` (its own source, not its bases') assigns as ``self.NAME``."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return set()
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.args.args:
            continue
        me = node.args.args[0].arg
        for sub in ast.walk(node):
            targets: list[ast.expr] = []
            if isinstance(sub, ast.Assign):
                targets = list(sub.targets)
            elif isinstance(sub, ast.AnnAssign | ast.AugAssign):
                targets = [sub.target]
            for t in targets:
                for el in t.elts if isinstance(t, ast.Tuple) else [t]:
                    if isinstance(el, ast.Attribute) and isinstance(el.value, ast.Name) and el.value.id == me:
                        found.add(el.attr)
    return found


def attribute_names(cls: type) -> set[str]:
    """Every attribute an instance of ``cls`` can carry by declaration: class attributes, methods and
    properties on the MRO, ``__slots__``, dataclass or NamedTuple fields, and the names the classes'
    own methods assign on ``self`` (read from their source)."""
    names: set[str] = set(dir(cls))
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.update((slots,) if isinstance(slots, str) else slots)
        names.update(_assigned_on_self(klass))
    if dataclasses.is_dataclass(cls):
        names.update(f.name for f in dataclasses.fields(cls))
    names.update(getattr(cls, "_fields", ()))
    return names


def missing(reads: Iterable[Read]) -> list[str]:
    """``"owner.name (role)"`` for every declared read whose owner no longer has that attribute (or
    whose owner is gone): what a rename on the Python side would break."""
    gone: list[str] = []
    for r in reads:
        try:
            names = _declared(r.owner)
        except (ImportError, AttributeError, TypeError, ValueError) as e:
            gone.append(f"{r.owner} ({r.role}): {e}")
            continue
        if r.name not in names:
            gone.append(f"{r.owner}.{r.name} ({r.role})")
    return gone


__all__ = ["LAUNCHER_READS", "Read", "attribute_names", "missing", "table"]
