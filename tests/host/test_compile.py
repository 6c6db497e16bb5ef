"""xpukit.runtime.kernels.compile: the logic behind ``invoke compile`` and ``invoke zebin-info``.

The tests that run on the host, with no engine; the others are in tests/image/test_compile.py.
"""

from __future__ import annotations

import pytest

from xpukit.errors import XpukitError
from xpukit.runtime.kernels.compile import parse_constexprs


@pytest.mark.unit
def test_parse_constexprs():
    assert parse_constexprs(["BLOCK=1024", "A=0.5,FLAG=True", "ACT='relu'"]) == {
        "BLOCK": 1024,
        "A": 0.5,
        "FLAG": True,
        "ACT": "relu",
    }
    for bad in ("BLOCK", "=3", "BLOCK=", "BLOCK=relu", "1X=2"):
        with pytest.raises(XpukitError):
            parse_constexprs([bad])
