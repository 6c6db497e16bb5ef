"""`invoke base --reproducible`: mmdebstrap at SOURCE_DATE_EPOCH, loaded with a config that holds no.

The tests that run on the host, with no engine; the others are in tests/engine/test_reproducible_base.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.reproducible_base import _layer
from xpukit.host.build import base, pins

ROOT = pins.REPO_ROOT


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
