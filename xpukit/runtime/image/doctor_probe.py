"""In-container half of `invoke doctor`: look at the runtime and print one JSON object.

    python -m xpukit.runtime.image.doctor_probe

Standard library plus the kit's own probes: the UR loader search (xpukit.runtime.ur), the ocloc probe
(xpukit.runtime.offline.ocloc) and the manifest path (xpukit.runtime.image.manifest), so the doctor and the image
build look in the same places. Every section reports its own error instead of raising: the host
side turns the JSON into findings.
"""

from __future__ import annotations

import ctypes.util
import glob
import json
import os
import platform
import re
import sys
from pathlib import Path
from typing import Any

from xpukit.runtime import ur
from xpukit.runtime.image.manifest import MANIFEST_PATH, dist_version
from xpukit.runtime.offline.ocloc import find_ocloc

PROBE_VERSION = 1
_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib")


def _error(exc: BaseException) -> str:
    text = getattr(exc, "message", "") or str(exc) or type(exc).__name__
    return text.strip().splitlines()[0][:300]


def _so_version(path: str) -> str:
    """libze_loader.so.1.21.9 -> 1.21.9, from the file the name resolves to."""
    match = re.search(r"\.so\.(\d+(?:\.\d+)*)$", os.path.realpath(path))
    return match.group(1) if match else ""


def _find_lib(names: tuple[str, ...], extra_dirs: list[str]) -> str:
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d] + extra_dirs
    for d in dirs:
        for name in names:
            if os.path.exists(os.path.join(d, name)):
                return os.path.join(d, name)
    return ""


def probe_oneapi() -> dict[str, Any]:
    root = os.environ.get("ONEAPI_ROOT", "/opt/intel/oneapi")
    releases = sorted(Path(p).name for p in glob.glob(f"{root}/compiler/20*") if not Path(p).name.startswith("latest"))
    cmplr = os.environ.get("CMPLR_ROOT", "")
    match = re.search(r"/compiler/(20\d\d\.\d+(?:\.\d+)?)", os.path.realpath(cmplr) if cmplr else "")
    return {
        "root": root if os.path.isdir(root) else "",
        "releases": releases,
        "version": match.group(1) if match else (releases[-1] if releases else ""),
        "setvars": os.environ.get("SETVARS_COMPLETED", "") == "1",
    }


def probe_level_zero() -> dict[str, Any]:
    path = _find_lib(("libze_loader.so.1", "libze_loader.so"), list(_LIB_DIRS))
    if not path:
        found = ctypes.util.find_library("ze_loader")  # the ldconfig cache
        path = _find_lib((found,), list(_LIB_DIRS)) if found else ""
    if not path:
        return {"path": "", "version": "", "error": "libze_loader.so.1 not found"}
    return {"path": path, "version": _so_version(path), "error": ""}


def _device(info: Any) -> dict[str, Any]:
    return {
        "name": info.name,
        "type": info.type,
        "backend": info.backend,
        "driver_version": info.driver_version,
        "platform": info.platform,
    }


def probe_ur() -> dict[str, Any]:
    out: dict[str, Any] = {"status": "ok", "error": "", "loader": "", "release": "", "adapters": []}
    try:
        loc = ur.find_loader()
    except Exception as exc:
        out.update(status="fail", error=_error(exc))
        return out
    out["loader"] = str(loc.path)
    out["loader_version"] = _so_version(str(loc.path))
    out["adapters"] = sorted(
        re.sub(r"^libur_adapter_(.+?)\.so.*$", r"\1", Path(p).name)
        for p in glob.glob(str(loc.lib_dir / "libur_adapter_*.so"))
    )
    try:
        info = ur.detect_release(loc.path)
        out["release"] = info.version
        out["launch_form"] = info.abi.launch_form.label  # which launch call the kit uses on it
        if info.abi.opencl_adapter_linked:
            out["adapters"] = sorted([*out["adapters"], "opencl (linked into the loader)"])
    except Exception as exc:
        out["release_error"] = _error(exc)
    # One session per device type: the GPU is what the xpu profile is for; the CPU device is the
    # cpu profile's stand-in.
    for kind in ("gpu", "cpu"):
        try:
            with ur.Session(kind) as session:
                out[kind] = _device(session.device)
        except Exception as exc:
            out[kind] = {"error": _error(exc)}
    return out


def probe_ocloc() -> dict[str, Any]:
    try:
        oc = find_ocloc()
        return {"path": oc.path, "version": oc.version, "targets": sorted(oc.devices), "error": ""}
    except Exception as exc:
        return {"path": "", "version": "", "targets": [], "error": _error(exc)}


def probe_installed() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "triton": dist_version("triton-xpu") or dist_version("triton"),
        "torch": dist_version("torch"),
        "numpy": dist_version("numpy"),
    }


def probe_manifest(path: str = MANIFEST_PATH) -> dict[str, Any]:
    try:
        return {"data": json.loads(Path(path).read_text()), "error": ""}
    except FileNotFoundError:
        return {"data": None, "error": f"{path} not found"}
    except (OSError, ValueError) as exc:
        return {"data": None, "error": f"{path} unreadable: {_error(exc)}"}


def collect() -> dict[str, Any]:
    sections = {
        "oneapi": probe_oneapi,
        "level_zero": probe_level_zero,
        "ur": probe_ur,
        "ocloc": probe_ocloc,
        "installed": probe_installed,
        "manifest": probe_manifest,
    }
    report: dict[str, Any] = {"probe_version": PROBE_VERSION}
    for name, fn in sections.items():
        try:
            report[name] = fn()
        except Exception as exc:  # a probe bug must not hide the other sections
            report[name] = {"error": f"probe failed: {_error(exc)}"}
    return report


def main() -> int:
    # Keep stdout pure JSON: library warnings and logs go to stderr.
    print(json.dumps(collect(), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
