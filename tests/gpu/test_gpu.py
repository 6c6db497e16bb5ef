"""Intel GPU detection and GPU passthrough options, against fake sysfs and /dev trees.

The tests that run on an Intel GPU host; the others are in tests/host/test_gpu.py.
"""

from __future__ import annotations

import os

import pytest

from xpukit.host import gpu

pytestmark = pytest.mark.unit


@pytest.mark.gpu
def test_this_host_has_an_intel_gpu():
    ok, why = gpu.has_intel_gpu()
    assert ok, why
    opts = gpu.gpu_run_options(require=True)
    assert "/dev/dri" in opts.devices
    assert all(os.path.exists(n.dev_path) for n in gpu.intel_render_nodes())
