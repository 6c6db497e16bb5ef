"""mypy (settings in pyproject.toml's [tool.mypy]) finds no error in xpukit/.

By hand, from the checkout: `mypy` (it reads files, stubs and strictness from pyproject.toml).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.support.launcher_stub import HIDDEN_TYPES, MODULES, build_on_host, stub_names
from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.unit


def _mypy(*args: str, cwd=REPO_ROOT) -> subprocess.CompletedProcess:
    assert shutil.which("mypy"), "mypy is missing: pip install --require-hashes -r env/lock/host.txt"
    return subprocess.run(
        [sys.executable, "-m", "mypy", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_mypy_clean_on_xpukit():
    result = _mypy()
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-1000:]
    assert "Success: no issues found" in result.stdout, result.stdout


def test_mypy_catches_a_type_error_and_reads_the_launcher_stub(tmp_path):
    """The check can fail: a wrong call into the compiled launcher (typed only by its stub) and a
    wrong return are reported, with the checkout's settings."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        'import _xpukit_launcher\n\n\ndef f() -> int:\n    _xpukit_launcher.bind(1, 2, 3)\n    return "text"\n'
    )
    config = str(REPO_ROOT / "pyproject.toml")
    result = _mypy("--config-file", config, "--cache-dir", str(tmp_path / "cache"), str(bad))
    assert result.returncode == 1, result.stdout
    assert '"bind" has incompatible type "int"' in result.stdout, result.stdout
    assert "Incompatible return value type" in result.stdout, result.stdout


@pytest.mark.parametrize("module", MODULES)
def test_stub_declares_what_the_c_module_exports(module):
    """Every name the C module adds (PyModule_AddObject / AddIntConstant / its method table) is in the
    stub and nothing else is (a private name such as the launcher's capsule _C_API, read only by C,
    stays out); tests/image/test_launcher_stub.py checks the same against the compiled module."""
    source = MODULES[module][0].read_text(encoding="utf-8")
    added = set(re.findall(r'PyModule_Add(?:Object|IntConstant)\(m, "(\w+)"', source))
    table = source[source.index("static PyMethodDef module_methods[]") :]
    table = table[: table.index("};")]
    added |= set(re.findall(r'\{"(\w+)",', table))
    added = {name for name in added if not name.startswith("_")}
    declared = set(stub_names(module)) - HIDDEN_TYPES
    assert added and declared == added, f"stub: {sorted(declared)}; {module}'s C exports: {sorted(added)}"


def test_stubs_match_the_compiled_launch_path(tmp_path):
    """mypy's stubtest against both modules compiled here from their C (scripts/build-launcher.sh, as
    the image's build stage runs it): every name, class flag (final) and what the C lets it
    introspect agree with the stubs."""
    build_on_host(tmp_path / "ext", MODULES, "tests/image/test_launcher_stub.py checks the stubs in the image")
    stub_dirs = os.pathsep.join(str(stub.parent) for _source, stub in MODULES.values())
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", *MODULES, "--concise"],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "ext"), "MYPYPATH": stub_dirs},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
