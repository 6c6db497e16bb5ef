"""Which compiler is this: the one identity every cache of compiled code keys on.

A zebin depends on ocloc and on the IGC it loads (``libigc.so``: the code generator). The identity
holds both, read from the installed files, never from the pins:

* ocloc's version, as ``ocloc query OCL_DRIVER_VERSION`` answers (``26.27.039122``);
* IGC's version, from the name its soname link points at (``libigc.so.2 -> libigc.so.2.40.14+0``),
  and its GNU build ID (``.note.gnu.build-id``: one per build of the library, read without hashing
  its 100 MB), which tells two builds of one version apart;
* for the kit's compiler folder (``scripts/assemble-ocloc.sh``), the Debian packages it records in
  ``PACKAGES`` (name, version, SHA-256 of each .deb).

Which libigc an ocloc loads: the one in its folder's ``lib/`` (the kit's folder), else the first on
the library path the system loader searches (``LD_LIBRARY_PATH``, then the multiarch folders).
``ocloc query IGC_REVISION`` would be the direct answer, but Debian's builds print nothing there.

A GPU driver compiles SPIR-V with the IGC on the system's library path too, and Intel ships IGC as a
package of its own (``intel-igc-core-2``): it can change while the driver's version string does not.
:func:`driver_igc_key` names that IGC for the native-binary program cache of a GPU device.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

from xpukit.errors import XpukitError

IGC_SONAMES = ("libigc.so.2", "libigc.so.1")
SYSTEM_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/local/lib", "/usr/lib64", "/usr/lib")
PACKAGES_FILE = "PACKAGES"  # written by scripts/assemble-ocloc.sh at the folder's top
NO_COMPILER = "ocloc: none"


@dataclasses.dataclass(frozen=True)
class CompilerIdentity:
    ocloc_path: str
    ocloc_version: str  # as ocloc reports it; "" when it would not say
    igc_path: str  # the libigc this ocloc loads; "" when none was found
    igc_version: str  # from the library's file name (2.40.14+0); "" when the name carries none
    igc_build_id: str  # hex; "" when the library has no build-id note
    packages: tuple[tuple[str, str], ...] = ()  # (name, version) from the folder's PACKAGES file

    def key(self) -> str:
        """One line that changes whenever ocloc or IGC does: what caches put in their keys."""
        igc = f"igc {self.igc_version or 'unknown'} build-id {self.igc_build_id or 'none'}"
        return f"ocloc {self.ocloc_version or 'unknown'} {self.ocloc_path}; {igc}"

    def describe(self) -> str:
        igc = f"IGC {self.igc_version}" if self.igc_version else "IGC (version unknown)"
        return f"ocloc {self.ocloc_version or '(unknown version)'}, {igc}"

    def package_version(self, name: str) -> str:
        return dict(self.packages).get(name, "")


def folder_of(ocloc_path: str) -> Path | None:
    """The kit's compiler folder holding this ocloc (``<folder>/bin/ocloc``), None for any other."""
    top = Path(ocloc_path).resolve().parent.parent
    return top if (top / PACKAGES_FILE).is_file() else None


def read_packages(folder: Path) -> tuple[tuple[str, str], ...]:
    """``PACKAGES``: ``NAME VERSION SHA256`` lines (``#`` comments)."""
    try:
        lines = (folder / PACKAGES_FILE).read_text().splitlines()
    except OSError:
        return ()
    fields = [line.split() for line in lines if line.strip() and not line.startswith("#")]
    return tuple((parts[0], parts[1]) for parts in fields if len(parts) >= 2)


def find_igc(ocloc_path: str, environ: dict[str, str] | None = None) -> Path | None:
    """The libigc this ocloc loads (see the module's docstring), None when there is none."""
    folder = folder_of(ocloc_path)
    dirs = [folder / "lib"] if folder else []
    dirs += _system_dirs(environ)
    for soname in IGC_SONAMES:
        for directory in dirs:
            if (directory / soname).exists():
                return directory / soname
    return None


def _system_dirs(environ: dict[str, str] | None) -> list[Path]:
    environ = dict(os.environ) if environ is None else environ
    return [Path(d) for d in environ.get("LD_LIBRARY_PATH", "").split(":") if d] + [Path(d) for d in SYSTEM_LIB_DIRS]


def driver_igc_key(environ: dict[str, str] | None = None) -> str:
    """Every IGC on the system's library path (the first ``libigc.so.2`` and ``libigc.so.1`` the loader
    would map), by version and build ID: what a GPU driver compiles SPIR-V with. "igc: none" when absent."""
    found = []
    for soname in IGC_SONAMES:
        path = next((d / soname for d in _system_dirs(environ) if (d / soname).exists()), None)
        if path is not None:
            stat = path.stat()
            found.append(_library_key(str(path), stat.st_size, stat.st_mtime_ns))
    return "; ".join(found) or "igc: none"


@functools.cache
def _library_key(path: str, size: int, mtime_ns: int) -> str:
    library = Path(path)
    return f"{library.name} {igc_version(library) or 'unknown'} build-id {build_id(library) or 'none'}"


def igc_version(library: Path) -> str:
    """``2.40.14+0`` for ``libigc.so.2 -> libigc.so.2.40.14+0``; "" when the real name adds nothing."""
    real = Path(os.path.realpath(library)).name
    version = real.partition(".so.")[2]
    # The soname alone (libigc.so.2) names only the major version.
    return version if version.startswith(library.name.partition(".so.")[2] + ".") else ""


def build_id(library: Path) -> str:
    """The library's GNU build ID (hex), "" when it has none or is no ELF file."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import NoteSection

    try:
        with open(library, "rb") as f:
            section = ELFFile(f).get_section_by_name(".note.gnu.build-id")
            if isinstance(section, NoteSection):
                for note in section.iter_notes():
                    if note["n_type"] == "NT_GNU_BUILD_ID":
                        return str(note["n_desc"])
    except (OSError, ELFError):
        return ""
    return ""


@functools.cache
def _identify(ocloc_path: str, ocloc_version: str, ld_library_path: str) -> CompilerIdentity:
    igc = find_igc(ocloc_path, {"LD_LIBRARY_PATH": ld_library_path})
    folder = folder_of(ocloc_path)
    return CompilerIdentity(
        ocloc_path=ocloc_path,
        ocloc_version=ocloc_version,
        igc_path=str(igc) if igc else "",
        igc_version=igc_version(igc) if igc else "",
        igc_build_id=build_id(igc) if igc else "",
        packages=read_packages(folder) if folder else (),
    )


def identify(explicit: str | None = None) -> CompilerIdentity:
    """The identity of the ocloc :func:`xpukit.runtime.offline.ocloc.find_ocloc` picks (``explicit``,
    ``$XPUKIT_OCLOC``, else ``ocloc`` on PATH); :class:`OclocError` when there is none."""
    from xpukit.runtime.offline.ocloc import find_ocloc  # ocloc's module is the heavier one

    tool = find_ocloc(explicit)
    return _identify(tool.path, tool.version, os.environ.get("LD_LIBRARY_PATH", ""))


def current_key() -> str:
    """:meth:`CompilerIdentity.key` of the ocloc in use, :data:`NO_COMPILER` where there is none."""
    try:
        return identify().key()
    except XpukitError:
        return NO_COMPILER
