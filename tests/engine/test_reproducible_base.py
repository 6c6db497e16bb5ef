"""`invoke base --reproducible`: mmdebstrap at SOURCE_DATE_EPOCH, loaded with a config that holds no
clock, so the same commit and mirror state give the same base image ID on every machine."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.reproducible_base import _layer
from xpukit import layout
from xpukit.host.image import base

ROOT = layout.REPO_ROOT


@pytest.mark.docker
def test_the_engine_keeps_the_computed_id(docker_client, tmp_path):
    """Docker's `load` stores the config as written: the engine's ID is the one computed here."""
    layer = _layer(tmp_path / "layer.tar")
    tag = "xpukit-test-base:reproducible"
    image_id = base.image_archive(layer, tag, 1000000000, "test", tmp_path / "image.tar")
    with open(tmp_path / "image.tar", "rb") as f:
        docker_client.images.load(f.read())
    try:
        assert docker_client.images.get(tag).id == image_id
    finally:
        docker_client.images.remove(tag, force=True)


def _podman_store(root: Path) -> dict[str, str]:
    conf = root / "storage.conf"
    root.mkdir(parents=True, exist_ok=True)
    conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{root}/graph"\nrunroot = "{root}/run"\n')
    env = {**os.environ, "CONTAINERS_STORAGE_CONF": str(conf), "XPUKIT_ENGINE": "podman"}
    for name in ("DOCKER_HOST", "CONTAINER_HOST"):
        env.pop(name, None)
    return env


@pytest.mark.docker
def test_two_reproducible_bases_in_two_stores_have_one_id(tmp_path):
    if shutil.which("mmdebstrap") is None or shutil.which("podman") is None or os.geteuid() != 0:
        pytest.skip("needs mmdebstrap, podman and root (apt-get install mmdebstrap podman)")
    ids = []
    for name in ("one", "two"):
        env = _podman_store(tmp_path / name)
        env["SOURCE_DATE_EPOCH"] = "1000000000"
        out = subprocess.run(
            [sys.executable, "-m", "invoke", "base", "--reproducible"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert out.returncode == 0, out.stdout[-1500:] + out.stderr[-1500:]
        said = re.search(r"ready \((sha256:[0-9a-f]{64});", out.stdout)
        assert said, out.stdout[-1500:]
        stored = subprocess.run(
            ["podman", "image", "inspect", "--format", "{{.Id}}", "xpukit-base:bookworm-slim"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert "sha256:" + stored.removeprefix("sha256:") == said.group(1)
        ids.append(said.group(1))
        subprocess.run(["podman", "rmi", "-af"], env=env, capture_output=True, check=False)
    assert ids[0] == ids[1]
