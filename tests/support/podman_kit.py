"""The kit on a private podman store, built once per test session and shared by
tests/engine/test_podman.py and tests/engine/test_verify.py (tests/engine/conftest.py holds the
fixtures): `invoke base` and one cold `invoke build` there, and `invoke verify` of that build.

The tasks run in a checkout copy (a fresh git commit of this tree's files, at a fixed time:
tests/support/verify.py), so that another copy of it rebuilds the same image (the
revision and creation labels, SOURCE_DATE_EPOCH). Everything runs in a podman store of its own
(graphroot and runroot in a temporary folder, through CONTAINERS_STORAGE_CONF), so the machine's
podman images are never touched. Builds use XPUKIT_BUILD_NETWORK=host: rootful podman's bridge here
gives RUN steps no route out.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.verify import checkout_copy
from xpukit import layout

ROOT = layout.REPO_ROOT
REQUIRED = os.environ.get("XPUKIT_REQUIRE_PODMAN") == "1"


def need_podman() -> str:
    """podman's path; skip (fail with XPUKIT_REQUIRE_PODMAN=1) where rootful podman cannot run."""
    path = shutil.which("podman")
    why = "" if path else "podman is not installed (apt-get install podman)"
    if path and os.geteuid() != 0:
        why = "these tests drive rootful podman; rootless needs /etc/subuid ranges (docs/engines.md)"
    if why:
        if REQUIRED:
            pytest.fail(f"XPUKIT_REQUIRE_PODMAN=1 but {why}")
        pytest.skip(why)
    return str(path)


def is_zombie(pid: str) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def unmount_under(root: Path) -> None:
    """Unmount (lazily) every mount below ``root``, deepest first: a store's overlay mounts."""
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(str(root))), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], capture_output=True, check=False)


class Kit:
    """The kit on a private podman store: runs `invoke` tasks there."""

    def __init__(self, root: Path, bundle: Path, canary: str, tree: Path) -> None:
        self.root, self.bundle, self.canary, self.tree = root, bundle, canary, tree
        conf = root / "storage.conf"
        conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{root}/graph"\nrunroot = "{root}/run"\n')
        self.env = {
            **os.environ,
            "CONTAINERS_STORAGE_CONF": str(conf),
            "XPUKIT_ENGINE": "podman",
            "XPUKIT_BUILD_NETWORK": "host",
            "XPUKIT_CA_BUNDLE": str(bundle),
            "XPUKIT_PROFILE": "cpu",
            "PYTHONPATH": str(tree),
        }
        for name in ("DOCKER_HOST", "CONTAINER_HOST", "XPUKIT_TEST_IMAGE", "CI", "SOURCE_DATE_EPOCH"):
            self.env.pop(name, None)
        self.tag = ""

    def invoke(self, *args: str, timeout: int = 1800, cwd: Path | None = None) -> subprocess.CompletedProcess:
        """`invoke ARGS` in the kit's checkout copy (or ``cwd``)."""
        result = subprocess.run(
            [sys.executable, "-m", "invoke", *args],
            cwd=cwd or self.tree,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        # Every task that needed podman started its service and stopped it again by pid.
        for pid in re.findall(r"started one for this task \(pid (\d+)\)", result.stdout + result.stderr):
            assert not Path(f"/proc/{pid}").exists() or is_zombie(pid), f"podman service {pid} left running"
        return result

    def podman(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["podman", *args], env=self.env, capture_output=True, text=True, check=False)

    def with_env(self, env: dict[str, str]) -> Kit:
        """The same store with more (or other) environment variables."""
        other = Kit.__new__(Kit)
        other.__dict__.update(self.__dict__)
        other.env = {**self.env, **env}
        return other

    def remove(self) -> None:
        """Containers, then the store's overlay mounts, then the folder: nothing left on disk."""
        if self.root.exists():
            self.podman("rm", "-af")
            self.podman("rmi", "-af")
            unmount_under(self.root)
            shutil.rmtree(self.root, ignore_errors=True)


def built_kit(root: Path) -> Kit:
    """A checkout copy and a private podman store in ``root`` with the kit's base (`invoke base`) and image (one cold
    `invoke build`); the build trusted a CA bundle carrying a unique canary line. On a failure the
    store is removed before the assertion propagates."""
    canary = f"# xpukit-canary-{uuid.uuid4().hex}"
    source = os.environ.get("XPUKIT_TEST_CA_BUNDLE") or "/etc/ssl/certs/ca-certificates.crt"
    bundle = root / "ca-bundle.pem"
    bundle.write_text((Path(source).read_text() if Path(source).is_file() else "") + f"\n{canary}\n")
    kit = Kit(root, bundle, canary, checkout_copy(root / "tree", whole=True))
    try:
        base = kit.invoke("base", timeout=900)
        assert base.returncode == 0, base.stdout[-1500:] + base.stderr[-1500:]
        built = kit.invoke("build")
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-1500:]
        assert "engine: podman's API service is not running; started one" in built.stdout
        found = re.search(r"building (xpukit:cpu-[0-9a-f]{12})", built.stdout)
        assert found, built.stdout[-3000:]
        kit.tag = found.group(1)
    except BaseException:
        kit.remove()
        raise
    return kit
