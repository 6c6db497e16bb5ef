"""Triton's own ``kernel[grid](...)`` through xpukit's UR driver on the CPU device.

The tests that run on an Intel GPU host; the others are in tests/image/test_driver.py.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tests.support import ROOT
from tests.support.driver import RNG
from tests.support.kernels import scale_raw

triton = pytest.importorskip("triton")


from xpukit.runtime.triton import (  # noqa: E402
    activate,
)

pytestmark = pytest.mark.container


@pytest.mark.gpu
def test_level_zero_gpu_through_the_driver(drv):
    """Needs an Intel GPU: target from UR device info, SPIR-V loaded unpatched, exact results."""
    from xpukit.runtime import ur

    n = 1 << 16
    x = RNG.standard_normal(n, dtype=np.float32)
    with ur.Session("gpu") as s, activate(s, driver=drv):
        assert s.device.backend == "level_zero"
        target = drv.get_current_target()
        assert target.backend == "xpu" and target.arch["architecture"] == s.device.ip_version << 8
        with s.from_numpy(x) as dx, s.alloc(x.nbytes) as dy:
            scale_raw[(triton.cdiv(n, 1024),)](dx.ptr, dy.ptr, 0.5, n, BLOCK=1024)
            s.synchronize()
            np.testing.assert_array_equal(dy.to_numpy(np.float32), x * np.float32(0.5))


@pytest.mark.gpu
def test_demo_loads_the_zebin_on_a_gpu():
    """Needs an Intel GPU: the demo compiles with Triton's zebin stage and loads the native binary
    through urProgramCreateWithBinary, saying so."""
    demo = str(ROOT / "examples" / "xpu_triton_ur.py")
    out = subprocess.run([sys.executable, demo, "--device", "gpu", "--n", "4096"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Triton's zebin via urProgramCreateWithBinary (driver JIT skipped)" in out.stdout
