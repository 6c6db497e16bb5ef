"""The image's manifest: what is ACTUALLY installed, next to the pins it was built from.

    python -m xpukit.runtime.image.manifest OUT.json     (the image build's last step)

Versions come from the installed things themselves, through the kit's one UR loader search
(``ur.loader.find_loader``) and one compiler probe (``compiler_id.identify``: ocloc's own answer, the
IGC it loads, the Debian packages its folder was assembled from), never from the pins; the
pins (the build args) ride along under "pins". :func:`mismatches` compares the two: the build
fails on any difference, and ``invoke doctor`` reports the same list for an existing image.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xpukit import layout
from xpukit.errors import XpukitError
from xpukit.runtime.offline import compiler_id
from xpukit.runtime.ur.loader import detect_release, find_loader

MANIFEST_PATH = layout.MANIFEST
# build arg -> key under "pins"
PIN_ARGS = {
    "PYTHON_VERSION": "python",
    "OCLOC_VERSION": "ocloc",
    "OCLOC_PACKAGE": "ocloc_package",
    "OCLOC_SOURCE": "ocloc_source",
    "OCLOC_IGC_PACKAGE": "ocloc_igc_package",
    "OMIX_PACKAGE": "omix_package",
    "OMIX_VERSION": "omix",
    "OCLOC_DEBS": "ocloc_debs",
    "TRITON_SOURCE": "triton_source",
    "TRITON_VERSION": "triton",
    "TRITON_COMMIT": "triton_commit",
    "TORCH_SOURCE": "torch_source",
    "TORCH_COMMIT": "torch_commit",
    "UR_SOURCE": "ur_source",
    "UR_VERSION": "ur",
    "PYPI_PINS": "pypi",
    "XPUKIT_PINS": "fingerprint",
}


def dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _run(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def ocloc_info(package_name: str = "") -> dict[str, Any]:
    """ocloc and the IGC it loads. The package: for the kit's compiler folder, ``package_name`` as
    its PACKAGES file records it (dpkg does not know the folder); else the dpkg package owning ocloc."""
    try:
        found = compiler_id.identify()
    except XpukitError:
        return {"path": "", "version": "", "package": "", "package_version": "", "igc": "", "packages": {}}
    if compiler_id.folder_of(found.ocloc_path):
        package = package_name or "intel-ocloc"
        package_version = found.package_version(package)
    else:
        package = _run(["dpkg-query", "-S", found.ocloc_path]).split(":")[0]
        package_version = _run(["dpkg-query", "-W", "-f=${Version}", package]) if package else ""
    return {
        "path": found.ocloc_path,
        "version": found.ocloc_version,
        "package": package,
        "package_version": package_version,
        "igc": found.igc_version,
        "igc_path": found.igc_path,
        "igc_build_id": found.igc_build_id,
        "packages": dict(found.packages),
    }


# The GPU user-mode stack as dpkg knows it: the compute runtime (Level Zero / OpenCL), IGC, ocloc,
# the Level Zero loader and OMIX. Intel's repository versions the runtime and ocloc alike.
GPU_PACKAGES = (
    "libze-intel-gpu1",
    "intel-opencl-icd",
    "intel-level-zero-gpu",
    "intel-ocloc",
    "libigc2",
    "libigc1",
    "libze1",
    "level-zero",
    "intel-omix-dev",
)
RUNTIME_PACKAGES = ("libze-intel-gpu1", "intel-opencl-icd", "intel-level-zero-gpu")


def gpu_packages(names: tuple[str, ...] = GPU_PACKAGES) -> dict[str, dict[str, Any]]:
    """Each installed one of ``names``: its version and whether apt holds it (absent ones left out)."""
    out = _run(["dpkg-query", "-W", "-f=${Package}\t${Version}\t${Status}\n", *names])
    if not out:  # dpkg-query exits 1 when any name is unknown: ask one by one
        lines = [_run(["dpkg-query", "-W", "-f=${Package}\t${Version}\t${Status}\n", n]) for n in names]
        out = "\n".join(line for line in lines if line)
    # `apt-mark hold` sets dpkg's selection, the first word of Status ("hold ok installed"). Read it
    # there: `apt-mark showhold` would write apt's pkgcache.bin/srcpkgcache.bin into the image's
    # layer, and those differ between two builds of the same commit (tests/engine/test_verify.py).
    found: dict[str, dict[str, Any]] = {}
    for line in out.splitlines():
        name, _, rest = line.partition("\t")
        version, _, status = rest.partition("\t")
        if version and status.endswith("installed"):
            found[name] = {"version": version, "held": status.split()[0] == "hold"}
    return found


def gpu_stack_problems(packages: Mapping[str, Mapping[str, Any]], pins: Mapping[str, Any]) -> list[str]:
    """An ocloc from Intel's GPU repository must match the compute runtime, and the ocloc/IGC pair
    (and OMIX) be held, so no later apt step moves one without the other."""
    problems = []
    ocloc_package = str(pins.get("ocloc_package", ""))
    if pins.get("ocloc_source") == "intel-gpu-repo" and ocloc_package:
        ocloc = packages.get(ocloc_package)
        runtime = next(({**packages[n], "name": n} for n in RUNTIME_PACKAGES if n in packages), None)
        if ocloc and runtime and ocloc["version"] != runtime["version"]:
            problems.append(
                f"{ocloc_package} {ocloc['version']} does not match the compute runtime "
                f"({runtime['name']} {runtime['version']})"
            )
        held = [ocloc_package, str(pins.get("ocloc_igc_package", ""))]
        for name in filter(None, held):
            if name not in packages:
                problems.append(f"{name} is not installed")
            elif not packages[name]["held"]:
                problems.append(f"{name} is not held (apt-mark hold): an apt upgrade could split the ocloc/IGC pair")
    omix = str(pins.get("omix_package", ""))
    if omix:
        if omix not in packages:
            problems.append(f"{omix} is not installed")
        else:
            if pins.get("omix") and packages[omix]["version"] != pins["omix"]:
                problems.append(f"{omix} pinned {pins['omix']}, installed {packages[omix]['version']}")
            if not packages[omix]["held"]:
                problems.append(f"{omix} is not held (apt-mark hold)")
    return problems


def ur_loader_info() -> dict[str, str]:
    """The loader xpukit.runtime.ur loads, and its release."""
    try:
        location = find_loader()
    except XpukitError:
        return {"path": "", "api_version": "", "release": "", "source": ""}
    try:
        release = detect_release(location.path)
        version, api = release.version, "" if release.api_minor is None else f"0.{release.api_minor}"
    except XpukitError:
        version, api = "", ""
    return {
        "path": str(location.path),
        "api_version": api,
        "release": version,
        "source": location.source,
    }


def os_release() -> str:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return ""
    match = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
    return match.group(1) if match else ""


def collect(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What is installed here, plus the pins from the build args in ``environ``."""
    environ = os.environ if environ is None else environ
    return {
        "profile": environ.get("XPUKIT_PROFILE", ""),
        "base_image": environ.get("BASE_IMAGE", ""),
        "os": os_release(),
        "python": platform.python_version(),
        "triton": dist_version("triton-xpu") or dist_version("triton"),
        "triton_commit": environ.get("TRITON_COMMIT", ""),
        "torch": dist_version("torch"),
        "numpy": dist_version("numpy"),
        "ocloc": ocloc_info(environ.get("OCLOC_PACKAGE", "")),
        "gpu_packages": gpu_packages(),
        "ur_loader": ur_loader_info(),
        "intel_opencl_rt": dist_version("intel-opencl-rt"),
        "pypi": {req.partition("==")[0]: dist_version(req.partition("==")[0]) for req in _pypi_pins(environ)},
        "pins": {key: environ.get(arg, "") for arg, key in PIN_ARGS.items()},
    }


def _pypi_pins(environ: Mapping[str, str]) -> list[str]:
    return [req for req in environ.get("PYPI_PINS", "").split() if "==" in req]


def mismatches(manifest: Mapping[str, Any]) -> list[str]:
    """Each way what the manifest says is installed differs from its pins ("" pins are not checked)."""
    pins = manifest.get("pins") or {}
    problems = []
    for key in ("python", "triton"):
        pin, have = str(pins.get(key, "")), str(manifest.get(key, ""))
        if key == "triton" and pins.get("triton_source") != "pypi":
            continue  # a git build's version carries the commit; checked below
        if pin and pin != have:
            problems.append(f"{key} pinned {pin}, installed {have or 'nothing'}")
    ocloc = found if isinstance(found := manifest.get("ocloc"), Mapping) else {}
    if pins.get("ocloc") and ocloc.get("package_version") and pins["ocloc"] != ocloc["package_version"]:
        problems.append(f"ocloc pinned {pins['ocloc']}, installed {ocloc['package_version']}")
    if isinstance(manifest.get("gpu_packages"), Mapping):  # manifests written before it was recorded lack it
        problems += gpu_stack_problems(manifest["gpu_packages"], pins)
    problems += _compiler_folder_mismatches(pins, ocloc)
    loader = found if isinstance(found := manifest.get("ur_loader"), Mapping) else {}
    if pins.get("ur_source") == "pypi" and pins.get("ur") and loader.get("release") != pins["ur"]:
        problems.append(f"UR pinned {pins['ur']}, the loader found is {loader.get('release') or 'absent'}")
    commit, triton = str(pins.get("triton_commit", "")), str(manifest.get("triton", ""))
    if pins.get("triton_source") == "git" and commit and "+git" in triton and commit[:8] not in triton:
        problems.append(f"triton_commit pinned {commit[:8]}, installed {triton}")
    torch_commit, torch = str(pins.get("torch_commit", "")), str(manifest.get("torch", ""))
    if pins.get("torch_source") == "source" and torch_commit and "+git" in torch and torch_commit[:7] not in torch:
        problems.append(f"torch_commit pinned {torch_commit[:7]}, installed {torch}")
    installed = manifest.get("pypi") or {}
    for req in str(pins.get("pypi", "")).split():
        name, _, version = req.partition("==")
        if name in installed and installed[name] != version:
            problems.append(f"{name} pinned {version}, installed {installed[name] or 'nothing'}")
    return problems


def _numbers(version: str, count: int) -> tuple[int, ...]:
    """The first ``count`` numbers of a version, the Debian epoch and revision left out."""
    upstream = version.partition(":")[2] if ":" in version else version
    return tuple(int(n) for n in re.findall(r"\d+", upstream.rsplit("-", 1)[0])[:count])


def _compiler_folder_mismatches(pins: Mapping[str, Any], ocloc: Mapping[str, Any]) -> list[str]:
    """The debian-folder source: every pinned .deb is the one the folder records, and what runs agrees
    with it (ocloc's own version answer, the version in libigc's file name)."""
    if pins.get("ocloc_source") != "debian-folder":
        return []
    problems = []
    recorded = ocloc.get("packages") or {}
    pinned = dict(spec.partition("=")[::2] for spec in str(pins.get("ocloc_debs", "")).split())
    for name, rest in pinned.items():
        version = rest.rpartition("/")[0]
        if recorded.get(name) != version:
            problems.append(
                f"compiler folder: {name} pinned {version}, the folder has {recorded.get(name) or 'nothing'}"
            )
    ocloc_pin = pins.get("ocloc") or ""
    if ocloc_pin and _numbers(ocloc_pin, 3) != _numbers(str(ocloc.get("version", "")), 3):
        problems.append(f"ocloc pinned {ocloc_pin}, the ocloc found reports {ocloc.get('version') or 'nothing'}")
    igc_pin = pinned.get("libigc2", "").rpartition("/")[0]
    if igc_pin and _numbers(igc_pin, 3) != _numbers(str(ocloc.get("igc", "")), 3):
        problems.append(f"IGC pinned {igc_pin}, the ocloc found loads {ocloc.get('igc') or 'no versioned libigc'}")
    return problems


def missing(manifest: Mapping[str, Any]) -> list[str]:
    """What an image must have and does not."""
    absent = [key for key in ("python", "triton") if not manifest.get(key)]
    if not (manifest.get("ocloc") or {}).get("version"):
        absent.append("ocloc")
    if not (manifest.get("ur_loader") or {}).get("path"):
        absent.append("ur_loader")
    return absent


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else MANIFEST_PATH)
    manifest = collect()
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    print(text, end="")
    problems = [f"missing from the image: {', '.join(missing(manifest))}"] if missing(manifest) else []
    problems += mismatches(manifest)
    if problems:
        for problem in problems:
            print(f"manifest: {problem}", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
