"""Fixtures for the tests that run inside the image (marker `container`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.runtime_required import skip_unless_in_image, ur_session_or_skip


@pytest.fixture(scope="module")
def session():
    """A UR session on the CPU device for one test module, closed after it."""
    s = ur_session_or_skip()
    yield s
    s.close()


@pytest.fixture
def env(tmp_path, monkeypatch) -> Path:
    """A compile's own folder: Triton and ocloc required, a fresh Triton cache, the working directory
    there, and no TRITON_XPU_GEN_NATIVE_CODE from outside."""
    pytest.importorskip("triton")
    if shutil.which("ocloc") is None:
        skip_unless_in_image("ocloc is not installed here")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRITON_XPU_GEN_NATIVE_CODE", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path
