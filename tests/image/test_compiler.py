"""The image's compiler: today's ocloc and IGC from Debian's current packages, as one self-contained
folder (scripts/assemble-ocloc.sh), and the caches keyed by it.

Everything here runs the real ocloc, IGC and iga64 of the image on real SPIR-V from Triton. Only the
"second compiler" of the cache test is a stand-in: a wrapper around the real ocloc that answers with
another version and marks the zebins it writes. Two real ocloc releases cannot both live in the image
(bookworm's 22.43 left it, and a test fetches nothing), and the mark is what proves which compiler a
cached zebin came from.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from tests.support import ROOT
from xpukit import layout
from xpukit.host.versions import pins
from xpukit.runtime.offline import compiler_id
from xpukit.runtime.offline.ocloc import find_ocloc

pytestmark = pytest.mark.container

CPU_OCLOC = pins.load().profile("cpu")["ocloc"]
FOLDER = Path(layout.COMPILER)
MARK = b"XPUKIT-SECOND-COMPILER"


@pytest.fixture(scope="module", autouse=True)
def _cpu_image():
    if not (FOLDER / "PACKAGES").is_file():
        pytest.skip(f"no compiler folder at {FOLDER} (the cpu profile's image has it)")


def test_ocloc_on_path_is_the_folder_at_the_pinned_versions():
    found = compiler_id.identify()
    assert found.ocloc_path == str(FOLDER / "bin" / "ocloc")
    assert compiler_id.folder_of(found.ocloc_path) == FOLDER
    # ocloc's own answer (26.27.039122) is the pinned package (26.27.39122.14-1).
    assert [int(n) for n in found.ocloc_version.split(".")] == [int(n) for n in CPU_OCLOC["version"].split(".")[:3]]
    igc_pin = CPU_OCLOC["debs"]["libigc2"]["version"]
    assert found.igc_path == str(FOLDER / "lib" / "libigc.so.2")
    assert found.igc_version.split("+")[0] == igc_pin.split("-")[0]
    assert len(found.igc_build_id) == 40
    assert dict(found.packages) == {name: deb["version"] for name, deb in CPU_OCLOC["debs"].items()}
    assert shutil.which("iga64") == str(FOLDER / "bin" / "iga64")


def test_no_forky_library_on_the_images_library_path():
    """The folder's libc (2.43) is reached only through its own loader: the image's processes keep
    bookworm's glibc, and nothing on their library path names the folder."""
    assert platform.libc_ver() == ("glibc", "2.36")
    assert str(FOLDER) not in os.environ.get("LD_LIBRARY_PATH", "")
    cache = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    assert str(FOLDER) not in cache and "libigc" not in cache
    # Bookworm's 22.43 left the image with intel-opencl-icd.
    owner = subprocess.run(["dpkg-query", "-W", "intel-opencl-icd"], capture_output=True, text=True, check=False)
    assert owner.returncode != 0 and not Path("/usr/bin/ocloc").exists()


def test_the_folder_compiles_and_disassembles(tmp_path):
    """A real zebin for bmg (a family 22.43 refused), ``ocloc disasm`` finds libiga64 (it writes
    nothing when it cannot load it), and iga64 decodes the kernel's .text section."""
    spv = tmp_path / "kernel.spv"
    kit = subprocess.run(
        [sys.executable, "-m", "tests.support.compiler_probe", "kit", str(tmp_path / "pvc.zebin")],
        cwd=ROOT,
        env={**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "triton")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert kit.returncode == 0, kit.stderr[-2000:]
    spv_files = sorted((tmp_path / "triton").rglob("*.spv"))
    assert spv_files, "Triton's cache holds the kernel's SPIR-V"
    spv.write_bytes(spv_files[0].read_bytes())
    out = tmp_path / "bmg.zebin"
    ocloc = find_ocloc()
    compiled = subprocess.run(
        [ocloc.path, "compile", "-file", str(spv), "-spirv_input", "-device", "bmg", "-o", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    assert out.read_bytes()[:4] == b"\x7fELF"
    dump = tmp_path / "dump"
    disasm = subprocess.run(
        [ocloc.path, "disasm", "-file", str(out), "-dump", str(dump), "-device", "bmg"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "couldn't load iga" not in disasm.stdout + disasm.stderr
    asm = [p for p in dump.rglob("*.asm") if p.stat().st_size]
    assert asm and "send" in asm[0].read_text()
    with open(out, "rb") as f:
        text = next(s for s in ELFFile(f).iter_sections() if s.name.startswith(".text."))
        (tmp_path / "text.bin").write_bytes(text.data())
    iga = subprocess.run(
        ["iga64", "-d", "-p=2", str(tmp_path / "text.bin")], capture_output=True, text=True, check=False
    )
    assert iga.returncode == 0 and "send" in iga.stdout, iga.stderr


def _second_compiler(tmp_path: Path) -> Path:
    """A wrapper around the real ocloc that says it is 99.99.000001 and marks each zebin it writes."""
    real = find_ocloc().path
    wrapper = tmp_path / "second" / "ocloc"
    wrapper.parent.mkdir()
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = query ] && [ "$2" = OCL_DRIVER_VERSION ]; then\n'
        "  printf '99.99.000001' > OCL_DRIVER_VERSION; echo 99.99.000001; exit 0\n"
        "fi\n"
        'out=""; prev=""\n'
        'for arg in "$@"; do [ "$prev" = "-o" ] && out=$arg; prev=$arg; done\n'
        f'"{real}" "$@" || exit $?\n'
        f'if [ -n "$out" ]; then printf {MARK.decode()} >> "$out"; fi\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def _compile(tmp_path: Path, cache: Path, ocloc: Path | None, name: str) -> tuple[bytes, int]:
    """(the zebin, how many entries Triton's cache gained) from a fresh process."""
    before = len(list(cache.rglob("__grp__*"))) if cache.exists() else 0
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache)}
    env.pop("XPUKIT_OCLOC", None)
    if ocloc is not None:
        env["XPUKIT_OCLOC"] = str(ocloc)
    out = tmp_path / f"{name}.zebin"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.compiler_probe", "kit", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1])["size"] == out.stat().st_size
    return out.read_bytes(), len(list(cache.rglob("__grp__*"))) - before


def test_switching_compilers_under_one_cache_never_returns_the_others_zebin(tmp_path):
    """One Triton cache, two compilers in turn: each switch is a miss compiled by the compiler in use,
    and each compiler then hits its own entry, never the other's."""
    cache, second = tmp_path / "triton", _second_compiler(tmp_path)
    first, new = _compile(tmp_path, cache, None, "first")
    assert new == 1 and MARK not in first and first[:4] == b"\x7fELF"
    other, new = _compile(tmp_path, cache, second, "second")
    assert new == 1, "a zebin of the image's ocloc was served for the second compiler"
    assert other.endswith(MARK) and other[: -len(MARK)] == first
    again, new = _compile(tmp_path, cache, None, "first-again")
    assert new == 0 and again == first
    again, new = _compile(tmp_path, cache, second, "second-again")
    assert new == 0 and again == other


def test_spirv_builds_pay_no_compiler_probe(tmp_path):
    """The compiler key only joins native builds: a SPIR-V build's key is the same whichever ocloc is
    configured (SPIR-V does not depend on it), so switching ocloc keeps those entries."""
    code = (
        "from tests.support.kernels import scale_typed\n"
        "from xpukit.runtime.triton import tritonc\n"
        "tritonc.compile_kernel(scale_typed, {'x_ptr': '*fp32', 'y_ptr': '*fp32', 'scale': 'fp32', 'n': 'i32'},"
        " {'BLOCK': 128}, 'pvc')\n"
    )
    cache = tmp_path / "triton"
    # The image's ocloc, then none at all: a probe of the second would fail.
    for ocloc in ("", "/nonexistent/ocloc"):
        env = {**os.environ, "TRITON_CACHE_DIR": str(cache), "XPUKIT_OCLOC": ocloc}
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert len(list(cache.rglob("__grp__*"))) == 1
