"""Resource hygiene: many session cycles and many launches must not grow the process."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

from tests.support.kernels import scale_typed
from tests.support.runtime_required import ur_session_or_skip
from xpukit.runtime.triton.launch import ProgramCache, TritonKernel

pytestmark = pytest.mark.container

LIMIT_MB = 20


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_1000_session_cycles():
    for _ in range(20):  # warm up allocator pools and the adapters' lazy state
        with ur_session_or_skip() as s, s.alloc(4096):
            pass
    before = rss_mb()
    for _ in range(1000):
        with ur_session_or_skip() as s:
            buf = s.alloc(4096)
            buf.copy_from(np.zeros(1024, np.float32))
            s.queue.finish()
    growth = rss_mb() - before
    assert growth < LIMIT_MB, f"RSS grew {growth:.1f} MB over 1000 session cycles"


def test_10000_launches(tmp_path):
    n = 4096
    x = np.ones(n, np.float32)
    with ur_session_or_skip() as s, s.from_numpy(x) as dx, s.empty(n, np.float32) as dy:
        k = TritonKernel(
            scale_typed,
            "x_ptr:*fp32,y_ptr:*fp32,scale:fp32,n:i32",
            {"BLOCK": 1024},
            cache=ProgramCache(tmp_path),
        )
        bound = k.bind(s)
        for i in range(200):
            bound[(4,)](dx, dy, float(i), n)
        s.finish()
        before = rss_mb()
        for i in range(10_000):
            # Alternate arguments so every launch really sets them.
            bound[(4,)](dy if i % 2 else dx, dx if i % 2 else dy, 1.0, n)
            if i % 500 == 499:
                s.finish()
        s.finish()
        growth = rss_mb() - before
        np.testing.assert_array_equal(dy.to_numpy(np.float32, n), x)
    assert growth < LIMIT_MB, f"RSS grew {growth:.1f} MB over 10,000 launches"
