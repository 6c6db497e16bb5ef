"""What `invoke demo-ur` changes in its container's options to start quicker (benchmarks/bench_demo.py):
the checkout's bytecode kept on the cache volume, one folder per checkout, and no network where
nothing needs one (a shared kernel cache or an asked-for network keeps its own)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from xpukit.host.run import containers
from xpukit.layout import KIT_CACHE

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.unit


def options(**extra):
    return {"environment": {"PYTHONPATH": "/workspace", "PYTHONDONTWRITEBYTECODE": "1"}, **extra}


def test_bytecode_goes_to_the_cache_volume_per_checkout():
    env = containers.bytecode_cache(options())["environment"]
    assert "PYTHONDONTWRITEBYTECODE" not in env
    prefix = env["PYTHONPYCACHEPREFIX"]
    assert prefix.startswith(f"{KIT_CACHE}/pycache/") and len(prefix.rsplit("/", 1)[1]) == 12
    assert env["PYTHONPATH"] == "/workspace"


def test_no_network_unless_one_is_needed():
    assert containers.without_network(options())["network_mode"] == "none"
    assert containers.without_network(options(network_mode="host"))["network_mode"] == "host"
    cached = options()
    cached["environment"]["XPUKIT_KERNEL_CACHE"] = "redis://10.0.0.5:6379"
    assert "network_mode" not in containers.without_network(cached)


def test_the_dry_run_line_says_both():
    cmd = [sys.executable, "-m", "invoke", "demo-ur", "--dry-run", "--where", "container"]
    env = {**os.environ, "XPUKIT_KERNEL_CACHE": ""}
    out = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=False, env=env)
    line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    if " run " not in line:
        pytest.skip(f"no engine for the dry run's line: {out.stderr.strip()[-200:]}")
    assert "--network none" in line and "PYTHONPYCACHEPREFIX=" in line and "PYTHONDONTWRITEBYTECODE" not in line
