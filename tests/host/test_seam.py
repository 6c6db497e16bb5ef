"""The seam between Python and the compiled launch path (xpukit/runtime/ur/seam.py,
xpukit/runtime/triton/seam.py): every attribute the C reads is declared there and exists on its
owner class, a rename is caught, the C holds none of those names itself, and its bind() refuses a
table that does not name exactly what it reads. Triton's own classes are checked in the image
(tests/image/test_seam.py); here, the kit's."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.launcher_stub import MODULES, build_on_host, sources
from xpukit.runtime.triton import seam as triton_seam
from xpukit.runtime.ur import seam
from xpukit.runtime.ur.seam import Read

pytestmark = pytest.mark.unit

KIT_READS = [r for r in (*seam.LAUNCHER_READS, *triton_seam.READS) if r.owner.startswith("xpukit.")]


def test_every_read_of_the_kits_classes_exists():
    assert len(KIT_READS) >= 15  # the launcher's 4, the dispatch's kit-owned ones and the Hit fields
    assert seam.missing(KIT_READS) == []


def test_roles_are_unique_and_the_tables_carry_them_all():
    for reads, table in (
        (seam.LAUNCHER_READS, seam.table(seam.LAUNCHER_READS)),
        (triton_seam.READS, triton_seam.table()),
    ):
        roles = [r.role for r in reads]
        assert len(roles) == len(set(roles))
        assert sorted(table) == sorted(roles)
    assert triton_seam.table()["HIT_SUBMIT"] == triton_seam.Hit._fields.index("submit")


# One class per way an attribute can be declared, then the same class with it renamed.
class _Slots:
    __slots__ = ("handle",)


class _SlotsRenamed:
    __slots__ = ("address",)


class _Init:
    def __init__(self) -> None:
        self.closed, self.other = False, 1


class _InitRenamed:
    def __init__(self) -> None:
        self.is_closed, self.other = False, 1


class _InitBase(_Init):
    pass


@dataclasses.dataclass
class _Fields:
    launches: int = 0


@dataclasses.dataclass
class _FieldsRenamed:
    launch_count: int = 0


class _Property:
    @property
    def ptr(self) -> int:
        return 0


class _PropertyRenamed:
    @property
    def address(self) -> int:
        return 0


class _Keyword:
    def run(self, *args: object, grid: object, warmup: bool) -> None: ...


class _KeywordRenamed:
    def run(self, *args: object, grid_fn: object, warmup: bool) -> None: ...


@pytest.mark.parametrize(
    ("owner", "renamed", "name"),
    [
        ("_Slots", "_SlotsRenamed", "handle"),
        ("_Init", "_InitRenamed", "closed"),
        ("_InitBase", "_InitRenamed", "closed"),
        ("_Fields", "_FieldsRenamed", "launches"),
        ("_Property", "_PropertyRenamed", "ptr"),
        ("_Keyword.run", "_KeywordRenamed.run", "grid"),
    ],
)
def test_the_check_catches_a_rename_of_each_kind(owner, renamed, name):
    here = __name__
    assert seam.missing([Read("R", f"{here}:{owner}", name, "")]) == []
    assert seam.missing([Read("R", f"{here}:{renamed}", name, "")]) == [f"{here}:{renamed}.{name} (R)"]


def test_the_check_catches_a_rename_in_the_kits_own_source(tmp_path, monkeypatch):
    """objects.py copied with ``raw_handle`` renamed (what a refactor would do): the declared reads of
    USMAllocation and Queue, pointed at the copy, are reported; the untouched ones are not."""
    source = (ROOT / "xpukit" / "runtime" / "ur" / "objects.py").read_text(encoding="utf-8")
    renamed = re.sub(r"\braw_handle\b", "unchecked_handle", source)
    assert renamed != source
    (tmp_path / "objects_renamed.py").write_text(renamed, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "objects_renamed", raising=False)
    reads = [r._replace(owner=r.owner.replace("xpukit.runtime.ur.objects", "objects_renamed")) for r in KIT_READS]
    reads = [r for r in reads if r.owner.startswith("objects_renamed:")]
    gone = seam.missing(reads)
    assert sorted(gone) == [
        "objects_renamed:Queue.raw_handle (QUEUE_HANDLE)",
        "objects_renamed:USMAllocation.raw_handle (ALLOCATION_HANDLE)",
    ]


def test_an_owner_that_is_gone_is_reported():
    assert seam.missing([Read("R", "xpukit.runtime.ur.objects:NoSuchClass", "x", "")])[0].startswith(
        "xpukit.runtime.ur.objects:NoSuchClass (R)"
    )


def _c_sources() -> list[Path]:
    return [path for module in MODULES for path in sources(module)] + sorted(
        p for d in ("ur", "triton") for p in (ROOT / "xpukit" / "runtime" / d).glob("_*.h")
    )


def test_the_c_holds_no_declared_attribute_name():
    """Every name the seam declares is absent from the C as a string literal: the C has only roles."""
    names = {r.name for r in (*seam.LAUNCHER_READS, *triton_seam.READS)}
    for path in _c_sources():
        literals = set(re.findall(r'"(\w+)"', path.read_text(encoding="utf-8")))
        assert not literals & names, f"{path.name} spells {sorted(literals & names)}: take them from the seam"


def test_every_role_the_c_reads_is_declared():
    """The C's role lists (X-macros) and the seam name the same roles, in both modules."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in _c_sources())
    for macro, reads in (
        ("XPUKIT_LAUNCHER_READS", seam.LAUNCHER_READS),
        ("XPUKIT_DISPATCH_READS", triton_seam.DISPATCH_READS),
        ("XPUKIT_HIT_FIELDS", triton_seam.HIT_READS),
    ):
        body = re.search(rf"#define {macro}\(X\)((?:[^\n]*\\\n)*[^\n]*)", text)
        assert body, macro
        assert sorted(re.findall(r"X\((\w+)\)", body.group(1))) == sorted(r.role for r in reads), macro


# What the compiled launch path must not know: foreign memory is resolved to the kit's own before it
# (xpukit/runtime/ur/interop/state.py, ForeignState.run), so no C source, header or stub names it.
FOREIGN_WORDS = re.compile(r"dpnp|dpctl|usm_ndarray|foreign|sycl|dlpack|kDLOneAPI", re.I)


def test_the_compiled_launch_path_knows_only_the_kits_memory():
    """``triton/*.c``, ``ur/_launcher*.c``, their headers and the modules' stubs name no dpnp,
    dpctl, usm_ndarray, foreign array or SYCL object, in code or in comments."""
    stubs = sorted((ROOT / "xpukit" / "runtime").glob("*/stubs/_xpukit_*.pyi"))
    files = _c_sources() + stubs
    assert len(stubs) == 2 and any(p.name == "_dispatch_grid.c" for p in files)
    assert FOREIGN_WORDS.search("a dpnp array's USM") and FOREIGN_WORDS.search("SyclQueue")  # the check can fail
    for path in files:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not FOREIGN_WORDS.search(line), f"{path.relative_to(ROOT)}:{n} names foreign memory: {line.strip()}"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Both modules compiled here from their C (scripts/build-launcher.sh, as the image builds them)."""
    return build_on_host(tmp_path_factory.mktemp("ext"), MODULES, "tests/image/test_seam.py binds the image's modules")


def _run(built: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Each module in a fresh interpreter: bind() is process state."""
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": f"{built}{os.pathsep}{ROOT}"},
        capture_output=True,
        text=True,
        check=False,
    )


def test_bind_refuses_a_table_that_does_not_name_what_the_c_reads(built):
    code = """
import _xpukit_launcher as L
from xpukit.runtime.ur import seam
from xpukit.runtime.ur.objects import DeviceArray, USMAllocation
t = seam.table(seam.LAUNCHER_READS)
for bad in ({k: v for k, v in t.items() if k != "ADDRESS"}, {**t, "NO_SUCH_ROLE": "x"}):
    try:
        L.bind(bad, USMAllocation, DeviceArray)
    except ValueError as e:
        print("refused:", e)
L.bind(t, USMAllocation, DeviceArray)
import _xpukit_dispatch as D
from xpukit.runtime.triton import seam as ts
t = ts.table()
try:
    D.bind({k: v for k, v in t.items() if k != "HIT_SUBMIT"})
except ValueError as e:
    print("refused:", e)
D.bind(t)
print("bound")
"""
    r = _run(built, code)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "bound"
    assert "no attribute name for the C's read ADDRESS" in lines[0]
    assert "the C has no read 'NO_SUCH_ROLE'" in lines[1]
    assert "no position for the C's read HIT_SUBMIT" in lines[2]


def test_nothing_runs_before_bind(built):
    """A module imported but never bound refuses to make a Launcher, a Dispatch or a key, in one line."""
    code = """
import contextvars, _xpukit_launcher as L, _xpukit_dispatch as D
for make in (lambda: L.Launcher(1, 0, (1, 1, 1, 1), "P", (1, 1, 1), L.AllocTable(), print, print),
             lambda: D.fast_key((), None, b"", L.AllocTable()),
             lambda: D.Dispatch(print, {}, b"", contextvars.ContextVar("c"), object)):
    try:
        make()
    except RuntimeError as e:
        print(e)
"""
    r = _run(built, code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("bind() has not been called") == 3, r.stdout


def test_the_loaders_bind_the_compiled_modules(built):
    code = """
from xpukit.runtime.triton import dispatch
from xpukit.runtime.ur import core, launcher
print(launcher.COMPILED, dispatch.COMPILED)
"""
    r = _run(built, code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True"]


def test_the_seam_modules_import_nothing_of_the_package_above_them():
    for mod in ("xpukit.runtime.ur.seam", "xpukit.runtime.triton.seam"):
        spec = importlib.util.find_spec(mod)
        assert spec and spec.origin
        text = Path(spec.origin).read_text(encoding="utf-8")
        imports = set(re.findall(r"^from (xpukit\.[\w.]+) import", text, re.M))
        assert imports <= {"xpukit.runtime.ur.seam"}, imports
