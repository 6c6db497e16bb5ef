"""The devcontainer CLI from env/npm (`npm ci --prefix env/npm`), as the engine tests run it."""

from __future__ import annotations

import shutil
import subprocess

from xpukit.layout import REPO_ROOT

CLI = REPO_ROOT / "env" / "npm" / "node_modules" / ".bin" / "devcontainer"


def run_cli(verb: str, *args: str, env: dict) -> subprocess.CompletedProcess:
    """``devcontainer VERB --workspace-folder REPO --docker-path DOCKER ARGS...`` (options before a command)."""
    common = ["--workspace-folder", str(REPO_ROOT), "--docker-path", shutil.which("docker") or "docker"]
    return subprocess.run(
        [str(CLI), verb, *common, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
