"""`invoke` as a user runs it, from the checkout, for the task tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT
from xpukit.host import processes


def invoke(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # Docker unless a test asks for podman: what `auto` picks depends on the machine.
    full_env = {**os.environ, "XPUKIT_PROFILE": "", "XPUKIT_BASE_IMAGE": "", "XPUKIT_ENGINE": "docker", **(env or {})}
    full_env.pop("CI", None)
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args], cwd=ROOT, env=full_env, capture_output=True, text=True, check=False
    )


def invoke_with_cache(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess:
    """`invoke ARGS` with the kit's cache folder at ``cache`` (XPUKIT_CACHE_DIR) when given."""
    env = {**os.environ, "XPUKIT_PROFILE": ""}
    env.pop("CI", None)
    if cache is not None:
        env["XPUKIT_CACHE_DIR"] = str(cache)
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def invoke_unrecorded(*args: str, env: dict[str, str] | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    """`invoke ARGS` with no command recording inherited from the caller (XPUKIT_RECORD_COMMANDS)."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("CI", processes.RECORD_ENV)}
    full_env.update({"XPUKIT_PROFILE": "", "XPUKIT_BASE_IMAGE": "", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
