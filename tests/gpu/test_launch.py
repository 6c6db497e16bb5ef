"""Triton -> UR launches on the CPU device: exact results, argument errors, the program cache.

The tests that run on an Intel GPU host; the others are in tests/image/test_launch.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.kernels import scale_typed
from tests.support.launch import BLOCK, TYPED_SIG
from xpukit.runtime import ur
from xpukit.runtime.triton.launch import ProgramCache, TritonKernel

pytestmark = pytest.mark.container


@pytest.mark.gpu
def test_gpu_level_zero_scale_exact(tmp_path):
    """Needs an Intel GPU with Level Zero; skipped elsewhere (cannot run on the CPU-only hosts)."""
    try:
        s = ur.Session("gpu")
    except (ur.DeviceNotFound, ur.LoaderNotFound) as exc:
        pytest.skip(f"needs an Intel GPU: {exc.one_line()}")
    with s:
        assert s.device.type == "gpu" and s.device.backend == "level_zero"
        k = TritonKernel(scale_typed, TYPED_SIG, {"BLOCK": BLOCK}, cache=ProgramCache(tmp_path))
        n = 5000
        x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
        with s.from_numpy(x) as dx, s.empty(n, np.float32) as dy:
            k[(-(-n // BLOCK),)](dx, dy, 2.0, n, session=s)
            s.finish()
            np.testing.assert_array_equal(dy.to_numpy(np.float32, n), x * 2)
        k.bind(s).close()
        k2 = TritonKernel(scale_typed, TYPED_SIG, {"BLOCK": BLOCK}, cache=ProgramCache(tmp_path))
        assert k2.bind(s).program.source_kind == "binary"  # the zebin came back from the cache
