"""Triton code as users write it: a module that imports only triton and numpy defines
``@triton.autotune`` and ``@triton.heuristics`` kernels at import; Triton's own backend discovery
finds the kit's driver (the ``triton/backends/xpukit`` folder the image build installs), and the
kernels run inside an xpukit session."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")

from tests.support.runtime_required import skip_unless_in_image  # noqa: E402
from xpukit.runtime.triton import backend  # noqa: E402

pytestmark = pytest.mark.container

ROOT = Path(__file__).resolve().parents[2]

USER_MODULE = """
import numpy as np
import triton
import triton.language as tl

CONFIGS = [triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256})]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def scale(x, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(y + i, tl.load(x + i, mask=m) * 2.0, mask=m)


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def plus_one(x, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(x + i, tl.load(x + i) + 1.0)
    else:
        m = i < n
        tl.store(x + i, tl.load(x + i, mask=m) + 1.0, mask=m)
"""

MAIN = """
import sys
import numpy as np
import user_kernels  # decorates at import; never imports xpukit itself
import triton
from triton.runtime.driver import driver

# Resolved by Triton's discovery before this script imported xpukit (only the folder's driver did).
resolved = type(driver.default._obj).__name__
from xpukit.runtime import ur
from xpukit.runtime.triton import activate, empty, from_numpy

with ur.Session("cpu") as s, activate(s):
    for n in (1000, 1024):
        x = from_numpy(np.arange(n, dtype=np.float32))
        y = empty(n, np.float32)
        user_kernels.scale[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, y, n)
        user_kernels.plus_one[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, n, BLOCK=128)
        s.finish()
        assert np.array_equal(y.to_numpy(), np.arange(n, dtype=np.float32) * 2)
        assert np.array_equal(x.to_numpy(), np.arange(n, dtype=np.float32) + 1)
print("ok", resolved, user_kernels.scale.best_config is not None)
"""


def test_autotune_at_import_in_a_module_that_never_imports_xpukit(tmp_path):
    if not backend.is_installed():
        skip_unless_in_image("triton/backends/xpukit is not installed: python -m xpukit.runtime.triton.backend install")
    (tmp_path / "user_kernels.py").write_text(textwrap.dedent(USER_MODULE))
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN))
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}", TRITON_CACHE_DIR=str(tmp_path / "tc"))
    r = subprocess.run(
        [sys.executable, str(tmp_path / "main.py")], capture_output=True, text=True, env=env, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["ok", "URDriver", "True"]


def test_without_the_folder_triton_finds_no_driver(tmp_path):
    """The control: the same module fails at decoration ("0 active drivers") once the kit's entry
    is dropped from Triton's discovered backends."""
    if not backend.is_installed():
        skip_unless_in_image("triton/backends/xpukit is not installed")
    (tmp_path / "user_kernels.py").write_text(textwrap.dedent(USER_MODULE))
    code = "import triton.backends as b, sys\nb.backends.pop('xpukit')\nimport user_kernels\n"
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode != 0 and "0 active drivers" in r.stderr


def test_another_active_driver_keeps_tritons_choice(monkeypatch):
    """When another backend's driver is active (torch with an XPU device), the kit's folder stays
    inactive. A stand-in active backend replaces that driver: no torch XPU device exists here."""
    from triton.backends import Backend, backends
    from triton.backends.driver import DriverBase

    from xpukit.runtime.triton.backend import driver as kit_driver

    class ActiveElsewhere(DriverBase):
        @staticmethod
        def is_active():
            return True

    assert kit_driver.XpukitDriver.is_active() is True
    monkeypatch.setitem(backends, "torch-xpu-stand-in", Backend(compiler=None, driver=ActiveElsewhere))
    assert kit_driver.XpukitDriver.is_active() is False


def test_install_check_remove_in_a_folder(tmp_path):
    assert not backend.is_installed(tmp_path)
    folder = backend.install(tmp_path)
    assert folder == tmp_path / "xpukit" and backend.is_installed(tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == ["compiler.py", "driver.py"]
    (folder / "driver.py").write_text("# stale\n")
    assert not backend.is_installed(tmp_path)
    backend.install(tmp_path)  # replaces a stale folder
    assert backend.is_installed(tmp_path) and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert backend.remove(tmp_path) and not (tmp_path / "xpukit").exists()
    assert backend.main(["check", "--target", str(tmp_path)]) == 1
