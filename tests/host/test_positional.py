"""A task's positional argument that starts with '-' is a flag invoke did not know, taken as the
argument: `invoke compile --help` (what a new user types for a task's options) is one line naming
`invoke --help compile`, exit 2, nothing run or written. Before: "kernel '--help' is not
path.py:function of an existing file", which sent the user after a file."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from xpukit.errors import EXIT_USAGE
from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.unit


def _invoke(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XPUKIT_ENGINE": "docker", "DOCKER_HOST": "unix:///nonexistent.sock"}
    cmd = [sys.executable, "-m", "invoke", "-r", str(REPO_ROOT), *args]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120)


@pytest.mark.parametrize(("task", "name"), [("compile", "KERNEL"), ("zebin-info", "FILE"), ("kernel-report", "KERNEL")])
@pytest.mark.parametrize("flag", ["--help", "-x"])
def test_a_flag_taken_as_the_positional_argument_names_the_tasks_help(tmp_path, task, name, flag):
    p = _invoke(tmp_path, task, flag)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == EXIT_USAGE and len(lines) == 1, p.stderr
    assert lines[0].startswith("xpukit: error: ") and f"took {flag} as {name}" in lines[0], lines[0]
    assert f"(fix: for the task's options: invoke --help {task};" in lines[0], lines[0]
    assert "Traceback" not in p.stderr and not p.stdout
    assert not list(tmp_path.iterdir()), "a refused task wrote something"


def test_the_help_the_error_names_is_the_tasks():
    p = _invoke(REPO_ROOT, "--help", "compile")
    assert p.returncode == 0 and "zebin-info" not in p.stdout
    assert "Compile a Triton kernel" in p.stdout and "--target" in p.stdout, p.stdout
