"""The compiled launcher (_xpukit_launcher, built from xpukit/runtime/ur/_launcher.c) exports exactly
what its type stub declares: a name added, dropped or renamed in the C fails here, not in mypy's view."""

from __future__ import annotations

import pytest

from tests.support.launcher_stub import stub_names

pytestmark = pytest.mark.container
launcher = pytest.importorskip("_xpukit_launcher", reason="the compiled launcher is built in the image")

# Exported by no name: Dispatch[grid] returns it.
HIDDEN_TYPES = {"_GridCall"}


def _public(obj: object) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def test_stub_names_the_module_exports():
    declared = set(stub_names()) - HIDDEN_TYPES
    assert declared == _public(launcher), f"stub {sorted(declared)}, module {sorted(_public(launcher))}"


@pytest.mark.parametrize("name", sorted(set(stub_names()) - HIDDEN_TYPES))
def test_stub_names_each_type_s_methods(name):
    declared, obj = stub_names()[name], getattr(launcher, name)
    if not isinstance(obj, type):
        assert not declared
        return
    assert {n for n in declared if not n.startswith("_")} == _public(obj) - _public(object)
    for dunder in (n for n in declared if n.startswith("__")):
        assert hasattr(obj, dunder), f"{name}.{dunder} is in the stub, not in the module"
