"""The zebin stage: the same assertions on Triton with upstream's stage (9e23713 line, xpu profile)
and on triton-xpu 3.3.0b1 (cpu profile), where xpukit registers its own.

Only the 3.3 line exists in the cpu profile and on this kind of host; there these tests exercise
xpukit's stage. On the xpu profile the same container tests exercise upstream's native stage;
``test_install_mode_matches_backend`` checks which one is in use.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.runtime_required import skip_unless_in_image
from xpukit.runtime.triton import zebin_stage

EXAMPLES = ROOT / "examples" / "kernels.py"


# --- detection (pure logic) -----------------------------------------------------------------------


# --- the stage on the installed Triton ------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    pytest.importorskip("triton")
    if shutil.which("ocloc") is None:
        skip_unless_in_image("ocloc is not installed here")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRITON_XPU_GEN_NATIVE_CODE", raising=False)
    return tmp_path / "cache"


def _compile(target: str = "pvc", options: dict | None = None):
    from xpukit.runtime.kernels.compile import load_kernel
    from xpukit.runtime.triton.tritonc import compile_kernel, parse_signature

    spec = load_kernel(f"{EXAMPLES}:scale_kernel")
    return compile_kernel(spec.fn, parse_signature(spec.signature), spec.constexprs, target, options)


def _assert_zebin_kernel(kernel, cache: Path) -> None:
    assert isinstance(kernel.asm["zebin"], bytes) and kernel.asm["zebin"][:4] == b"\x7fELF"
    assert kernel.asm["zebin"][18] == 205  # e_machine EM_INTELGT (low byte, little-endian)
    assert kernel.asm["spv"][:4] == b"\x03\x02\x23\x07"  # the spv stage still yields SPIR-V
    assert kernel.metadata.binary_ext == "zebin"
    assert kernel.kernel == kernel.asm["zebin"]
    files = list(cache.rglob("scale_kernel.zebin"))
    assert len(files) == 1 and files[0].read_bytes() == kernel.asm["zebin"]


@pytest.mark.container
def test_install_mode_matches_backend():
    pytest.importorskip("triton")
    from xpukit.runtime.triton.tritonc import xpu_backend

    backend = xpu_backend()
    mode = zebin_stage.install(backend)
    assert mode == ("xpukit" if zebin_stage.installed(backend) else "native")
    assert zebin_stage.install(backend) == mode  # idempotent


@pytest.mark.container
@pytest.mark.parametrize("target", ["pvc", "acm-g10"])
def test_stage_with_option(cache, target):
    _assert_zebin_kernel(_compile(target, {"generate_native_code": True}), cache)


@pytest.mark.container
def test_stage_with_environment_variable(cache, monkeypatch):
    monkeypatch.setenv("TRITON_XPU_GEN_NATIVE_CODE", "1")
    kernel = _compile()
    _assert_zebin_kernel(kernel, cache)
    assert kernel.metadata.generate_native_code is True


@pytest.mark.container
def test_cache_hit_gives_the_same_zebin(cache):
    first = _compile(options={"generate_native_code": True})
    second = _compile(options={"generate_native_code": True})
    assert second.asm["zebin"] == first.asm["zebin"]
    _assert_zebin_kernel(second, cache)


@pytest.mark.container
@pytest.mark.parametrize("value", [None, "0"])
def test_no_zebin_by_default_or_with_zero(cache, monkeypatch, value):
    """Upstream's knob reads "0" as off; triton-xpu 3.3 alone would read it as on."""
    if value is not None:
        monkeypatch.setenv("TRITON_XPU_GEN_NATIVE_CODE", value)
    kernel = _compile()
    assert "zebin" not in kernel.asm
    assert kernel.kernel[:4] == b"\x03\x02\x23\x07"
    assert getattr(kernel.metadata, "binary_ext", "spv") == "spv"
    assert not list(cache.rglob("*.zebin"))


@pytest.mark.container
def test_zebin_for_cpu_target_is_an_error(cache):
    from xpukit.errors import XpukitError
    from xpukit.runtime.triton.tritonc import xpu_backend

    if not zebin_stage.installed(xpu_backend()):
        pytest.skip("upstream's native stage decides what a CPU target does")
    with pytest.raises(XpukitError, match="no GPU device for a zebin"):
        _compile("cpu", {"generate_native_code": True})
