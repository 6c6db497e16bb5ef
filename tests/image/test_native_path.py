"""triton-xpu 3.3's own native path (``TRITON_XPU_GEN_NATIVE_CODE=1``) works unmodified with the
image's ocloc, and gives the zebin the kit's zebin stage gives.

3.3's ``make_spv`` runs ``ocloc compile -file F.spv -o F.o -spirv_input -device pvc -options FLAGS``
itself; bookworm's ocloc 22.43 rejected ``-o``, which is why the kit carried its own stage. Both
paths here run in fresh processes with their own Triton cache (tests/support/compiler_probe.py).

What is compared: the zebin's ELF sections by name and bytes, ``.text.<kernel>`` (the machine code)
and ``.ze_info`` (the kernel's payload, GRF, SIMD, scratch) among them. IGC is deterministic for one
SPIR-V input and one option string, so the two files agree byte for byte wherever nothing names the
path ocloc was given; the test checks the sections (what a reader of the zebin sees) and then the
whole file, and says which differs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from tests.support import ROOT
from xpukit.runtime.offline.zebin import read_zebin

pytestmark = pytest.mark.container


def _probe(mode: str, tmp_path: Path) -> bytes:
    out = tmp_path / f"{mode}.zebin"
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / f"cache-{mode}")}
    env.pop("TRITON_XPU_GEN_NATIVE_CODE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.compiler_probe", mode, str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.splitlines()[-1])["mode"] == mode
    return out.read_bytes()


def _sections(data: bytes, tmp_path: Path, name: str) -> dict[str, bytes]:
    path = tmp_path / f"{name}.elf"
    path.write_bytes(data)
    with open(path, "rb") as f:
        return {s.name: s.data() for s in ELFFile(f).iter_sections() if s.name}


def test_tritons_native_path_and_the_kits_stage_give_the_same_zebin(tmp_path):
    native = _probe("native", tmp_path)
    kit = _probe("kit", tmp_path)
    assert native[:4] == b"\x7fELF" and kit[:4] == b"\x7fELF"
    native_sections, kit_sections = _sections(native, tmp_path, "native"), _sections(kit, tmp_path, "kit")
    text = [name for name in native_sections if name.startswith(".text.")]
    assert text == [".text.scale_typed"], sorted(native_sections)
    assert ".ze_info" in native_sections
    assert native_sections.keys() == kit_sections.keys()
    for name in native_sections:
        assert native_sections[name] == kit_sections[name], f"{name} differs between the two paths"
    assert native == kit
    # And the kit's reader reads Triton's own zebin.
    info = read_zebin(native).kernels[0]
    assert info.name == "scale_typed" and info.simd_size in (16, 32)
