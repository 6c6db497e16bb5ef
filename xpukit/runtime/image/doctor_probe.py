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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xpukit.runtime import ur
from xpukit.runtime.image.manifest import MANIFEST_PATH, dist_version, gpu_packages
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


# Where Level Zero's and SYCL's headers live: the distribution's level-zero dev package, and the
# oneAPI compiler's include folder (Triton's Intel driver compiles its launcher against both).
ZE_HEADER_DIRS = ("/usr/include/level_zero", "/usr/local/include/level_zero")
SYCL_HEADER = "sycl/sycl.hpp"


def probe_headers(oneapi_root: str = "", extra_ze: tuple[str, ...] = ()) -> dict[str, str]:
    """The ze_api.h and sycl/sycl.hpp a Triton build or first launch compiles against ("" = none)."""
    root = oneapi_root or os.environ.get("ONEAPI_ROOT", "/opt/intel/oneapi")
    ze_dirs = [*extra_ze, *(os.path.join(d, "level_zero") for d in os.environ.get("CPATH", "").split(":") if d)]
    ze_dirs += [os.path.join(os.environ["ZE_PATH"], "include/level_zero")] if os.environ.get("ZE_PATH") else []
    ze_dirs += list(ZE_HEADER_DIRS)
    ze = next((os.path.join(d, "ze_api.h") for d in ze_dirs if os.path.isfile(os.path.join(d, "ze_api.h"))), "")
    sycl_dirs = [os.path.join(os.environ["CMPLR_ROOT"], "include")] if os.environ.get("CMPLR_ROOT") else []
    sycl_dirs += sorted(glob.glob(f"{root}/compiler/*/include"), reverse=True)
    sycl = next((os.path.join(d, SYCL_HEADER) for d in sycl_dirs if os.path.isfile(os.path.join(d, SYCL_HEADER))), "")
    return {"ze_api": ze, "sycl": sycl}


def probe_triton_dists() -> dict[str, Any]:
    """Which installed distributions put a top-level ``triton`` package here, and whether the
    ``triton`` that imports has Intel's backend: a generic wheel installed after the XPU one wins."""
    import importlib.metadata
    import importlib.util

    owners = sorted(set(importlib.metadata.packages_distributions().get("triton", [])))
    spec = importlib.util.find_spec("triton")
    location = str(Path(spec.origin).parent) if spec and spec.origin else ""
    intel = bool(location) and os.path.isdir(os.path.join(location, "backends", "intel"))
    return {
        "distributions": {name: dist_version(name) for name in owners},
        "location": location,
        "intel_backend": intel,
    }


def probe_render_nodes(dev_root: str = "/") -> list[dict[str, Any]]:
    """Each /dev/dri/renderD* in this container: its group id and whether this process can open it."""
    nodes = []
    for path in sorted(glob.glob(os.path.join(dev_root, "dev/dri/renderD*"))):
        try:
            gid = os.stat(path).st_gid
        except OSError:
            continue
        nodes.append({"path": path, "gid": gid, "open": os.access(path, os.R_OK | os.W_OK)})
    return nodes


def probe_gpu_stack(root: str = "/") -> dict[str, Any]:
    """The GPU user-mode stack's packages (versions, holds), DLE's version (/opt/intel/installed.txt,
    which upstream's bug template reads since #7823) and Intel's GPU repository line (LTS or rolling)."""
    installed = ""
    try:
        text = Path(root, "opt/intel/installed.txt").read_text(errors="replace")
        match = re.search(r"DLE_VERSION\s*[=:]\s*(\S+)", text) or re.search(
            r"deep-learning-essentials\S*\s+(\S+)", text
        )
        installed = match.group(1) if match else ""
    except OSError:
        pass
    return {"packages": gpu_packages(), "dle": installed, "driver_line": driver_line(root)}


_INTEL_GPU_REPO = re.compile(r"repositories\.intel\.com/gpu/")


def driver_line(root: str = "/") -> str:
    """The Intel GPU driver line the package sources name: ``lts/NNNN``, ``rolling``, or "" when no
    source names Intel's GPU repository (apt lists, yum/dnf repos, zypper repos)."""
    found = ""
    for pattern in (
        "etc/apt/sources.list",
        "etc/apt/sources.list.d/*",
        "etc/yum.repos.d/*.repo",
        "etc/zypp/repos.d/*.repo",
    ):
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            try:
                text = Path(path).read_text(errors="replace")
            except OSError:
                continue
            for line in text.splitlines():
                if line.lstrip().startswith("#"):
                    continue
                # apt: ".../gpu/ubuntu noble/lts/2523 unified"; rpm: ".../gpu/rhel/9.2/lts/2523/unified/..."
                match = _INTEL_GPU_REPO.search(line)
                if not match:
                    continue
                lts = re.search(r"\blts/(\d+)", line)
                if lts:
                    return f"lts/{lts.group(1)}"
                found = "rolling"
    return found


def probe_manifest(path: str = MANIFEST_PATH) -> dict[str, Any]:
    try:
        return {"data": json.loads(Path(path).read_text()), "error": ""}
    except FileNotFoundError:
        return {"data": None, "error": f"{path} not found"}
    except (OSError, ValueError) as exc:
        return {"data": None, "error": f"{path} unreadable: {_error(exc)}"}


def collect() -> dict[str, Any]:
    sections: dict[str, Callable[[], Any]] = {
        "oneapi": probe_oneapi,
        "level_zero": probe_level_zero,
        "ur": probe_ur,
        "ocloc": probe_ocloc,
        "installed": probe_installed,
        "manifest": probe_manifest,
        "headers": probe_headers,
        "triton_dists": probe_triton_dists,
        "render_nodes": probe_render_nodes,
        "gpu_stack": probe_gpu_stack,
        "kernel": platform.release,
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
