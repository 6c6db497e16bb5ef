"""Launcher.grow_with (both launchers): the callback that grows Triton's per-program scratch runs
before a launch of more programs than any before, never for a smaller or empty grid, and a failing
callback stops the launch. UR's enqueue is stood in for by a ctypes function (no UR runtime on the
host; the image's tests/image/test_launch.py runs the real one with real scratch)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.support.launcher_stub import build_on_host

pytestmark = pytest.mark.unit

# Run as a script with the launcher module to test (the twin here, the compiled one in a child).
SCRIPT = """
import ctypes, sys
from xpukit.runtime.ur import launcher as L

launched = []
VP, U32, SZP = ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_size_t)
PROTO = ctypes.CFUNCTYPE(ctypes.c_int32, VP, VP, U32, SZP, SZP, SZP, U32, VP, VP, U32, VP, VP)

@PROTO
def enqueue(queue, kernel, dims, offset, gsize, lsize, nargs, args, props, nwait, wait, event):
    launched.append(gsize[0] * gsize[1] * gsize[2] // 4)
    return 0

def refuse(*a):
    raise ValueError(a)

table = L.AllocTable()
fn = ctypes.cast(enqueue, ctypes.c_void_p).value
launcher = L.Launcher(1, 2, (0, 0, 0, fn), "i", (4, 1, 1), table, refuse, refuse)
grown = []
launcher.grow_with(grown.append)
for grid in ((5, 1, 1), (3, 1, 1), (2, 3, 1), (0, 1, 1), (2, 3, 1)):
    launcher.launch(1, *grid, (7,))

def fail(programs):
    raise MemoryError(programs)

launcher.grow_with(fail)  # a new callback starts again from 0 programs
try:
    launcher.launch(1, 2, 1, 1, (7,))
except MemoryError as e:
    failed = e.args
print(type(launcher).__module__, grown, launched, failed)
"""


def test_the_twin_grows_before_a_larger_grid_only():
    r = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env={**os.environ, "XPUKIT_PURE_PYTHON": "1", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split(" ", 1)[1].strip() == "[5, 6] [5, 3, 6, 6] (2,)", r.stdout


def test_the_compiled_launcher_grows_before_a_larger_grid_only(tmp_path):
    build_on_host(tmp_path, ["_xpukit_launcher"], "tests/image/test_launch.py runs the image's launcher")
    env = {k: v for k, v in os.environ.items() if k != "XPUKIT_PURE_PYTHON"}
    r = subprocess.run(
        [sys.executable, "-c", "import xpukit.runtime.ur.core\n" + SCRIPT],
        env={**env, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split(" ", 1) == ["_xpukit_launcher", "[5, 6] [5, 3, 6, 6] (2,)\n"], r.stdout
