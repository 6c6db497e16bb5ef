"""Find, identify and load the Unified Runtime loader, then bind the release's prototypes.

Search order: an explicit path, ``XPUKIT_UR_LOADER``, the oneAPI compiler's lib directory
(``CMPLR_ROOT``, ``ONEAPI_ROOT``, ``/opt/intel/oneapi``), then the pip wheel's lib directory
(``<sys.prefix>/lib``). The file found must export ``urLoaderInit`` and ``urAdapterGet`` (read
from its ELF dynamic symbols, before anything loads it). When the loader is the pip runtime and
Intel's CPU OpenCL runtime (``intel-opencl-rt``) is installed, ``OCL_ICD_FILENAMES`` is pointed at
it before the loader is loaded, so UR's OpenCL adapter finds the CPU device.
"""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import logging
import os
import re
import struct
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xpukit.runtime.ur import _api
from xpukit.runtime.ur.errors import LoaderNotFound, UnsupportedURRelease, raise_result

LOADER_NAME = "libur_loader.so"
ENV_LOADER = "XPUKIT_UR_LOADER"
log = logging.getLogger("xpukit.runtime.ur")


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


LOADER_SYMBOLS = ("urLoaderInit", "urAdapterGet")  # every UR loader exports both; urLoaderInit only it


def _dynamic_exports(path: Path, wanted: tuple[str, ...]) -> set[str] | None:
    """Which of ``wanted`` the ELF shared library at ``path`` defines in its dynamic symbol table
    (read with ``struct``, not loaded: loading runs the library's constructors). None when it is not
    a 64-bit little-endian ELF shared library; all of ``wanted`` when it has no section headers to
    tell (a library stripped of them: loading it is the only test left)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return None
        if struct.unpack_from("<H", head, 16)[0] != 3:  # e_type ET_DYN
            return None
        (shoff,) = struct.unpack_from("<Q", head, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
        if not shoff or not shnum or shentsize < 64:
            return set(wanted)
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        # (sh_type, sh_offset, sh_size, sh_link) of each section
        sections = [struct.unpack_from("<4xI16xQQI", table, i * shentsize) for i in range(len(table) // shentsize)]
        dynsym = next((s for s in sections if s[0] == 11), None)  # SHT_DYNSYM
        if dynsym is None or dynsym[3] >= len(sections):
            return set()
        _, sym_off, sym_size, link = dynsym
        f.seek(sym_off)
        symbols = f.read(sym_size)
        _, str_off, str_size, _ = sections[link]
        f.seek(str_off)
        strings = f.read(str_size)
    want = {name.encode(): name for name in wanted}
    found: set[str] = set()
    for i in range(len(symbols) // 24):  # Elf64_Sym: st_name, st_info, st_other, st_shndx, ...
        name_at, shndx = struct.unpack_from("<I2xH", symbols, i * 24)
        if shndx == 0:  # SHN_UNDEF: imported, not exported
            continue
        end = strings.find(b"\0", name_at)
        name = want.get(strings[name_at:end])
        if name:
            found.add(name)
    return found


def why_not_a_loader(path: Path) -> str:
    """Why the file at ``path`` is not a Unified Runtime loader, in a few words ("" when it is one):
    the line it goes into holds a path and a fix in 200 characters."""
    try:
        exports = _dynamic_exports(path, LOADER_SYMBOLS)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    if exports is None:
        return "not a 64-bit ELF library"
    missing = [s for s in LOADER_SYMBOLS if s not in exports]
    return f"no {missing[0]}" if missing else ""


def _checked_location(f: Path, source: str) -> LoaderLocation:
    """``f`` as the loader, refused before anything loads it when it is not a UR loader (a library
    that is not, loaded, fails later and elsewhere: a missing prototype or libsvml.so)."""
    why = why_not_a_loader(f)
    if not why:
        return LoaderLocation(f.resolve(), source)
    # The problem before the path: a long path is what error_line cuts, never what the line says.
    if source == "env":
        problem = f"the file {ENV_LOADER} names is not a Unified Runtime loader"
        fix = "point it at libur_loader.so.0 or unset it"  # "it": the line names XPUKIT_UR_LOADER first
    elif source == "explicit":
        problem = "the loader path passed is not a Unified Runtime loader"
        fix = "pass libur_loader.so.0 or its prefix/lib directory"
    else:
        problem = f"the {LOADER_NAME} found in {f.parent} is not a Unified Runtime loader"
        fix = f"reinstall intel-cmplr-lib-ur, or set {ENV_LOADER} to a libur_loader.so.0"
    raise LoaderNotFound(f"{problem}: {f} ({why})", fix)


def find_loader(explicit: str | os.PathLike[str] | None = None) -> LoaderLocation:
    """Locate ``libur_loader.so``; raises :class:`LoaderNotFound` naming every place tried, or
    the file that is not a UR loader (checked by its exports, before anything loads it)."""
    tried: list[str] = []
    if explicit:
        f = _as_loader_file(explicit)
        if f is None:
            raise LoaderNotFound(f"no {LOADER_NAME} at {explicit}", "pass the loader file or its prefix/lib directory")
        return _checked_location(f, "explicit")
    env = os.environ.get(ENV_LOADER)
    if env:
        f = _as_loader_file(env)
        if f is None:
            raise LoaderNotFound(
                f"{ENV_LOADER}={env} does not name a {LOADER_NAME}",
                f"point {ENV_LOADER} at the loader file or unset it",
            )
        return _checked_location(f, "env")
    for source, dirs in (("oneapi", _oneapi_dirs()), ("pip", _pip_dirs())):
        for d in dirs:
            tried.append(str(d))
            f = d / LOADER_NAME
            if f.is_file():
                return _checked_location(f, source)
    raise LoaderNotFound(
        f"{LOADER_NAME} not found (looked in {', '.join(tried)})",
        f"pip install intel-cmplr-lib-ur intel-cmplr-lib-rt, source oneAPI's setvars.sh, or set {ENV_LOADER}",
    )


@dataclasses.dataclass(frozen=True)
class ReleaseInfo:
    line: str  # the release line whose ABI is bound, "2026.2"
    version: str  # "2026.2.0" when known, else the line
    api_minor: int | None  # from the loader's file version (0.<minor>.<patch>)
    how: str  # how the release was found
    note: str = ""  # a warning worth one line (a release newer than the newest verified one)

    @property
    def abi(self) -> _api.ReleaseABI:
        return _api.RELEASE_ABIS[self.line]


def _api_minor(loader: Path) -> int | None:
    for f in sorted(loader.parent.glob(LOADER_NAME + ".0.*")):
        m = re.fullmatch(re.escape(LOADER_NAME) + r"\.0\.(\d+)\.\d+", f.name)
        if m:
            return int(m.group(1))
    real = os.path.realpath(loader)
    m = re.search(r"\.so\.0\.(\d+)\.\d+$", real)
    return int(m.group(1)) if m else None


def _dist_version(loader: Path) -> tuple[str, str] | None:
    """(version, how) from the wheel's metadata or the oneAPI install path."""
    prefix = loader.parent.parent
    patterns = [
        f"{loader.parent}/python3*/site-packages/intel_cmplr_lib_ur-*.dist-info",
        f"{prefix}/lib*/python3*/site-packages/intel_cmplr_lib_ur-*.dist-info",
    ]
    for pat in patterns:
        for d in sorted(glob.glob(pat)):
            m = re.search(r"intel_cmplr_lib_ur-(\d+\.\d+\.\d+)", d)
            if m:
                return m.group(1), "package metadata"
    m = re.search(r"/compiler/(20\d\d\.\d+)(?:\.\d+)?/", str(loader))
    return (m.group(1), "oneAPI install path") if m else None


TRACKED_SYMBOLS: tuple[str, ...] = tuple(_api.RELEASE_ABIS[_api.NEWEST_RELEASE].expected_symbols())


def exported_symbols(loader: Path, lib: ctypes.CDLL | None = None) -> dict[str, bool]:
    """Which of the symbols that tell releases apart the loader exports (from the loaded library,
    else from the ELF dynamic symbol table, without loading it)."""
    if lib is not None:
        return {s: hasattr(lib, s) for s in TRACKED_SYMBOLS}
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    with open(loader, "rb") as f:
        dynsym = ELFFile(f).get_section_by_name(".dynsym")
        names = (
            {sym.name for sym in dynsym.iter_symbols() if sym["st_shndx"] != "SHN_UNDEF"}
            if isinstance(dynsym, SymbolTableSection)
            else set()
        )
    return {s: s in names for s in TRACKED_SYMBOLS}


def _differences(abi: _api.ReleaseABI, exports: dict[str, bool]) -> str:
    """What a loader's exports lack or add against ``abi``'s ("" when they match)."""
    expected = abi.expected_symbols()
    missing = [s for s, want in expected.items() if want and not exports.get(s)]
    extra = [s for s, want in expected.items() if not want and exports.get(s)]
    parts = ([f"lacks {', '.join(missing)}"] if missing else []) + ([f"adds {', '.join(extra)}"] if extra else [])
    return "; ".join(parts)


def _line_key(line: str) -> tuple[int, ...]:
    return tuple(int(x) for x in line.split("."))


def detect_release(loader: Path, lib: ctypes.CDLL | None = None) -> ReleaseInfo:
    """The release line whose ABI a loader has, told by its exported symbols (the API version and
    the file version are 0.12 from 2025.2 to 2026.2), its package metadata and, for the 2025.0-2025.2
    lines that export the same symbols, its file version. Raises :class:`UnsupportedURRelease`
    for a loader that matches no supported release, naming what differs."""
    supported = f"{_api.SUPPORTED_RELEASES[0]} to {_api.NEWEST_RELEASE}"
    newest = _api.RELEASE_ABIS[_api.NEWEST_RELEASE]
    install = f"pip install 'intel-cmplr-lib-ur=={_api.NEWEST_RELEASE}.*' 'intel-cmplr-lib-rt=={_api.NEWEST_RELEASE}.*'"
    minor = _api_minor(loader)
    exports = exported_symbols(loader, lib)
    matching = [abi.release for abi in _api.RELEASE_ABIS.values() if not _differences(abi, exports)]
    if minor is not None and minor in _api.API_MINOR_TO_RELEASES:
        by_file = [line for line in matching if line in _api.API_MINOR_TO_RELEASES[minor]]
        matching = by_file or matching
    found = _dist_version(loader)
    if found is not None:
        version, how = found
        line = ".".join(version.split(".")[:2])
        if line in _api.RELEASE_ABIS:
            diff = _differences(_api.RELEASE_ABIS[line], exports)
            if diff:
                raise UnsupportedURRelease(
                    f"UR loader {loader} is {version} by its {how}, but its exports differ from {line}'s: it {diff}",
                    "reinstall intel-cmplr-lib-ur and intel-cmplr-lib-rt at one version, or set XPUKIT_UR_LOADER",
                )
            return ReleaseInfo(line, version, minor, f"{how} and exports")
        if _line_key(line) > _line_key(_api.NEWEST_RELEASE) and _api.NEWEST_RELEASE in matching:
            note = (
                f"UR {version} is newer than the newest release xpukit has verified ({_api.NEWEST_RELEASE}); "
                f"its exports match {_api.NEWEST_RELEASE}'s, so that ABI is used"
            )
            return ReleaseInfo(_api.NEWEST_RELEASE, version, minor, f"{how}; exports as {_api.NEWEST_RELEASE}", note)
        diff = _differences(newest, exports)
        raise UnsupportedURRelease(
            f"UR release {version} at {loader} is not supported"
            + (f" (against {_api.NEWEST_RELEASE}, the newest supported, it {diff})" if diff else ""),
            f"install a supported release ({supported}): {install}",
        )
    if not matching:
        raise UnsupportedURRelease(
            f"UR loader {loader} matches no supported release: against {_api.NEWEST_RELEASE}, the newest "
            f"supported, it {_differences(newest, exports)}",
            f"use a loader of a supported release ({supported}): {install}",
        )
    line = max(matching, key=_line_key)  # 2026.0 and 2026.1 share one ABI: either is right
    return ReleaseInfo(line, line, minor, "exported symbols" + (f" and file version 0.{minor}" if minor else ""))


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


def _same_runtime(entry: str, runtime: Path) -> bool:
    """Whether an ``OCL_ICD_FILENAMES`` entry is ``runtime``: by resolved path (a symlink, a
    versioned name pointing at it), as the same file (the kit's image hard-links the wheel's
    ``libintelocl.so`` and ``libintelocl.so.<version>``), or as a byte-identical copy (pip writes
    them as two files)."""
    if os.path.realpath(entry) == os.path.realpath(runtime):
        return True
    try:
        if os.path.samefile(entry, runtime):
            return True
        if os.path.getsize(entry) != os.path.getsize(runtime):
            return False
        with open(entry, "rb") as a, open(runtime, "rb") as b:
            while True:
                chunk = a.read(1 << 20)
                if chunk != b.read(1 << 20):
                    return False
                if not chunk:
                    return True
    except OSError:  # an entry that does not exist (or cannot be read) is not the runtime
        return False


def icd_filenames_without(runtime: Path | None) -> str:
    """The user's ``OCL_ICD_FILENAMES`` when none of its entries is Intel's CPU runtime ``runtime``;
    "" when it names the runtime (under any name, :func:`_same_runtime`), is unset, or there is no
    runtime. Asked only once the CPU device turned out missing: a value that leaves the runtime out
    may still reach it (another copy, a vendor's ICD), so it is no reason to warn by itself."""
    current = os.environ.get("OCL_ICD_FILENAMES", "")
    if runtime is None or not current:
        return ""
    return "" if any(_same_runtime(e, runtime) for e in current.split(":") if e) else current


def setup_cpu_icd(loader: LoaderLocation) -> Path | None:
    """Point the OpenCL ICD loader at Intel's CPU runtime (pip runtime only; must precede loading).
    Left alone when ``OCL_ICD_FILENAMES`` or ``OCL_ICD_VENDORS`` is already set (setting the first
    beside the second lists the platform twice); should the CPU device then be missing, its error
    names a value that leaves the runtime out (:func:`icd_filenames_without`).

    Returns the runtime used, or None when the environment already chose (or it is absent).
    """
    if loader.source == "oneapi":
        return None  # oneAPI installs register their ICDs in /etc/OpenCL/vendors
    rt = find_cpu_opencl_runtime(loader.path)
    if rt is None:
        return None
    current = os.environ.get("OCL_ICD_FILENAMES")
    if not current and os.environ.get("OCL_ICD_VENDORS"):
        # The user chose their vendors: naming the runtime again in OCL_ICD_FILENAMES would make the
        # ICD loader list its platform twice (it reads both).
        return rt
    if not current:
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


ENV_FORCE_LOAD = "UR_ADAPTERS_FORCE_LOAD"


def check_force_load() -> str:
    """Drop ``UR_ADAPTERS_FORCE_LOAD`` when it names a file that does not exist (must precede
    loading): the loader then loads no adapter at all, not even the ones linked into it (2026.2's
    OpenCL adapter). Returns what was dropped, "" when nothing was."""
    value = os.environ.get(ENV_FORCE_LOAD, "")
    missing = [f for f in value.split(",") if f.strip() and not Path(f.strip()).is_file()]
    if not missing:
        return ""
    del os.environ[ENV_FORCE_LOAD]
    log.warning(
        "xpukit.runtime.ur: UR_ADAPTERS_FORCE_LOAD names %s, which does not exist: ignored (it would hide "
        "every adapter); choose devices with ONEAPI_DEVICE_SELECTOR instead",
        ", ".join(missing),
    )
    return value


class UrLibrary:
    """The loaded UR loader with the release's prototypes bound, 1:1 with the C API.

    ``lib.urQueueFinish(queue)`` calls the C function and raises the result-named exception on
    failure; ``lib.raw.urQueueFinish`` is the unchecked ctypes function (returns the code).
    """

    def __init__(self, location: LoaderLocation) -> None:
        self.location = location
        self.cpu_runtime = setup_cpu_icd(location)
        self.ignored_force_load = check_force_load()
        try:
            self.raw = ctypes.CDLL(str(location.path), mode=ctypes.RTLD_LOCAL)
        except OSError as exc:
            raise LoaderNotFound(
                f"cannot load {location.path}: {exc}",
                "install intel-cmplr-lib-rt at the same version as intel-cmplr-lib-ur",
            ) from None
        preload_icd_loader(location, self.cpu_runtime)
        self.release = detect_release(location.path, self.raw)
        if self.release.note:
            log.warning("xpukit.runtime.ur: %s", self.release.note)
        self.abi = self.release.abi
        self.launch_form = self.abi.launch_form
        self.has_device_wait = self.abi.has_device_wait
        for name, argtypes in self.abi.prototypes().items():
            fn = getattr(self.raw, name)
            fn.argtypes = argtypes
            fn.restype = _api.result_t
            setattr(self, name, _checked(fn, name))
        self.urLoaderInit(0, None)

    def launch_entry_points(self) -> tuple[int, tuple[int, int, int, int]]:
        """(launch form, addresses of (urKernelSetArgValue, urKernelSetArgPointer, urKernelSetArgLocal,
        the launch call)) for the argument launchers; the setters are 0 where the form needs none."""
        raw, form = self.raw, self.launch_form
        if form == _api.LaunchForm.WITH_ARGS:
            return int(form), (0, 0, 0, _address(raw.urEnqueueKernelLaunchWithArgsExp))
        setters = (raw.urKernelSetArgValue, raw.urKernelSetArgPointer, raw.urKernelSetArgLocal)
        set_value, set_pointer, set_local = (_address(f) for f in setters)
        return int(form), (set_value, set_pointer, set_local, _address(raw.urEnqueueKernelLaunch))

    if TYPE_CHECKING:  # the checked UR functions are set per release in __init__

        def __getattr__(self, name: str) -> Callable[..., Any]: ...

    def __repr__(self) -> str:
        return f"<UrLibrary {self.location.path} release={self.release.version}>"


def _address(fn: Any) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


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
