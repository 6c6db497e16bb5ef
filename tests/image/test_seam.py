"""The seam in the image, where Triton is installed: every attribute the compiled launch path reads
(xpukit/runtime/ur/seam.py, xpukit/runtime/triton/seam.py) exists on its owner, Triton's
JITFunction and CompiledKernel included, and both compiled modules were bound at import. The host
test (tests/host/test_seam.py) checks the kit's own classes and that a rename is caught."""

from __future__ import annotations

import pytest

from xpukit.runtime.triton import seam as triton_seam
from xpukit.runtime.ur import seam

pytestmark = pytest.mark.container


def test_every_declared_read_exists_on_its_owner_here():
    """The compiled path reads the kit's and Triton's objects only: no dpnp or dpctl owner (foreign
    arrays are resolved before the dispatch, xpukit/runtime/ur/interop/state.py)."""
    reads = (*seam.LAUNCHER_READS, *triton_seam.READS)
    assert any(r.owner.startswith("triton.") for r in reads)
    assert not [r for r in reads if r.owner.startswith(("dpnp.", "dpctl."))]
    assert seam.missing(reads) == []


def test_the_image_binds_both_compiled_modules():
    from xpukit.runtime.triton import dispatch
    from xpukit.runtime.ur import core, launcher

    assert core.Session  # importing the core binds the launcher
    assert launcher.COMPILED and dispatch.COMPILED, (launcher.IMPLEMENTATION, dispatch.COMPILED)
