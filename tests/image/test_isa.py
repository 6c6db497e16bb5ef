"""xpukit.runtime.offline.isa: Xe ISA from real zebins through the real ocloc and IGA, and its counts.

Counts are checked against counts the test takes itself from the ISA text (simple substring
rules written here, not the module's parser), never against numbers from one run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.families import dot_source
from tests.support.isa import assert_counts_match, independent_counts
from tests.support.runtime_required import skip_unless_in_image
from xpukit.runtime.offline import isa

EXAMPLES = ROOT / "examples" / "kernels.py"
DOT_SIGNATURE = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"}


# --------------------------------------------------------------------------- real compiles


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    if shutil.which("ocloc") is None:
        skip_unless_in_image("ocloc is not installed here")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    from xpukit.runtime.kernels.compile import load_kernel

    return load_kernel


def _compile(fn, signature, constexprs, target, **options):
    from xpukit.runtime.triton.tritonc import compile_kernel

    return compile_kernel(fn, signature, constexprs, target, {"generate_native_code": True, **options})


def _dot_kernel(folder: Path):
    from xpukit.runtime.kernels.compile import load_kernel

    (folder / "dot.py").write_text(dot_source())
    return load_kernel(f"{folder / 'dot.py'}:dot_kernel").fn


@pytest.mark.container
def test_scale_kernel_pvc_has_global_loads_and_stores_no_dpas(runtime):
    spec = runtime(f"{EXAMPLES}:scale_kernel")
    compiled = _compile(spec.fn, {"x_ptr": "*fp32", "y_ptr": "*fp32", "a": "fp32", "n": "i32"}, {"BLOCK": 1024}, "pvc")
    result = isa.disassemble(compiled.asm["zebin"], "pvc")
    text = result.kernels["scale_kernel"]
    counts = assert_counts_match(text)
    oracle = independent_counts(text)
    assert counts.sends["global_load"] == oracle["ugm_load"] > 0
    assert counts.sends["global_store"] == oracle["ugm_store"] > 0
    assert counts.dpas == 0
    # Triton's asm dict carries the same text (disassembled on first access).
    assert compiled.asm["isa"] == text


@pytest.mark.container
def test_tl_dot_on_pvc_uses_dpas(runtime, tmp_path):
    """pvc's preset (matrix engine + 2D block IO) makes Triton lower tl.dot to DPAS."""
    compiled = _compile(_dot_kernel(tmp_path), DOT_SIGNATURE, {"M": 32, "N": 32, "K": 32}, "pvc")
    assert compiled.metadata.threads_per_warp == 16  # DPAS layouts force sub-group 16
    counts = assert_counts_match(isa.disassemble(compiled.asm["zebin"], "pvc").kernels["dot_kernel"])
    assert counts.dpas > 0


@pytest.mark.container
def test_spilling_kernel_shows_scratch_sends(runtime, tmp_path):
    """A 32x32x32 tl.dot without DPAS (acm-g10's preset on triton-xpu 3.3 lowers it to FMAs) spills
    even after the 256-GRF retry: the zebin reports spill space and the ISA has scratch sends."""
    from xpukit.runtime.offline.zebin import read_zebin

    compiled = _compile(_dot_kernel(tmp_path), DOT_SIGNATURE, {"M": 32, "N": 32, "K": 32}, "acm-g10")
    info = read_zebin(compiled.asm["zebin"]).kernel("dot_kernel")
    counts = assert_counts_match(isa.disassemble(compiled.asm["zebin"], "acm-g10").kernels["dot_kernel"])
    if info.spill_size == 0:
        pytest.fail(f"expected spills; build flags {compiled.metadata.build_flags!r}")
    assert counts.sends["scratch_spill"] > 0 and counts.sends["scratch_fill"] > 0
    assert counts.scratch_spill_bytes >= 32 * counts.sends["scratch_spill"]
    assert counts.fma > 0 and counts.dpas == 0  # tl.dot's compute, as mad FMAs


# --------------------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def acm_zebin(tmp_path_factory) -> bytes:
    pytest.importorskip("triton")
    if shutil.which("ocloc") is None:
        skip_unless_in_image("ocloc is not installed here")
    from xpukit.runtime.kernels.compile import load_kernel

    os.environ.setdefault("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    spec = load_kernel(f"{EXAMPLES}:add_kernel")
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    return _compile(spec.fn, sig, {"BLOCK": 512}, "acm-g10").asm["zebin"]


def _leftovers() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob(f"{isa.TEMP_PREFIX}{os.getpid()}-*")}


@pytest.mark.container
def test_zebin_for_another_device_is_one_line(acm_zebin):
    assert isa.zebin_device(acm_zebin) == "acm-g10"
    with pytest.raises(isa.IsaError) as info:
        isa.disassemble(acm_zebin, "pvc")
    line = info.value.one_line()
    assert "built for acm-g10, not pvc" in line and "fix:" in line and len(line) <= 200
    assert isa.disassemble(acm_zebin).device == "acm-g10"  # the zebin's own device by default
    assert not _leftovers()


@pytest.mark.container
def test_ocloc_that_cannot_load_iga_is_one_line(acm_zebin, tmp_path):
    """An ocloc whose IGA will not load prints "couldn't load iga", exits 0 and writes nothing (what
    22.43 did without the unversioned libiga64.so; the image's ocloc 26.27 carries its IGA, so a
    stand-in script plays that ocloc here): the kit says so in one line and leaves no temp folder."""
    from xpukit.runtime.offline.ocloc import Ocloc

    fake = tmp_path / "ocloc"
    fake.write_text('#!/bin/sh\necho "couldn\'t load iga"\nexit 0\n')
    fake.chmod(0o755)
    with pytest.raises(isa.IgaMissingError) as info:
        isa.disassemble(acm_zebin, ocloc=Ocloc(str(fake), "26.27.1"))
    line = info.value.one_line()
    assert "could not load IGA" in line and "fix:" in line and len(line) <= 300
    assert not _leftovers()


@pytest.mark.container
def test_compile_asm_writes_isa_and_zebin_info_prints_it(runtime, tmp_path):
    """`python -m xpukit compile --asm` then `zebin-info --asm`, as `invoke` runs them in the image."""
    import subprocess
    import sys

    environ = {**os.environ, "PYTHONPATH": str(EXAMPLES.parent.parent)}
    out = tmp_path / "build"
    cmd = [sys.executable, "-m", "xpukit", "compile", f"{EXAMPLES}:add_kernel", "--target", "pvc,acm-g10"]
    proc = subprocess.run([*cmd, "--out", str(out), "--asm"], capture_output=True, text=True, env=environ)
    assert proc.returncode == 0, proc.stderr
    header = proc.stdout.splitlines()[1]
    expected = "target size B SIMD GRF scratch B/thr instr spill st/ld DPAS FMA"
    assert header.split() == expected.split()
    for target in ("pvc", "acm-g10"):
        isa_text = (out / target / "add_kernel.isa").read_text()
        assert independent_counts(isa_text)["sends"] > 0
        zebin = out / target / "add_kernel.zebin"
        info = subprocess.run(
            [sys.executable, "-m", "xpukit", "zebin-info", "--asm", str(zebin)],
            capture_output=True,
            text=True,
            env=environ,
        )
        assert info.returncode == 0, info.stderr
        assert isa_text.rstrip() in info.stdout and f"ISA of add_kernel for {target}" in info.stdout
    wrong = subprocess.run(
        [
            sys.executable,
            "-m",
            "xpukit",
            "zebin-info",
            "--asm",
            str(out / "pvc" / "add_kernel.zebin"),
            "--target",
            "acm-g10",
        ],
        capture_output=True,
        text=True,
        env=environ,
    )
    assert wrong.returncode != 0 and wrong.stderr.count("\n") == 1 and "built for pvc, not acm-g10" in wrong.stderr
