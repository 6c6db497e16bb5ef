"""xpukit's folder under ``triton/backends/``: how Triton itself finds the kit's driver.

Triton 3.3 builds its backend list from the folders under ``triton/backends/`` (each a
``compiler.py`` and a ``driver.py`` with one concrete subclass each) and, when a launch or
``@triton.autotune`` first asks for a driver, takes the one whose ``is_active()`` is true. The
folder ``triton/backends/xpukit/`` holds :mod:`.compiler` (targets nothing: the Intel backend still
compiles) and :mod:`.driver` (active only when no other backend's driver is, e.g. no torch XPU
device; it then stands for xpukit's UR driver). So a module that imports only triton and numpy can
define ``@triton.autotune`` kernels at import and run them inside an xpukit session.

``python -m xpukit.runtime.triton.backend install`` writes the folder next to the importable Triton
(the image build runs it; a host install runs it once after ``pip install``); ``check`` says
whether it is there and current, ``remove`` takes it away.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

NAME = "xpukit"  # the folder's name under triton/backends/ (Triton's backend name)
FILES = ("compiler.py", "driver.py")
SOURCE = Path(__file__).resolve().parent


def backends_dir() -> Path:
    """``triton/backends/`` of the Triton this interpreter imports (without importing Triton)."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("Triton is not importable here: install triton-xpu first")
    return Path(next(iter(spec.submodule_search_locations))) / "backends"


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for name in FILES:
        f = folder / name
        h.update(name.encode() + b"\0" + (f.read_bytes() if f.is_file() else b"<missing>"))
    return h.hexdigest()


def is_installed(target: Path | None = None) -> bool:
    """Whether ``triton/backends/xpukit/`` holds exactly this xpukit's files."""
    folder = (target or backends_dir()) / NAME
    return folder.is_dir() and _digest(folder) == _digest(SOURCE)


def install(target: Path | None = None) -> Path:
    """Write the folder under ``target`` (default: the importable Triton's ``backends/``), atomically."""
    root = target or backends_dir()
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory: is this Triton's backends folder?")
    staging = Path(tempfile.mkdtemp(prefix=f".{NAME}-", dir=root))
    try:
        for name in FILES:
            shutil.copyfile(SOURCE / name, staging / name)
            os.chmod(staging / name, 0o644)
        os.chmod(staging, 0o755)
        folder = root / NAME
        if folder.exists():
            shutil.rmtree(folder)
        os.rename(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


def remove(target: Path | None = None) -> bool:
    folder = (target or backends_dir()) / NAME
    if not folder.exists():
        return False
    shutil.rmtree(folder)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xpukit.runtime.triton.backend", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=("install", "check", "remove"))
    parser.add_argument("--target", type=Path, help="a triton/backends folder (default: the importable Triton's)")
    args = parser.parse_args(argv)
    try:
        if args.action == "install":
            print(f"installed {install(args.target)}")
        elif args.action == "remove":
            print("removed" if remove(args.target) else "not installed")
        else:
            ok = is_installed(args.target)
            print(
                "installed and current"
                if ok
                else "missing or out of date: run `python -m xpukit.runtime.triton.backend install`"
            )
            return 0 if ok else 1
    except (OSError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
