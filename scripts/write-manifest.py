"""Write /opt/xpukit/manifest.json from what is ACTUALLY installed in the image.

Runs as the image build's last step. Versions are read from the installed things themselves
(ocloc's own answer, the UR loader's file and wheel, the packages' metadata), never copied from the
pins; the pins ride along under "pins" so `invoke doctor` and the tests can compare the two.
    python write-manifest.py OUT.json
"""

from __future__ import annotations

import glob
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def _run(cmd: list[str], cwd: str | None = None) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=cwd, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def ocloc_info() -> dict[str, str]:
    path = shutil.which("ocloc") or ""
    if not path:
        return {"path": "", "version": "", "package": ""}
    # Current ocloc answers `ocloc --version`; 22.43 only writes OCL_DRIVER_VERSION into the cwd.
    version = ""
    first = _run([path, "--version"]).splitlines()
    if first and "Invalid option" not in first[0]:
        match = re.search(r"(\d+\.\d+\.\d+(?:\.\d+)?)", first[0])
        version = match.group(1) if match else ""
    if not version:
        with tempfile.TemporaryDirectory() as tmp:
            _run([path, "query", "OCL_DRIVER_VERSION"], cwd=tmp)
            answer = Path(tmp, "OCL_DRIVER_VERSION")
            version = answer.read_text().strip(" \n\x00") if answer.exists() else ""
    package = _run(["dpkg-query", "-S", os.path.realpath(path)]).split(":")[0]
    package_version = _run(["dpkg-query", "-W", "-f=${Version}", package]) if package else ""
    return {"path": path, "version": version, "package": package, "package_version": package_version}


def ur_loader_info() -> dict[str, str]:
    """The loader xpukit.runtime.ur would find first: the wheel's, else the oneAPI compiler's."""
    prefixes = [sys.prefix, *sorted(glob.glob("/opt/intel/oneapi/compiler/*"), reverse=True)]
    for prefix in prefixes:
        real = sorted(glob.glob(os.path.join(prefix, "lib", "libur_loader.so.*.*.*")))
        if real:
            api = re.search(r"\.so\.(\d+\.\d+\.\d+)$", real[-1])
            return {
                "path": real[-1],
                "api_version": api.group(1) if api else "",
                "release": dist_version("intel-cmplr-lib-ur") if prefix == sys.prefix else Path(prefix).name,
            }
    return {"path": "", "api_version": "", "release": ""}


def os_release() -> str:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return ""
    match = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
    return match.group(1) if match else ""


def main(out: str) -> int:
    triton_version = dist_version("triton-xpu") or dist_version("triton")
    manifest = {
        "profile": os.environ.get("XPUKIT_PROFILE", ""),
        "base_image": os.environ.get("BASE_IMAGE", ""),
        "os": os_release(),
        "python": platform.python_version(),
        "triton": triton_version,
        "triton_commit": os.environ.get("TRITON_COMMIT", ""),
        "torch": dist_version("torch"),
        "numpy": dist_version("numpy"),
        "ocloc": ocloc_info(),
        "ur_loader": ur_loader_info(),
        "intel_opencl_rt": dist_version("intel-opencl-rt"),
        "pins": {
            "python": os.environ.get("PYTHON_VERSION", ""),
            "ocloc": os.environ.get("OCLOC_VERSION", ""),
            "ocloc_package": os.environ.get("OCLOC_PACKAGE", ""),
            "triton_source": os.environ.get("TRITON_SOURCE", ""),
            "triton": os.environ.get("TRITON_VERSION", ""),
            "triton_commit": os.environ.get("TRITON_COMMIT", ""),
            "torch_source": os.environ.get("TORCH_SOURCE", ""),
            "torch_commit": os.environ.get("TORCH_COMMIT", ""),
            "ur_source": os.environ.get("UR_SOURCE", ""),
            "ur": os.environ.get("UR_VERSION", ""),
            "pypi": os.environ.get("PYPI_PINS", ""),
            "fingerprint": os.environ.get("XPUKIT_PINS", ""),
        },
    }
    missing = [key for key in ("python", "triton") if not manifest[key]]
    if not manifest["ocloc"]["version"]:
        missing.append("ocloc")
    if not manifest["ur_loader"]["path"]:
        missing.append("ur_loader")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    print(json.dumps(manifest, indent=2, sort_keys=True))
    if missing:
        print(f"write-manifest: missing from the image: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/opt/xpukit/manifest.json"))
