"""The shared kernel cache (XPUKIT_KERNEL_CACHE=redis://... or rediss://...) against real.

The tests that run on the host, with no engine; the others are in tests/engine/test_kernel_cache.py.
"""

from __future__ import annotations

import pytest

from xpukit.runtime import cache_auth
from xpukit.runtime.triton import kernel_cache


@pytest.mark.unit
@pytest.mark.parametrize("url", ["http://127.0.0.1:6379", "redis://", "redis://host:port"])
def test_bad_kernel_cache_url_is_one_clear_error(url):
    with pytest.raises(kernel_cache.KernelCacheConfigError, match="XPUKIT_KERNEL_CACHE") as info:
        kernel_cache.RemoteStore(url)
    assert "\n" not in info.value.one_line()


@pytest.mark.unit
def test_a_password_in_the_url_is_refused_and_never_repeated():
    with pytest.raises(kernel_cache.KernelCacheConfigError) as info:
        cache_auth.parse_url("rediss://alice:hunter2secret@cache.example.com:6380/1")
    line = info.value.one_line()
    assert "hunter2secret" not in line and "XPUKIT_KERNEL_CACHE_PASSWORD_FILE" in line and "\n" not in line
