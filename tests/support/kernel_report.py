"""Helpers the test_kernel_report.py modules of several test folders share."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.runtime_required import skip_unless_in_image


@pytest.fixture
def env(tmp_path, monkeypatch) -> Path:
    pytest.importorskip("triton")
    if shutil.which("ocloc") is None:
        skip_unless_in_image("ocloc is not installed here")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path
