"""Helpers the test_driver.py modules of several test folders share."""

from __future__ import annotations

import numpy as np

RNG = np.random.default_rng(42)
