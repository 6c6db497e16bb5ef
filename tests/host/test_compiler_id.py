"""Which compiler is this (xpukit.runtime.offline.compiler_id), on real ELF libraries.

The "ocloc" here is a small script answering ``query OCL_DRIVER_VERSION`` (the host has no ocloc of
its own); the libigc files are real ELF libraries of this machine copied under IGC's names, so the
build IDs read are real ones. The image tests run the real ocloc and IGC (tests/image/test_compiler.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from xpukit.runtime.offline import compiler_id
from xpukit.runtime.triton.program_cache import ProgramCache

pytestmark = pytest.mark.unit

LIBS = [Path("/lib/x86_64-linux-gnu/libz.so.1"), Path("/lib/x86_64-linux-gnu/libm.so.6")]


@pytest.fixture
def two_libraries():
    found = [p for p in LIBS if p.exists() and compiler_id.build_id(p)]
    if len(found) < 2:
        pytest.skip("needs two system libraries with GNU build IDs")
    return found


def fake_folder(root: Path, library: Path, version: str = "26.27.039122") -> Path:
    """A compiler folder laid out as scripts/assemble-ocloc.sh lays it out."""
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    ocloc = root / "bin" / "ocloc"
    ocloc.write_text(f"#!/bin/sh\nprintf '{version}' > OCL_DRIVER_VERSION\n")
    ocloc.chmod(0o755)
    shutil.copy(library, root / "lib" / "libigc.so.2.40.14+0")
    (root / "lib" / "libigc.so.2").symlink_to("libigc.so.2.40.14+0")
    (root / "PACKAGES").write_text(f"# header\nintel-ocloc 26.27.39122.14-1 {'0' * 64}\nlibigc2 2.40.14-1 {'1' * 64}\n")
    return ocloc


def test_the_folders_ocloc_and_igc_are_identified(tmp_path, two_libraries, monkeypatch):
    ocloc = fake_folder(tmp_path / "compiler", two_libraries[0])
    monkeypatch.setenv("XPUKIT_OCLOC", str(ocloc))
    found = compiler_id.identify()
    assert found.ocloc_version == "26.27.039122" and found.igc_version == "2.40.14+0"
    assert found.igc_path == str(tmp_path / "compiler" / "lib" / "libigc.so.2")
    assert found.igc_build_id == compiler_id.build_id(two_libraries[0]) and len(found.igc_build_id) == 40
    assert found.package_version("libigc2") == "2.40.14-1"
    assert "ocloc 26.27.039122" in found.key() and found.igc_build_id in found.key()
    # Another build of the same IGC version is another compiler.
    other = fake_folder(tmp_path / "other", two_libraries[1])
    monkeypatch.setenv("XPUKIT_OCLOC", str(other))
    assert compiler_id.identify().igc_version == found.igc_version
    assert compiler_id.current_key() != found.key().replace(str(ocloc), str(other))
    monkeypatch.setenv("XPUKIT_OCLOC", str(tmp_path / "absent"))
    assert compiler_id.current_key() == compiler_id.NO_COMPILER


def test_a_gpu_program_cache_key_names_the_drivers_igc(tmp_path, two_libraries, monkeypatch):
    """A GPU driver compiles SPIR-V with the system's IGC: another libigc.so.2 there is another key.
    A CPU device's key does not read it (its compiler is part of its driver version)."""
    libdir = tmp_path / "lib"
    libdir.mkdir()
    monkeypatch.setenv("LD_LIBRARY_PATH", str(libdir))
    cache = ProgramCache(tmp_path / "cache")
    gpu = SimpleNamespace(type="gpu", cache_key=lambda: "level_zero|Arc|1.6|0x1e", ur_release="2026.2.0")
    cpu = SimpleNamespace(type="cpu", cache_key=lambda: "opencl|cpu|2026|0x0", ur_release="2026.2.0")
    no_igc, cpu_key = cache.key(gpu, "abc"), cache.key(cpu, "abc")
    if any((Path(d) / n).exists() for d in compiler_id.SYSTEM_LIB_DIRS for n in compiler_id.IGC_SONAMES):
        pytest.skip("this host has an IGC of its own on the system's library path")
    assert compiler_id.driver_igc_key() == "igc: none"
    shutil.copy(two_libraries[0], libdir / "libigc.so.2.40.14+0")
    (libdir / "libigc.so.2").symlink_to("libigc.so.2.40.14+0")
    first = cache.key(gpu, "abc")
    assert "libigc.so.2 2.40.14+0 build-id" in compiler_id.driver_igc_key()
    (libdir / "libigc.so.2").unlink()
    shutil.copy(two_libraries[1], libdir / "libigc.so.2.40.15+0")
    (libdir / "libigc.so.2").symlink_to("libigc.so.2.40.15+0")
    second = cache.key(gpu, "abc")
    assert len({no_igc, first, second}) == 3
    assert cache.key(cpu, "abc") == cpu_key


def test_igc_version_comes_from_the_real_file_name(tmp_path, two_libraries):
    shutil.copy(two_libraries[0], tmp_path / "libigc.so.2.40.14+0")
    (tmp_path / "libigc.so.2").symlink_to("libigc.so.2.40.14+0")
    assert compiler_id.igc_version(tmp_path / "libigc.so.2") == "2.40.14+0"
    shutil.copy(two_libraries[0], tmp_path / "libigc.so.1")
    assert compiler_id.igc_version(tmp_path / "libigc.so.1") == ""  # the soname alone names no version
    (tmp_path / "not-elf").write_text("text")
    assert compiler_id.build_id(tmp_path / "not-elf") == "" and compiler_id.build_id(tmp_path / "absent") == ""
