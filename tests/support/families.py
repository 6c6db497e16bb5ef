"""Helpers for the tests that need today's compiler (ocloc 26.27 / IGC 2.40): the image carries it;
a host has it only where XPUKIT_OCLOC names one (e.g. a folder assembled from Debian forky)."""

from __future__ import annotations

from tests.support.runtime_required import skip_unless_in_image

CURRENT = (26, 27)  # the ocloc the kit's image carries: every family, .ze_info 1.73

_DOT_KERNEL = """
@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))
"""


def dot_source(declarations: str = "") -> str:
    """A kernel file of one fp16 ``tl.dot`` (``dot_kernel``; DPAS where the family has it), with
    ``declarations`` (its XPUKIT_KERNELS, comments) between the imports and the kernel."""
    head = "\nimport triton\nimport triton.language as tl\n\n"
    return head + (declarations.strip("\n") + "\n\n" if declarations else "") + _DOT_KERNEL


DOT_SOURCE = dot_source(
    """
XPUKIT_KERNELS = {
    "dot_kernel": {
        "signature": "a_ptr:*fp16, b_ptr:*fp16, c_ptr:*fp32",
        "constexprs": {"M": 16, "N": 16, "K": 16},
    },
}
"""
)


def current_ocloc_or_skip():
    """The ocloc the kit finds, when it is 26.27 or later; else a skip on a host (a failure in the
    image, which must carry it)."""
    from xpukit.runtime.offline.ocloc import OclocError, find_ocloc

    try:
        tool = find_ocloc()
    except OclocError as exc:
        skip_unless_in_image(f"no ocloc here ({exc.one_line()}); set XPUKIT_OCLOC to ocloc 26.27")
    if tool.version_tuple < CURRENT:
        skip_unless_in_image(f"{tool.describe()} is older than 26.27: set XPUKIT_OCLOC to ocloc 26.27")
    return tool
