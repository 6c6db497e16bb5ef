"""Compile one kernel to a pvc zebin in a fresh process (Triton's in-memory caches start empty):

    python -m tests.support.compiler_probe kit|native OUT.zebin

``kit``: the kit's path, ``xpukit.runtime.triton.tritonc.compile_kernel`` with ``generate_native_code``
(the kit's zebin stage, Triton's cache through the kit's cache manager and its compiler key).

``native``: triton-xpu 3.3's own native path as upstream wrote it: ``TRITON_XPU_GEN_NATIVE_CODE=1``
and Triton's ``XPUBackend.make_spv`` running ``ocloc compile ... -o F -spirv_input -device pvc``
itself. The one change is the one every compile here needs: the backend's constructor builds a SYCL
module only to name the architecture, and gets the kit's pure-Python table instead (as tritonc
does). Nothing else of the kit is installed (no zebin stage, no cache manager, no compiler key).

Prints one JSON line: the zebin's size and SHA-256, and where it came from.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from tests.support.kernels import scale_typed

SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "scale": "fp32", "n": "i32"}
CONSTEXPRS = {"BLOCK": 128}


def kit() -> bytes:
    from xpukit.runtime.triton import tritonc

    kernel = tritonc.compile_kernel(scale_typed, SIGNATURE, CONSTEXPRS, "pvc", {"generate_native_code": True})
    return bytes(kernel.asm["zebin"])


def native() -> bytes:
    os.environ["TRITON_XPU_GEN_NATIVE_CODE"] = "1"
    import triton
    from triton.backends import backends
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from xpukit.runtime.triton.tritonc import _ArchParser
    from xpukit.targets import preset

    backend = backends["intel"].compiler
    init_globals = backend.__init__.__globals__
    original = init_globals["compile_module_from_src"]

    def compile_module_from_src(src: str, name: str, *args: Any, **kwargs: Any) -> Any:
        return _ArchParser if name == "arch_utils" else original(src, name, *args, **kwargs)

    init_globals["compile_module_from_src"] = compile_module_from_src
    assert not hasattr(backend, "make_zebin"), "this Triton has upstream's zebin stage: the probe is for 3.3's path"
    signature = {**SIGNATURE, "BLOCK": "constexpr"}
    src = ASTSource(scale_typed, signature, constexprs=CONSTEXPRS)
    kernel = triton.compile(src, target=GPUTarget("xpu", preset("pvc").props(), 32), options={})
    # 3.3's make_spv returns ocloc's native binary under the "spv" name.
    return bytes(kernel.asm["spv"])


def main(argv: list[str]) -> int:
    mode, out = argv
    data = {"kit": kit, "native": native}[mode]()
    Path(out).write_bytes(data)
    print(json.dumps({"mode": mode, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
