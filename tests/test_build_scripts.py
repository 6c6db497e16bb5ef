"""The image-build scripts the cpu profile shares with the xpu profile, through their --dry-run."""

from __future__ import annotations

import os
import subprocess

import pytest

from xpukit.host.pins import REPO_ROOT

pytestmark = pytest.mark.unit
SCRIPTS = REPO_ROOT / "scripts"


def run(script: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPTS / script), *args], env={**os.environ, **env},
                          capture_output=True, text=True, check=False)  # fmt: skip


def test_install_ocloc_from_the_base_archive():
    p = run("install-ocloc.sh", "--dry-run", OCLOC_SOURCE="apt", OCLOC_PACKAGE="intel-opencl-icd",
            OCLOC_VERSION="22.43.24595.41-1")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "install -y -q --no-install-recommends intel-opencl-icd=22.43.24595.41-1" in p.stdout
    # apt's cache and lists on the one cache mount (scripts/apt-env.sh), like install-apt.sh's.
    assert "-o Dir::Cache=/var/cache/xpukit-apt -o Dir::State::Lists=/var/cache/xpukit-apt/lists" in p.stdout


def test_install_ocloc_from_intels_repository_at_a_pinned_version():
    p = run("install-ocloc.sh", "--dry-run", OCLOC_SOURCE="intel-gpu-repo", OCLOC_PACKAGE="intel-ocloc",
            OCLOC_VERSION="1.2.3-test")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "intel-graphics.key | gpg --dearmor" in p.stdout
    assert "signed-by=/usr/share/keyrings/intel-graphics.gpg] https://repositories.intel.com/gpu/ubuntu" in p.stdout
    assert p.stdout.rstrip().endswith("intel-ocloc=1.2.3-test")


def test_install_ocloc_refuses_an_unknown_source():
    p = run("install-ocloc.sh", "--dry-run", OCLOC_SOURCE="ppa", OCLOC_PACKAGE="x")
    assert p.returncode == 2 and "unknown OCLOC_SOURCE 'ppa'" in p.stderr


def test_install_apt_and_python_dry_runs():
    p = run("install-apt.sh", "--dry-run", "python3=3.11.2-1+b1", "spirv-tools")
    assert p.returncode == 0, p.stderr
    assert "install -y -q --no-install-recommends python3=3.11.2-1+b1 spirv-tools" in p.stdout
    assert "+ mkdir -p /var/cache/xpukit-apt/archives/partial /var/cache/xpukit-apt/lists/partial" in p.stdout
    p = run("install-python.sh", "--dry-run", "/opt/xpukit/env/requirements.lock", XPUKIT_VENV="/tmp/v")
    assert p.returncode == 0, p.stderr
    assert "--require-hashes" in p.stdout and "--no-index --find-links" in p.stdout
    assert "+ strip --strip-debug" in p.stdout and "+ hardlink --quiet --ignore-time /tmp/v" in p.stdout
