"""Helpers the test_driver.py modules of several test folders share."""

from __future__ import annotations

import numpy as np
import pytest

from xpukit.runtime.triton import (
    URDriver,
)
from xpukit.runtime.triton.launch import ProgramCache

RNG = np.random.default_rng(42)


@pytest.fixture(scope="module")
def drv(tmp_path_factory):
    return URDriver(cache=ProgramCache(tmp_path_factory.mktemp("programs")))
