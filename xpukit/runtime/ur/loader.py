"""Find, identify and load the Unified Runtime loader, then bind the release's prototypes.

Search order: an explicit path, ``XPUKIT_UR_LOADER``, the oneAPI compiler's lib directory
(``CMPLR_ROOT``, ``ONEAPI_ROOT``, ``/opt/intel/oneapi``), then the pip wheel's lib directory
(``<sys.prefix>/lib``). When the loader is the pip runtime and Intel's CPU OpenCL runtime
(``intel-opencl-rt``) is installed, ``OCL_ICD_FILENAMES`` is pointed at it before the loader is
loaded, so UR's OpenCL adapter finds the CPU device.
"""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import os
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xpukit.runtime.ur import _api
from xpukit.runtime.ur.errors import LoaderNotFound, UnsupportedURRelease, raise_result

LOADER_NAME = "libur_loader.so"
ENV_LOADER = "XPUKIT_UR_LOADER"


@dataclasses.dataclass(frozen=True)
class LoaderLocation:
    path: Path  # the libur_loader.so file
    source: str  # "explicit", "env", "oneapi", "pip"

    @property
    def lib_dir(self) -> Path:
        return self.path.parent


def _as_loader_file(candidate: str | os.PathLike[str]) -> Path | None:
    p = Path(candidate).expanduser()
    for f in (p, p / LOADER_NAME, p / "lib" / LOADER_NAME):
        if f.is_file():
            return f
    return None


def _oneapi_dirs() -> list[Path]:
    dirs: list[Path] = []
    if os.environ.get("CMPLR_ROOT"):
        dirs.append(Path(os.environ["CMPLR_ROOT"]) / "lib")
    roots = [os.environ.get("ONEAPI_ROOT", ""), "/opt/intel/oneapi"]
    for root in filter(None, roots):
        dirs.append(Path(root) / "compiler" / "latest" / "lib")
        dirs.extend(Path(d) for d in sorted(glob.glob(f"{root}/compiler/20*/lib"), reverse=True))
    return dirs


def _pip_dirs() -> list[Path]:
    prefixes = [sys.prefix, getattr(sys, "base_prefix", sys.prefix)]
    try:
        import site

        prefixes.append(site.getuserbase())
    except Exception:  # pragma: no cover - site may be stripped in embedded pythons
        pass
    return [Path(p) / "lib" for p in dict.fromkeys(prefixes)]


def find_loader(explicit: str | os.PathLike[str] | None = None) -> LoaderLocation:
    """Locate ``libur_loader.so``; raises :class:`LoaderNotFound` naming every place tried."""
    tried: list[str] = []
    if explicit:
        f = _as_loader_file(explicit)
        if f is None:
            raise LoaderNotFound(f"no {LOADER_NAME} at {explicit}", "pass the loader file or its prefix/lib directory")
        return LoaderLocation(f.resolve(), "explicit")
    env = os.environ.get(ENV_LOADER)
    if env:
        f = _as_loader_file(env)
        if f is None:
            raise LoaderNotFound(
                f"{ENV_LOADER}={env} does not name a {LOADER_NAME}",
                f"point {ENV_LOADER} at the loader file or unset it",
            )
        return LoaderLocation(f.resolve(), "env")
    for source, dirs in (("oneapi", _oneapi_dirs()), ("pip", _pip_dirs())):
        for d in dirs:
            tried.append(str(d))
            f = d / LOADER_NAME
            if f.is_file():
                return LoaderLocation(f.resolve(), source)
    raise LoaderNotFound(
        f"{LOADER_NAME} not found (looked in {', '.join(tried)})",
        f"pip install intel-cmplr-lib-ur intel-cmplr-lib-rt, source oneAPI's setvars.sh, or set {ENV_LOADER}",
    )


@dataclasses.dataclass(frozen=True)
class ReleaseInfo:
    line: str  # "2025.3"
    version: str  # "2025.3.3" when known, else the line
    api_minor: int | None  # from the loader's file version (0.<minor>.<patch>)
    how: str  # how the release was found


def _api_minor(loader: Path) -> int | None:
    for f in sorted(loader.parent.glob(LOADER_NAME + ".0.*")):
        m = re.fullmatch(re.escape(LOADER_NAME) + r"\.0\.(\d+)\.\d+", f.name)
        if m:
            return int(m.group(1))
    real = os.path.realpath(loader)
    m = re.search(r"\.so\.0\.(\d+)\.\d+$", real)
    return int(m.group(1)) if m else None


def _dist_version(loader: Path) -> str | None:
    prefix = loader.parent.parent
    patterns = [
        f"{loader.parent}/python3*/site-packages/intel_cmplr_lib_ur-*.dist-info",
        f"{prefix}/lib*/python3*/site-packages/intel_cmplr_lib_ur-*.dist-info",
    ]
    for pat in patterns:
        for d in sorted(glob.glob(pat)):
            m = re.search(r"intel_cmplr_lib_ur-(\d+\.\d+\.\d+)", d)
            if m:
                return m.group(1)
    m = re.search(r"/compiler/(20\d\d\.\d+)(?:\.\d+)?/", str(loader))
    return m.group(1) if m else None


def detect_release(loader: Path, lib: ctypes.CDLL | None = None) -> ReleaseInfo:
    """The oneAPI release line of a loader; raises :class:`UnsupportedURRelease` for others."""
    supported = ", ".join(_api.SUPPORTED_RELEASES)
    minor = _api_minor(loader)
    version = _dist_version(loader)
    if version:
        line = ".".join(version.split(".")[:2])
        how = "package metadata"
    elif minor is not None and minor in _api.API_MINOR_TO_RELEASES:
        lines = _api.API_MINOR_TO_RELEASES[minor]
        line = lines[-1]
        if len(lines) > 1 and lib is not None and hasattr(lib, _api.PRE_2025_3_SYMBOL):
            line = lines[0]  # 2025.2 and 2025.3 share the file version, not the launch call
        version = line
        how = f"loader file version 0.{minor} and its exports"
    else:
        raise UnsupportedURRelease(
            f"cannot tell which UR release {loader} is (no package metadata, no versioned file name)",
            f"use a loader from one of the supported releases: {supported}",
        )
    if line not in _api.RELEASE_ABIS:
        raise UnsupportedURRelease(
            f"UR release {version} at {loader} is not supported (its prototypes differ)",
            f"install one of the supported releases: {supported} "
            "(pip install 'intel-cmplr-lib-ur==2025.3.*' 'intel-cmplr-lib-rt==2025.3.*')",
        )
    if lib is not None:
        for sym in _api.NEWER_THAN_SUPPORTED_SYMBOLS:
            if hasattr(lib, sym):
                raise UnsupportedURRelease(
                    f"UR loader {loader} exports {sym}: it is newer than {line} and its launch call differs",
                    f"use a loader from one of the supported releases: {supported}",
                )
    return ReleaseInfo(line, version, minor, how)


def find_cpu_opencl_runtime(loader: Path | None = None) -> Path | None:
    """``libintelocl.so`` from the intel-opencl-rt wheel, if installed."""
    override = os.environ.get("XPUKIT_OPENCL_RT")
    candidates = [Path(override)] if override else []
    if loader is not None:
        candidates.append(loader.parent)
    candidates.extend(_pip_dirs())
    for c in candidates:
        f = c if c.is_file() else c / "libintelocl.so"
        if f.is_file():
            return f.resolve()
    return None


def setup_cpu_icd(loader: LoaderLocation) -> Path | None:
    """Point the OpenCL ICD loader at Intel's CPU runtime (pip runtime only; must precede loading).

    Returns the runtime used, or None when the environment already chose (or it is absent).
    """
    if loader.source == "oneapi":
        return None  # oneAPI installs register their ICDs in /etc/OpenCL/vendors
    rt = find_cpu_opencl_runtime(loader.path)
    if rt is None:
        return None
    if not os.environ.get("OCL_ICD_FILENAMES"):
        os.environ["OCL_ICD_FILENAMES"] = str(rt)
    return rt


def preload_icd_loader(loader: LoaderLocation, runtime: Path | None) -> None:
    """Older UR prefixes (the release matrix) carry no libOpenCL.so.1; load the one next to the
    CPU runtime so the OpenCL adapter resolves it by soname. Call after the UR loader is loaded:
    this libOpenCL has no RUNPATH and finds libsvml & co. only as already-loaded libraries."""
    if runtime is None or (loader.lib_dir / "libOpenCL.so.1").exists():
        return
    icd = runtime.parent / "libOpenCL.so.1"
    if icd.is_file():
        ctypes.CDLL(str(icd), mode=ctypes.RTLD_GLOBAL)


class UrLibrary:
    """The loaded UR loader with the release's prototypes bound, 1:1 with the C API.

    ``lib.urQueueFinish(queue)`` calls the C function and raises the result-named exception on
    failure; ``lib.raw.urQueueFinish`` is the unchecked ctypes function (returns the code).
    """

    def __init__(self, location: LoaderLocation) -> None:
        self.location = location
        self.cpu_runtime = setup_cpu_icd(location)
        try:
            self.raw = ctypes.CDLL(str(location.path), mode=ctypes.RTLD_LOCAL)
        except OSError as exc:
            raise LoaderNotFound(
                f"cannot load {location.path}: {exc}",
                "install intel-cmplr-lib-rt at the same version as intel-cmplr-lib-ur",
            ) from None
        preload_icd_loader(location, self.cpu_runtime)
        self.release = detect_release(location.path, self.raw)
        self.abi = _api.RELEASE_ABIS[self.release.line]
        # urDeviceWaitExp is in no supported release; its prototype is bound once a release
        # that has it is added to _api.RELEASE_ABIS (has_device_wait), never guessed.
        self.has_device_wait = self.abi.has_device_wait and hasattr(self.raw, "urDeviceWaitExp")
        for name, argtypes in self.abi.prototypes().items():
            fn = getattr(self.raw, name)
            fn.argtypes = argtypes
            fn.restype = _api.result_t
            setattr(self, name, _checked(fn, name))
        self.urLoaderInit(0, None)

    def __repr__(self) -> str:
        return f"<UrLibrary {self.location.path} release={self.release.version}>"


def _checked(fn: Any, name: str) -> Callable[..., None]:
    def call(*args: Any) -> None:
        code = fn(*args)
        if code:
            raise_result(code, name)

    call.__name__ = name
    call.__qualname__ = name
    return call


_LOCK = threading.Lock()
_LOADED: UrLibrary | None = None


def load(path: str | os.PathLike[str] | None = None) -> UrLibrary:
    """Load (once per process) and initialise the UR loader.

    A process holds one UR loader: asking for a different one afterwards is an error, because
    adapters and handles from two loaders must never meet.
    """
    global _LOADED
    with _LOCK:
        location = find_loader(path)
        if _LOADED is not None:
            if _LOADED.location.path != location.path:
                raise LoaderNotFound(
                    f"this process already uses {_LOADED.location.path}; cannot also load {location.path}",
                    "run the other UR release in its own process",
                )
            return _LOADED
        _LOADED = UrLibrary(location)
        return _LOADED
