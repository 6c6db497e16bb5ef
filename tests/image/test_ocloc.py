"""xpukit.runtime.offline.ocloc: version, flag dialect, device list, SPIR-V -> zebin, spill retry, errors.

The tests that run inside the image; the others are in tests/host/test_ocloc.py.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT
from xpukit.runtime.offline.ocloc import (
    OclocError,
    find_ocloc,
)

needs_ocloc = pytest.mark.skipif(shutil.which("ocloc") is None, reason="ocloc is not installed here")


EXAMPLES = ROOT / "examples" / "kernels.py"


@pytest.fixture(scope="module")
def scale_spirv(tmp_path_factory) -> bytes:
    pytest.importorskip("triton")
    mp = pytest.MonkeyPatch()
    mp.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton-cache")))
    from xpukit.runtime.kernels.compile import load_kernel
    from xpukit.runtime.triton.tritonc import compile_kernel, parse_signature

    spec = load_kernel(f"{EXAMPLES}:scale_kernel")
    compiled = compile_kernel(spec.fn, parse_signature(spec.signature), spec.constexprs, "pvc")
    mp.undo()
    return compiled.asm["spv"]


@pytest.mark.container
@needs_ocloc
def test_real_ocloc_version_and_devices():
    tool = find_ocloc()
    assert tool.version_tuple >= (26, 27)  # the image's compiler: Debian forky's intel-ocloc
    assert {"pvc", "bmg", "acm-g10", "arl-h", "mtl-h", "lnl-m", "ptl-h", "lnl", "arl"} <= tool.devices


@pytest.mark.container
@needs_ocloc
def test_real_ocloc_builds_every_supported_preset(scale_spirv):
    from xpukit.runtime.offline.zebin import read_zebin
    from xpukit.targets import FAMILIES, PRESETS

    tool = find_ocloc()
    supported = [n for n, p in PRESETS.items() if p.ocloc_device and tool.supports(p.ocloc_device)]
    assert set(supported) == {f.name for f in FAMILIES} and len(supported) == 11  # ocloc 26.27 builds all eleven
    for target in supported:
        result = tool.compile_spirv(scale_spirv, tool.require_target(target))
        assert result.zebin[:4] == b"\x7fELF", target
        assert read_zebin(result.zebin).kernel("scale_kernel").simd_size in (8, 16, 32)


@pytest.mark.container
@needs_ocloc
def test_real_ocloc_failure_has_log_and_working_repro():
    tool = find_ocloc()
    with pytest.raises(OclocError) as info:
        tool.compile_spirv(b"this is not SPIR-V", "pvc")
    err = info.value
    assert err.log.strip() and err.log.strip() in str(err)
    # Running the repro line reproduces the failure.
    proc = subprocess.run(["sh", "-c", err.repro], capture_output=True, text=True)
    assert proc.returncode != 0
    shutil.rmtree(Path(err.repro.split("&&")[0].split()[1]), ignore_errors=True)
