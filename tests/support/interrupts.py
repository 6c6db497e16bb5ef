"""Helpers the test_interrupts.py modules of several test folders share."""

from __future__ import annotations

PREFIX = "xpukit-ocloc-"
