"""`python -m xpukit zebin-info` refuses what is not a zebin file before reading it: a device
(`/dev/zero` used to be read until the container was killed, exit 137 and no line), a pipe, a
folder, a file larger than any zebin, a file without ELF's or ar's magic. One line, exit 1, within
seconds."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.container


def zebin_info(path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, "-m", "xpukit", "zebin-info", str(path)],
                          env=env, capture_output=True, text=True, check=False, timeout=60)  # fmt: skip


@pytest.mark.parametrize(
    ("what", "wants"),
    [
        ("/dev/zero", "/dev/zero is a character device, not a regular file"),
        ("pipe", "is a pipe, not a regular file"),
        ("folder", "is a folder, not a regular file"),
        ("huge", "is larger than any zebin (300 MiB; the reader takes up to 256 MiB)"),
        ("text", "not an ELF file (no \\x7fELF magic)"),
        ("empty", "not an ELF file (it is empty)"),
    ],
)
def test_zebin_info_refuses_what_is_not_a_zebin_file_before_reading_it(tmp_path, what, wants):
    path = tmp_path / f"{what}.zebin"
    if what == "/dev/zero":
        path = what
    elif what == "pipe":
        os.mkfifo(path)  # no writer: a plain open would wait for one
    elif what == "folder":
        path.mkdir()
    elif what == "huge":
        with open(path, "wb") as f:  # sparse: 300 MiB without writing them
            f.write(b"\x7fELF")
            f.truncate(300 * 2**20)
    elif what == "text":
        path.write_text("not a zebin\n")
    else:
        path.write_bytes(b"")
    p = zebin_info(path)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1 and not p.stdout, p.stderr
    assert lines[0].startswith(f"xpukit: error: {path}") and wants in lines[0] and "(fix: " in lines[0], lines[0]
    assert "Traceback" not in p.stderr
