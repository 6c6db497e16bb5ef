"""The compiled launch path (_xpukit_launcher from xpukit/runtime/ur/_launcher*.c, _xpukit_dispatch from
xpukit/runtime/triton/_dispatch*.c) exports exactly what its type stubs declare: a name added, dropped or
renamed in the C fails here, not in mypy's view."""

from __future__ import annotations

import importlib

import pytest

from tests.support.launcher_stub import HIDDEN_TYPES, MODULES, stub_names

pytestmark = pytest.mark.container


def _public(obj: object) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def _module(name: str):
    return pytest.importorskip(name, reason="the compiled launch path is built in the image")


@pytest.mark.parametrize("module", MODULES)
def test_stub_names_the_module_exports(module):
    declared = set(stub_names(module)) - HIDDEN_TYPES
    m = _module(module)
    assert declared == _public(m), f"stub {sorted(declared)}, module {sorted(_public(m))}"


@pytest.mark.parametrize(
    ("module", "name"), [(m, n) for m in MODULES for n in sorted(set(stub_names(m)) - HIDDEN_TYPES)]
)
def test_stub_names_each_type_s_methods(module, name):
    declared, obj = stub_names(module)[name], getattr(_module(module), name)
    if not isinstance(obj, type):
        assert not declared
        return
    assert {n for n in declared if not n.startswith("_")} == _public(obj) - _public(object)
    for dunder in (n for n in declared if n.startswith("__")):
        assert hasattr(obj, dunder), f"{name}.{dunder} is in the stub, not in the module"


def test_the_dispatch_runs_on_the_launcher_s_capsule():
    """_xpukit_dispatch reaches the launcher through its C API capsule, whose name the header fixes."""
    launcher = _module("_xpukit_launcher")
    _module("_xpukit_dispatch")
    assert type(launcher._C_API).__name__ == "PyCapsule"
    assert importlib.import_module("_xpukit_launcher") is launcher
