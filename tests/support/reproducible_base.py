"""Helpers the test_reproducible_base.py modules of several test folders share."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path


def _layer(path: Path) -> Path:
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo("etc/xpukit-test")
        data = b"hello\n"
        info.size, info.mtime = len(data), 1000000000
        tar.addfile(info, io.BytesIO(data))
    return path
