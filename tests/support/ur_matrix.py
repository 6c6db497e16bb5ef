"""One UR prefix per supported release, for running the binding tests against each of them.

``UR_RELEASE_MATRIX`` holds exact PyPI versions from env/pins.toml (``cpu.ur.matrix``). A prefix is made with
``pip install --prefix`` (``--target`` loses the wheels' ``../lib`` data files) and lives under
``$XPUKIT_CACHE_DIR/ur/<version>`` (default ``~/.cache/xpukit``). It holds only the UR loader,
adapters and their runtime libraries; the CPU OpenCL runtime comes from the current environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from xpukit import layout
from xpukit.errors import XpukitError


def _matrix_from_pins() -> dict[str, str]:
    """release line -> exact wheel version, from env/pins.toml's cpu.ur.matrix."""
    from xpukit.host.versions.pins import load

    return {".".join(v.split(".")[:2]): v for v in load().profile("cpu")["ur"]["matrix"]}


# release line -> exact wheel version of intel-cmplr-lib-ur and intel-cmplr-lib-rt
UR_RELEASE_MATRIX: dict[str, str] = _matrix_from_pins()


class URPrefixUnavailable(XpukitError):
    """A release's prefix could not be prepared (offline, index unreachable, disk full...)."""


def cache_root() -> Path:
    return layout.kit_cache_dir() / "ur"


def loader_in(prefix: Path) -> Path:
    return prefix / "lib" / "libur_loader.so"


def prepare_prefix(version: str, root: Path | None = None, timeout: float = 900) -> Path:
    """The prefix holding UR ``version``; installed with pip on first use."""
    root = root or cache_root()
    prefix = root / version
    if loader_in(prefix).is_file():
        return prefix
    tmp = root / f".{version}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--no-warn-script-location", "--ignore-installed", "--prefix", str(tmp),
        f"intel-cmplr-lib-ur=={version}", f"intel-cmplr-lib-rt=={version}",
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise URPrefixUnavailable(f"cannot install UR {version}: {exc}", "check network access to PyPI") from None
    if proc.returncode != 0 or not loader_in(tmp).is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise URPrefixUnavailable(
            f"pip could not install UR {version} into {tmp}: {tail[0]}",
            "check network access to PyPI (or a wheelhouse via PIP_FIND_LINKS)",
        )
    os.replace(tmp, prefix)  # atomic publish: a half-installed prefix is never used
    return prefix
