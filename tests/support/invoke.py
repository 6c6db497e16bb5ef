"""`invoke` as a user runs it, from the checkout, for the task tests."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import ROOT


def invoke(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # Docker unless a test asks for podman: what `auto` picks depends on the machine.
    full_env = {**os.environ, "XPUKIT_PROFILE": "", "XPUKIT_BASE_IMAGE": "", "XPUKIT_ENGINE": "docker", **(env or {})}
    full_env.pop("CI", None)
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args], cwd=ROOT, env=full_env, capture_output=True, text=True, check=False
    )
