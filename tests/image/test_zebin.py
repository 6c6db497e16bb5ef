"""xpukit.runtime.offline.zebin: reading zebins, checking payload layouts, and fuzzing the reader.

The tests that run inside the image; the others are in tests/host/test_zebin.py.
"""

from __future__ import annotations

import itertools
import shutil

import pytest
from hypothesis import given

from tests.support import ROOT
from tests.support.zebin import FUZZ, assert_reader_contract, mutations, ze_info_span
from xpukit.runtime.offline.zebin import check_layout, read_zebin, type_size

EXAMPLES = ROOT / "examples" / "kernels.py"


needs_toolchain = pytest.mark.skipif(shutil.which("ocloc") is None, reason="ocloc is not installed here")


@pytest.fixture(scope="module")
def real_zebins(tmp_path_factory) -> dict[tuple[str, str], tuple[bytes, dict]]:
    """Zebins built now by Triton + real ocloc for each example kernel, on pvc and acm-g10."""
    pytest.importorskip("triton")
    mp = pytest.MonkeyPatch()
    mp.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton-cache")))
    from xpukit.runtime.kernels.compile import load_kernel
    from xpukit.runtime.triton.tritonc import compile_kernel, parse_signature

    built = {}
    try:
        for name in (
            "scale_kernel",
            "add_kernel",
            "strided_copy_kernel",
            "axpy_fp16_kernel",
            "row_sum_kernel",
        ):
            spec = load_kernel(f"{EXAMPLES}:{name}")
            sig = parse_signature(spec.signature)
            full = {a: ("constexpr" if a in spec.constexprs else sig[a]) for a in spec.fn.arg_names}
            for target in ("pvc", "acm-g10"):
                compiled = compile_kernel(spec.fn, sig, spec.constexprs, target, {"generate_native_code": True})
                built[(name, target)] = (compiled.asm["zebin"], full, compiled.metadata.shared)
    finally:
        mp.undo()
    return built


@pytest.mark.container
@needs_toolchain
def test_real_zebins_match_their_signatures(real_zebins):
    seen_types = set()
    for (name, target), (data, signature, shared) in real_zebins.items():
        zebin = read_zebin(data)
        kernel = zebin.kernel(name)
        assert f".text.{name}" in zebin.sections
        assert kernel.text_size > 0 and kernel.simd_size in (8, 16, 32) and kernel.grf_count
        slots = check_layout(kernel, signature)
        named = [s for s in slots if s.name]
        assert [s.name for s in named] == [n for n, t in signature.items() if t != "constexpr"], (
            name,
            target,
        )
        assert all(s.size == type_size(s.triton_type) for s in named)
        offsets = sorted((s.offset, s.offset + s.size) for s in slots)
        assert all(a_end <= b for (_, a_end), (b, _) in itertools.pairwise(offsets)), "overlapping slots"
        hidden = [s for s in slots if s.name is None]
        # Triton 3.3 adds one local-memory pointer when the kernel uses shared memory, nothing else.
        assert len(hidden) == (1 if shared else 0), (name, target, hidden)
        seen_types |= {s.triton_type for s in named}
    assert {"*fp32", "*fp16", "i64", "i32", "fp32"} <= seen_types


@pytest.mark.container
@needs_toolchain
def test_fuzz_real_zebin(real_zebins):
    """4000 mutations of a zebin real ocloc wrote: a Zebin or a ZebinError, never anything else."""
    base, _, _ = real_zebins[("scale_kernel", "pvc")]

    @FUZZ
    @given(mutations(base, ze_info_span(base)))
    def check(data: bytes) -> None:
        assert_reader_contract(data)

    check()
