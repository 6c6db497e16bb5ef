"""Which parameters of a ``@triton.jit`` kernel are pointers, read from its source before compiling.

Triton types each argument from its value: a small int becomes ``i32``, ``None`` a constexpr, an
xpukit ``USMAllocation`` its (untyped) address. A kernel that uses such an argument as a pointer
then fails deep in Triton's compiler (``PassManager::run failed``, a ``CompilationError``), not
with a word about the argument. Reading the kernel's source tells, for most kernels, which
parameters it uses as pointers, so the launch can refuse a bad argument by name first:

* **address** parameters: cast to a pointer in the kernel (``p.to(tl.pointer_type(...))``); the
  argument must be a live device address (an int or an allocation);
* **typed** parameters: the base of ``tl.load``/``tl.store``/``tl.atomic_*``/``tl.make_block_ptr``
  pointer arithmetic; the argument must be a typed pointer (an xpukit ``DeviceArray``).

A parameter the kernel compares with ``None`` (``if bias_ptr is not None:``) may be None: Triton
folds that branch away at compile time.

Calls to other ``@triton.jit`` functions are followed (positional and keyword arguments).
Anything the reading cannot decide (a parameter only reaching pointers through tuples, helpers
that are not JIT functions, ...) is left alone: Triton's own error then stands, as before.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from typing import Any

_MEMORY_OPS = {"load", "store", "make_block_ptr", "make_tensor_descriptor", "prefetch"}
_MAX_DEPTH = 4


@dataclasses.dataclass(frozen=True)
class PointerParams:
    address: frozenset[str]  # cast to a pointer in the kernel: an int address is right
    typed: frozenset[str]  # used as a typed pointer: a DeviceArray is right
    optional: frozenset[str] = frozenset()  # compared with None in the kernel: None is a legal value


def _is_pointer_cast(call: ast.Call) -> bool:
    """``x.to(tl.pointer_type(...))`` / ``x.to(pointer_type(...))`` / ``.to(dtype=tl.pointer_type(...))``."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "to"):
        return False
    targets = list(call.args[:1]) + [k.value for k in call.keywords if k.arg == "dtype"]
    for t in targets:
        if isinstance(t, ast.Call):
            f = t.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name == "pointer_type":
                return True
    return False


def _roots(node: ast.AST) -> set[str]:
    """Names at the base of pointer arithmetic: ``p``, ``p + offs``, ``offs + p``, ``(p + a) + b``."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        return _roots(node.left) | _roots(node.right)
    return set()


def _call_name(call: ast.Call) -> tuple[str | None, str]:
    """(module alias or None, attribute) of a call: ``tl.load`` -> ("tl", "load"), ``helper`` -> (None, "helper")."""
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        return f.value.id, f.attr
    if isinstance(f, ast.Name):
        return None, f.id
    return None, ""


def _analyse(fn: Any, depth: int, seen: dict[int, PointerParams]) -> PointerParams:
    key = id(fn)
    if key in seen:
        return seen[key]
    seen[key] = PointerParams(frozenset(), frozenset())  # recursion guard
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return seen[key]
    func = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)
    if func is None:
        return seen[key]
    params = [a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs]
    names = set(params)
    address: set[str] = set()
    typed: set[str] = set()
    optional: set[str] = set()
    glb = getattr(fn, "__globals__", {})
    for node in ast.walk(func):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name):
            if any(isinstance(c, ast.Constant) and c.value is None for c in node.comparators):
                optional.add(node.left.id)  # `if bias_ptr is not None:`: Triton folds the branch away
            continue
        if not isinstance(node, ast.Call):
            continue
        if _is_pointer_cast(node) and isinstance(node.func, ast.Attribute):
            address |= _roots(node.func.value) & names
            continue
        module, attr = _call_name(node)
        if attr in _MEMORY_OPS or attr.startswith("atomic_"):
            first = (
                node.args[0]
                if node.args
                else next((k.value for k in node.keywords if k.arg in ("pointer", "base")), None)
            )
            if first is not None:
                typed |= _roots(first) & names
            continue
        if depth >= _MAX_DEPTH or module is not None:
            continue
        callee = glb.get(attr)
        inner = getattr(callee, "fn", None)
        if inner is None or not hasattr(callee, "run"):  # not a JITFunction
            continue
        sub = _analyse(inner, depth + 1, seen)
        try:
            inner_params = list(inspect.signature(inner).parameters)
        except (TypeError, ValueError):
            continue
        pairs = list(zip(inner_params, node.args, strict=False))
        pairs += [(k.arg, k.value) for k in node.keywords if k.arg]
        for pname, value in pairs:
            outer = _roots(value) & names
            if pname in sub.address:
                address |= outer
            if pname in sub.typed:
                typed |= outer
    result = PointerParams(frozenset(address - typed), frozenset(typed), frozenset(optional & names))
    seen[key] = result
    return result


def pointer_params(jit_function: Any) -> PointerParams:
    """The pointer parameters of a ``@triton.jit`` function (its ``.fn`` is read)."""
    return _analyse(getattr(jit_function, "fn", jit_function), 0, {})
