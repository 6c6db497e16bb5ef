"""Helpers the test_interrupts.py modules of several test folders share."""

from __future__ import annotations

import signal
import subprocess

PREFIX = "xpukit-ocloc-"


def interrupt_and_wait(p: subprocess.Popen, timeout: float = 120) -> str:
    """SIGINT, then the process's stderr once it ends; one that outlives ``timeout`` is killed."""
    try:
        p.send_signal(signal.SIGINT)
        return p.communicate(timeout=timeout)[1]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
