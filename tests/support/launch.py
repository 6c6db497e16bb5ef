"""Helpers the test_launch.py modules of several test folders share."""

from __future__ import annotations

TYPED_SIG = "x_ptr:*fp32,y_ptr:*fp32,scale:fp32,n:i32"


BLOCK = 1024
