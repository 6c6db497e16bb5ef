"""The seam in the image, where Triton is installed: every attribute the compiled launch path reads
(xpukit/runtime/ur/seam.py, xpukit/runtime/triton/seam.py) exists on its owner, Triton's
JITFunction and CompiledKernel included, and both compiled modules were bound at import. The host
test (tests/host/test_seam.py) checks the kit's own classes and that a rename is caught."""

from __future__ import annotations

import importlib.util
import os

import pytest

from xpukit.runtime.triton import seam as triton_seam
from xpukit.runtime.ur import seam

pytestmark = pytest.mark.container


def test_every_declared_read_exists_on_its_owner_here():
    """dpnp's reads where dpnp is installed (the dpnp image variant; XPUKIT_REQUIRE_DPNP=1 there)."""
    reads = (*seam.LAUNCHER_READS, *triton_seam.READS)
    assert any(r.owner.startswith("triton.") for r in reads)
    dpnp_reads = [r for r in reads if r.owner.startswith("dpnp.")]
    assert dpnp_reads  # the dispatch reads a dpnp array's usm_ndarray
    if importlib.util.find_spec("dpnp") is None and os.environ.get("XPUKIT_REQUIRE_DPNP") != "1":
        reads = tuple(r for r in reads if r not in dpnp_reads)
    assert seam.missing(reads) == []


def test_the_image_binds_both_compiled_modules():
    from xpukit.runtime.triton import dispatch
    from xpukit.runtime.ur import core, launcher

    assert core.Session  # importing the core binds the launcher
    assert launcher.COMPILED and dispatch.COMPILED, (launcher.IMPLEMENTATION, dispatch.COMPILED)
