"""`invoke zebin-info` refuses a path that is not a regular file on the host, before any container
starts: the image would be handed /dev/zero, a pipe or a folder. The reader's own checks (size, ELF
magic, the same refusals where `python -m xpukit` runs) are in tests/image/test_zebin_info_input.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from xpukit.errors import EXIT_USAGE
from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("what", ["/dev/zero", "folder", "pipe"])
def test_invoke_zebin_info_refuses_what_is_not_a_file(tmp_path, what):
    path = {"/dev/zero": "/dev/zero", "folder": str(tmp_path), "pipe": str(tmp_path / "pipe")}[what]
    if what == "pipe":
        os.mkfifo(path)
    env = {**os.environ, "XPUKIT_ENGINE": "docker", "DOCKER_HOST": "unix:///nonexistent.sock"}
    p = subprocess.run([sys.executable, "-m", "invoke", "-r", str(REPO_ROOT), "zebin-info", path],
                       cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120)  # fmt: skip
    lines = p.stderr.strip().splitlines()
    assert p.returncode == EXIT_USAGE and len(lines) == 1, p.stderr
    assert lines[0] == f"xpukit: error: {path} is not a regular file (fix: pass the path of a .zebin file)"
