"""The image's layout, written once: where things live inside the kit's image and its containers.

Ground level, like ``targets``: imports nothing, so the host kit (containers, devcontainer, doctor,
Kubernetes jobs) and the runtime (the manifest, written inside the image) read the same values.
The Dockerfile and the build scripts get them as build args (:func:`build_args`, passed by
``invoke build``), so the Dockerfile names none of these paths itself (tests/host/test_dockerfile.py).
"""

from __future__ import annotations

import os
from pathlib import Path

USER = "xpukit"  # the image's non-root user
UID = 10001  # ... by number (also its group), so every runtime resolves it without /etc/passwd
HOME = f"/home/{USER}"
CACHE = f"{HOME}/.cache"  # the named cache volume's mount point in every container
TRITON_CACHE = f"{CACHE}/triton"  # TRITON_CACHE_DIR
KIT_CACHE = f"{CACHE}/xpukit"  # XPUKIT_CACHE_DIR (program cache, kernel cache)

# The checkout (or the image's copy of the sources) this module was loaded from: where tasks.py,
# env/ and the Dockerfile are on the host.
REPO_ROOT = Path(__file__).resolve().parents[1]

INSTALL_ROOT = "/opt/xpukit"  # everything the kit installs in the image (the checkout's root is REPO_ROOT)
SCRIPTS = f"{INSTALL_ROOT}/scripts"  # scripts/ of the checkout, as the build ran them
VENV = f"{INSTALL_ROOT}/venv"
PYTHON = f"{VENV}/bin/python"
COMPILER = f"{INSTALL_ROOT}/compiler"  # the cpu profile's ocloc, IGC and iga64 with their own loader (bin/ on PATH)
SRC = f"{INSTALL_ROOT}/src"  # the kit's own sources, baked in (PYTHONPATH when no checkout is mounted)
MANIFEST = f"{INSTALL_ROOT}/manifest.json"  # what is installed, written by the build's last step
ENTRYPOINT = f"{SCRIPTS}/entrypoint.sh"

WORKSPACE = "/workspace"  # where a task mounts the checkout (read-only) and works
# What every container of a task (and the devcontainer) runs with: the mounted checkout first on
# the path, and no bytecode written into it (it is read-only, and .pyc files differ per checkout).
CONTAINER_ENV = {"PYTHONPATH": WORKSPACE, "PYTHONDONTWRITEBYTECODE": "1"}
# A container that runs as a uid the image has no home for (the calling user's for compile and
# kernel-report; charliecloud, Apptainer and Kubernetes cells): its home and both caches in /tmp.
NO_HOME = "/tmp"
NO_HOME_ENV = {"HOME": NO_HOME, "TRITON_CACHE_DIR": f"{NO_HOME}/triton", "XPUKIT_CACHE_DIR": f"{NO_HOME}/xpukit-cache"}


def kit_cache_dir(default: Path | None = None) -> Path:
    """The kit's own cache folder (program cache, UR release prefixes, kernel reports): the one
    reading of XPUKIT_CACHE_DIR. Unset, ``default`` (the host tasks pass the checkout's .xpukit/),
    else ~/.cache/xpukit, which in the image is KIT_CACHE (the Dockerfile also sets the variable)."""
    value = os.environ.get("XPUKIT_CACHE_DIR")
    if value:
        return Path(value)
    return default if default is not None else Path.home() / ".cache" / "xpukit"


def build_args() -> dict[str, str]:
    """The layout as the Dockerfile's build args (ARG XPUKIT_..., no defaults there)."""
    return {
        "XPUKIT_USER": USER,
        "XPUKIT_UID": str(UID),
        "XPUKIT_HOME": HOME,
        "XPUKIT_TRITON_CACHE": TRITON_CACHE,
        "XPUKIT_KIT_CACHE": KIT_CACHE,
        "XPUKIT_ROOT": INSTALL_ROOT,
        "XPUKIT_SCRIPTS": SCRIPTS,
        "XPUKIT_VENV": VENV,
        "XPUKIT_SRC": SRC,
        "XPUKIT_MANIFEST": MANIFEST,
        "XPUKIT_COMPILER": COMPILER,
    }
