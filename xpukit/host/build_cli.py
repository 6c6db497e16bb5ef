"""The CLI that builds the Dockerfile: a docker CLI with BuildKit (its buildx plugin from Docker 23 on),
or podman (buildah). Each CLI binary is probed once (its version, its buildx plugin) and the finding
kept in the kit's cache until the binary changes."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from typing import Any

from xpukit import layout
from xpukit.errors import XpukitError


@dataclasses.dataclass(frozen=True)
class BuildCli:
    """A CLI that builds the Dockerfile: docker with BuildKit, or podman (buildah)."""

    path: str
    version: str
    via_buildx: bool = False  # docker CLI >= 23 builds through its buildx plugin; older ones take DOCKER_BUILDKIT=1
    kind: str = "docker"

    def build_env(self) -> dict[str, str]:
        return {"DOCKER_BUILDKIT": "1"} if self.kind == "docker" else {}

    def build_command(self, progress: str) -> list[str]:
        """The start of a build command line. podman has no --progress; --layers keeps each
        step's layer as build cache (buildah's equivalent of BuildKit's cache)."""
        if self.kind == "podman":
            return [self.path, "build", "--layers"]
        return [self.path, "build", "--progress", progress]


def _cli_version(path: str) -> str | None:
    cached = _probe_cache_get(path, "version")
    if cached:
        return str(cached)
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"version (\d+\.\d+[\w.+~-]*)", out.stdout)
    if match:
        _probe_cache_put(path, "version", match.group(1))
    return match.group(1) if match else None


def _has_buildx(path: str) -> bool:
    if _probe_cache_get(path, "buildx"):
        return True  # only a plugin found is remembered: one installed later is found next time
    try:
        out = subprocess.run([path, "buildx", "version"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    if out.returncode == 0:
        _probe_cache_put(path, "buildx", True)
    return out.returncode == 0


# What the CLI probes found, per CLI binary (its inode, size and mtime: a new binary is probed again),
# so a task does not spawn `docker --version` and `docker buildx version` each time it starts.
PROBE_CACHE = "cli-probes.json"


def _probe_cache_file() -> str:
    return str(layout.kit_cache_dir() / PROBE_CACHE)


def _binary_key(path: str) -> str:
    st = os.stat(path)
    return f"{os.path.realpath(path)}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def _probe_cache_read() -> dict[str, Any]:
    try:
        with open(_probe_cache_file(), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _probe_cache_get(path: str, what: str) -> Any:
    try:
        entry = _probe_cache_read().get(_binary_key(path))
    except OSError:
        return None
    return entry.get(what) if isinstance(entry, dict) else None


def _probe_cache_put(path: str, what: str, value: Any) -> None:
    """Remember one finding; a cache that cannot be written only costs the probe next time."""
    target = _probe_cache_file()
    tmp = f"{target}.{os.getpid()}.tmp"
    try:
        data = _probe_cache_read()
        key = _binary_key(path)
        entry = data.get(key)
        data[key] = {**(entry if isinstance(entry, dict) else {}), what: value}
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def probe_cli(path: str) -> tuple[BuildCli | None, str]:
    """Check one CLI: (the CLI, "") when it can build with BuildKit, else (None, why not)."""
    resolved = shutil.which(path) or (path if os.path.isfile(path) else None)
    if not resolved:
        return None, f"{path}: not found"
    version = _cli_version(resolved)
    if not version:
        return None, f"{resolved}: does not answer --version"
    major = int(version.split(".")[0])
    if major < 23:
        return BuildCli(resolved, version, via_buildx=False), ""
    if _has_buildx(resolved):
        return BuildCli(resolved, version, via_buildx=True), ""
    return None, f"{resolved} {version}: BuildKit needs its buildx plugin, which is missing"


@functools.cache
def pick_cli(setting: str = "auto") -> BuildCli:
    """The configured CLI, or the first one found that can build with BuildKit (probed once per run)."""
    if setting and setting != "auto":
        candidates: Iterable[str] = [setting]
    else:
        found = [shutil.which("docker"), "/usr/bin/docker", "/usr/local/bin/docker"]
        candidates = dict.fromkeys(p for p in found if p and os.path.exists(p))
    reasons = []
    for path in candidates:
        cli, why = probe_cli(path)
        if cli:
            return cli
        reasons.append(why)
    raise XpukitError(
        "BuildKit is unavailable: " + ("; ".join(reasons) if reasons else "no docker CLI found"),
        "install the buildx plugin (Debian: docker-buildx, Docker's repo: docker-buildx-plugin) or set "
        "XPUKIT_DOCKER_CLI to a CLI older than 23 (e.g. Debian's docker.io: /usr/bin/docker)",
    )


def podman_cli(path: str) -> BuildCli:
    """podman builds without BuildKit: its version is all there is to know."""
    return BuildCli(path, _cli_version(path) or "?", kind="podman")
