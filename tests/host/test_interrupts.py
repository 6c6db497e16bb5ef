"""Ctrl-C and kills: the demo and ``python -m xpukit`` stop with one line and exit 130, and ocloc's.

The tests that run on the host, with no engine; the others are in tests/image/test_interrupts.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support.interrupts import PREFIX
from xpukit.runtime.interrupts import deferred_sigint
from xpukit.runtime.scratch import KEEP_MARKER, host_tag, remove_stale


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.mark.unit
def test_sweep_removes_only_folders_of_gone_processes(tmp_path):
    host = host_tag()
    gone = tmp_path / f"{PREFIX}{dead_pid()}-{host}-abc"
    live_child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f"{PREFIX}{live_child.pid}-{host}-def"
        mine = tmp_path / f"{PREFIX}{os.getpid()}-{host}-ghi"
        kept = tmp_path / f"{PREFIX}{dead_pid()}-{host}-kept"
        # Another container sharing this temp dir: its pids mean nothing here.
        other_host = tmp_path / f"{PREFIX}{dead_pid()}-{'0' * 8 if host != '0' * 8 else '1' * 8}-jkl"
        legacy = tmp_path / f"{PREFIX}x1y2z3"  # made before folders named their pid: owner unknown
        other = tmp_path / "something-else"
        survivors = (live, mine, kept, other_host, legacy, other)
        for folder in (gone, *survivors):
            folder.mkdir()
            (folder / "kernel.spv").write_bytes(b"x")
        (kept / KEEP_MARKER).touch()
        removed = remove_stale(PREFIX, str(tmp_path))
        assert removed == [gone]
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in survivors)
    finally:
        live_child.kill()
        live_child.wait()


@pytest.mark.unit
def test_deferred_sigint_holds_ctrl_c_until_the_block_ends():
    """A real SIGINT to this process inside the block: the block finishes, then KeyboardInterrupt."""
    finished = False
    with pytest.raises(KeyboardInterrupt), deferred_sigint():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler has run by now; it only took note
        finished = True
    assert finished
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
