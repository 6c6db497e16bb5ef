"""`invoke base`: mmdebstrap at SOURCE_DATE_EPOCH by default where it is installed, else debootstrap (said in one line).

The tests that run on the host, with no engine; the others are in tests/engine/test_reproducible_base.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.reproducible_base import _layer
from xpukit import layout
from xpukit.errors import XpukitError
from xpukit.host.image import base

ROOT = layout.REPO_ROOT


@pytest.mark.unit
def test_the_archive_and_its_id_depend_only_on_layer_time_and_command(tmp_path):
    layer = _layer(tmp_path / "layer.tar")
    one = base.image_archive(layer, "xpukit-base:t", 1000000000, "mmdebstrap t", tmp_path / "a.tar", "x86_64")
    two = base.image_archive(layer, "xpukit-base:t", 1000000000, "mmdebstrap t", tmp_path / "b.tar", "x86_64")
    assert one == two and re.fullmatch(r"sha256:[0-9a-f]{64}", one)
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    later = base.image_archive(layer, "xpukit-base:t", 1000000001, "mmdebstrap t", tmp_path / "c.tar", "x86_64")
    assert later != one


@pytest.mark.unit
def test_dry_run_shows_mmdebstrap_at_the_commit_time():
    out = subprocess.run(
        [sys.executable, "-m", "invoke", "base", "--reproducible", "--dry-run"],
        cwd=ROOT,
        env={**os.environ, "SOURCE_DATE_EPOCH": "1000000000"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "would run: SOURCE_DATE_EPOCH=1000000000 mmdebstrap --variant=minbase --mode=root" in out.stdout


@pytest.mark.unit
def test_the_reproducible_base_is_the_default_where_mmdebstrap_is_installed():
    found, missing = (lambda: "/usr/bin/mmdebstrap"), (lambda: None)
    assert base.choose_reproducible(False, False, "1000000000", found) == (True, "")
    use, why = base.choose_reproducible(False, False, "1000000000", missing)
    assert not use and why == (
        "base: mmdebstrap is not installed (apt-get install mmdebstrap for a reproducible base); "
        "debootstrap instead: this base gets a new ID on every run"
    )
    use, why = base.choose_reproducible(False, False, "", found)
    assert not use and "no git commit and no SOURCE_DATE_EPOCH" in why
    assert base.choose_reproducible(False, True, "1000000000", found) == (False, "")  # --debootstrap
    assert base.choose_reproducible(True, False, "1000000000", missing) == (True, "")  # --reproducible fails later
    with pytest.raises(XpukitError, match="exclude each other"):
        base.choose_reproducible(True, True, "1", found)


@pytest.mark.unit
def test_without_mmdebstrap_the_base_says_so_in_one_line_and_takes_debootstrap(tmp_path):
    """PATH without mmdebstrap (debootstrap is still found in /usr/sbin): one line naming the
    package, then debootstrap's plan; with mmdebstrap on PATH, its plan."""
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1000000000", "PATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "invoke", "base", "--dry-run"],
                         cwd=ROOT, env=env, capture_output=True, text=True, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    said = [ln for ln in out.stdout.splitlines() if "mmdebstrap" in ln]
    assert said == [
        "xpukit: base: mmdebstrap is not installed (apt-get install mmdebstrap for a reproducible base); "
        "debootstrap instead: this base gets a new ID on every run"
    ], out.stdout
    assert "would run: debootstrap --variant=minbase bookworm ROOTFS" in out.stdout
    if base.find_mmdebstrap() is None:
        pytest.skip("mmdebstrap is not installed here: the default path with it cannot be shown")
    env["PATH"] = os.environ["PATH"]
    out = subprocess.run([sys.executable, "-m", "invoke", "base", "--dry-run"],
                         cwd=ROOT, env=env, capture_output=True, text=True, check=False)  # fmt: skip
    assert out.returncode == 0 and "would run: SOURCE_DATE_EPOCH=1000000000 mmdebstrap" in out.stdout, out.stdout
