"""ruff (settings in pyproject.toml) stays clean on the whole checkout."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from xpukit.host.build.pins import REPO_ROOT

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_clean(args):
    ruff = shutil.which("ruff")
    assert ruff, "ruff is missing: pip install --require-hashes -r env/lock/host.txt"
    cmd = [ruff, *args, "--no-cache", "."]
    result = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
