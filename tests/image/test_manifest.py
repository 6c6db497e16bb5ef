"""The manifest step: what is installed, checked against the pins; the build fails on a difference."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xpukit.host.image import build
from xpukit.host.versions import pins
from xpukit.runtime.image import manifest

pytestmark = pytest.mark.container


def _pin_env(**override: str) -> dict[str, str]:
    """The build args the image's manifest step saw, from the pins of the profile this image was built for."""
    try:
        name = json.loads(Path(manifest.MANIFEST_PATH).read_text())["profile"]
    except (OSError, ValueError, KeyError):
        name = "cpu"
    profile = pins.load().profile(name)
    args = build.build_args(profile, profile.base_reference)
    return {**os.environ, **args, **override}


def _run(env: dict[str, str], out: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "xpukit.runtime.image.manifest", out],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.sharing_smoke
def test_installed_equals_the_pins(tmp_path):
    result = _run(_pin_env(), str(tmp_path / "m.json"))
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "m.json").read_text())
    assert manifest.mismatches(data) == [] and data["ur_loader"]["path"] and data["ocloc"]["version"]


def test_a_pin_the_image_does_not_have_fails_the_step(tmp_path):
    """The same step with numpy pinned to a version that is not installed: exit 1, the difference named,
    and no manifest written."""
    env = _pin_env()
    env["PYPI_PINS"] = env["PYPI_PINS"].replace("numpy==", "numpy==0.0.0+not-")
    result = _run(env, str(tmp_path / "m.json"))
    assert result.returncode == 1
    assert "manifest: numpy pinned 0.0.0+not-" in result.stderr
    assert not (tmp_path / "m.json").exists()
