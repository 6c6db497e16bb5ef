"""examples/xpu_triton_ur.py end to end, as `invoke demo-ur` runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.container

EXAMPLE = ROOT / "examples" / "xpu_triton_ur.py"


def run(*flags: str) -> subprocess.CompletedProcess:
    pytest.importorskip("triton")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *flags], capture_output=True, text=True, env=env, timeout=600, check=False
    )


@pytest.mark.sharing_smoke
@pytest.mark.parametrize("n", ["1", "1025", "1048576"])
def test_demo_runs_exact_on_cpu(n):
    p = run("--n", n, "--scale", "-1.5", "--device", "cpu", "--iters", "3")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("max abs error 0 (exact)") == 2, p.stdout
    assert "[cpu, opencl]" in p.stdout and p.stdout.rstrip().endswith("OK")


def test_demo_auto_device_says_which():
    p = run("--n", "100", "--device", "auto")
    assert p.returncode == 0, p.stderr
    assert "device:" in p.stdout


def test_demo_error_is_one_line_and_nonzero():
    p = run("--device", "gpu")
    if p.returncode == 0:
        pytest.skip("this host has an Intel GPU")
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("error: DeviceNotFound: no GPU device found")
    assert "Traceback" not in p.stderr


def test_demo_debug_shows_traceback():
    p = run("--device", "gpu", "--debug")
    if p.returncode == 0:
        pytest.skip("this host has an Intel GPU")
    assert "Traceback" in p.stderr and "DeviceNotFound" in p.stderr


def test_demo_rejects_bad_flags():
    p = run("--n", "0")
    assert p.returncode == 2 and "--n and --iters must be >= 1" in p.stderr


@pytest.mark.parametrize("scale", ["nan", "inf", "-inf"])
def test_demo_refuses_a_non_finite_scale(scale):
    """x * nan is nan everywhere, so a NaN scale made the check pass whatever the kernel did (it
    used to run and report success): one line, exit 2, before any device work."""
    p = run("--n", "3000", f"--scale={scale}", "--device", "cpu")
    assert p.returncode == 2 and "--scale must be a finite number" in p.stderr, p.stdout + p.stderr
    assert "Traceback" not in p.stderr and "device:" not in p.stdout
