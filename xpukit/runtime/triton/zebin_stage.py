"""A "zebin" stage for Triton's Intel backend when the installed Triton lacks upstream's.

Upstream added the stage in intel-xpu-backend-for-triton PR #5189 (merge commit 9e23713). With
``TRITON_XPU_GEN_NATIVE_CODE=1`` or the option ``generate_native_code=True`` it:

1. keeps the ``spv`` stage as is (SPIR-V bytes) and adds a ``zebin`` stage after it;
2. in that stage sets ``metadata["binary_ext"] = "zebin"``, runs ocloc on the SPIR-V with the
   kernel's ``build_flags``, and retries once with ``-cl-intel-256-GRF-per-thread`` (recorded in
   ``build_flags``) when the log reports spills;
3. makes ``CompiledKernel`` read ``.zebin`` as bytes and take ``kernel.kernel`` from
   ``metadata.binary_ext`` instead of the backend's fixed ``binary_ext``.

triton-xpu 3.3.0b1 predates it: its ``make_spv`` itself calls ``ocloc ... -o F -device pvc`` (which
ocloc 22.43 rejects) and returns the native binary under the ``spv`` name. ``install`` mirrors the
three points above by wrapping methods at runtime, never by editing Triton's files, and only when
the backend has no native stage. Differences from upstream: ocloc errors are ``OclocError``
(upstream: ``RuntimeError``), the ocloc call goes through ``xpukit.runtime.offline.ocloc`` (so 22.43's flag dialect
works), and ``TRITON_STORE_BINARY_ONLY=1`` drops the .zebin (3.3's compile() keeps only listed
extensions; changing that would mean editing Triton).
"""

from __future__ import annotations

import copy
import inspect
import os
from pathlib import Path
from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime.offline.ocloc import find_ocloc
from xpukit.runtime.triton.debug_locations import locate_calls
from xpukit.targets import preset_for_architecture

ENV_VAR = "TRITON_XPU_GEN_NATIVE_CODE"
_MARK = "_xpukit_zebin_stage"
_ISA_MARK = "_xpukit_isa_on_demand"


def native_stage_present(backend_cls: Any) -> bool:
    """True when the backend already has upstream's zebin stage (the 9e23713 line and later)."""
    if hasattr(backend_cls, "make_zebin"):
        return True
    add_stages = getattr(backend_cls, "add_stages", None)
    if getattr(add_stages, _MARK, False):
        return False
    if add_stages is None:
        return False
    try:
        source = inspect.getsource(add_stages)
    except (OSError, TypeError):
        return False
    return 'stages["zebin"]' in source or "stages['zebin']" in source


def installed(backend_cls: Any) -> bool:
    """True when xpukit's stage is registered on this backend class."""
    return bool(getattr(backend_cls.add_stages, _MARK, False))


def install(backend_cls: Any) -> str:
    """Register xpukit's zebin stage unless the backend has its own. Returns "native" or "xpukit".

    Idempotent. ``backend_cls``: Triton's XPUBackend as ``xpukit.runtime.triton.tritonc.xpu_backend`` loads it.
    """
    if installed(backend_cls):
        return "xpukit"
    if native_stage_present(backend_cls):
        _wrap_isa_on_demand()
        return "native"
    _wrap_add_stages(backend_cls)
    _wrap_options(backend_cls)
    _wrap_compiled_kernel()
    return "xpukit"


def _wrap_add_stages(backend_cls: Any) -> None:
    original = backend_cls.add_stages

    def add_stages(self: Any, stages: dict, options: Any, *args: Any, **kwargs: Any) -> None:
        if not options.generate_native_code:
            original(self, stages, options, *args, **kwargs)
            _locate_llir_calls(stages)
            return
        # Upstream point 1: the spv stage yields SPIR-V. 3.3's make_spv reads the option itself, so
        # its stages get a copy with the option off (a shallow copy skips __post_init__, which would
        # re-read the environment variable).
        spv_options = copy.copy(options)
        object.__setattr__(spv_options, "generate_native_code", False)
        original(self, stages, spv_options, *args, **kwargs)
        _locate_llir_calls(stages)
        device = ocloc_device_for(self)
        stages["zebin"] = lambda src, metadata: make_zebin(src, metadata, device)

    setattr(add_stages, _MARK, True)
    backend_cls.add_stages = add_stages


def _locate_llir_calls(stages: dict) -> None:
    """The lines of a zebin: calls Triton leaves without a location (DPAS) get their op's
    (``debug_locations``); only debug info changes, never the code."""
    if "llir" in stages:
        make_llir = stages["llir"]
        stages["llir"] = lambda src, metadata: locate_calls(make_llir(src, metadata))[0]


def _wrap_options(backend_cls: Any) -> None:
    """Read the environment variable as upstream's knob does ("1"/"true"/"on"), not as 3.3 does
    (any non-empty value, even "0")."""
    options_cls = backend_cls.__init__.__globals__.get("XPUOptions")
    if options_cls is None or getattr(options_cls.__post_init__, _MARK, False):
        return
    original = options_cls.__post_init__

    def __post_init__(self: Any) -> None:
        requested = self.generate_native_code
        original(self)
        value = os.environ.get(ENV_VAR)
        if value is not None:
            enabled = value.strip().lower() in ("1", "true", "on")
            object.__setattr__(self, "generate_native_code", bool(requested) or enabled)

    setattr(__post_init__, _MARK, True)
    options_cls.__post_init__ = __post_init__


def _wrap_compiled_kernel() -> None:
    """Upstream point 3: .zebin is bytes, and metadata.binary_ext picks ``kernel.kernel``."""
    from triton.compiler import compiler

    cls = compiler.CompiledKernel
    if getattr(cls.__init__, _MARK, False):
        return
    original = cls.__init__

    def __init__(self: Any, src: Any, metadata_group: dict, hash: str, *args: Any, **kwargs: Any) -> None:
        zebin_keys = [k for k in metadata_group if k.endswith(".zebin")]
        if not zebin_keys:
            original(self, src, metadata_group, hash, *args, **kwargs)
            return
        # 3.3 reads every non-"spv" file as text; hand it the group without the zebin.
        rest = {k: v for k, v in metadata_group.items() if k not in zebin_keys}
        original(self, src, rest, hash, *args, **kwargs)
        data = Path(metadata_group[zebin_keys[0]]).read_bytes()
        self.asm = IsaOnDemand(self.asm)
        self.asm["zebin"] = data
        self.metadata_group = metadata_group
        if getattr(self.metadata, "binary_ext", None) == "zebin":
            self.kernel = data

    setattr(__init__, _MARK, True)
    cls.__init__ = __init__


def _wrap_isa_on_demand() -> None:
    """With upstream's native stage, only add ``asm["isa"]`` to kernels that carry a zebin."""
    try:
        from triton.compiler import compiler
    except ImportError:  # no Triton here: nothing to wrap
        return
    cls = compiler.CompiledKernel
    if getattr(cls.__init__, _ISA_MARK, False):
        return
    original = cls.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if isinstance(self.asm.get("zebin"), bytes):
            self.asm = IsaOnDemand(self.asm)

    # Its own mark: _wrap_compiled_kernel must still install itself over this wrapper.
    setattr(__init__, _ISA_MARK, True)
    cls.__init__ = __init__


class IsaOnDemand(dict):
    """``CompiledKernel.asm`` with ``asm["isa"]``: the zebin's Xe ISA (all kernels), disassembled on
    first access so loading a kernel from the cache costs no ocloc run. Like Triton's
    ``asm["sass"]`` it is text; ``"isa" in asm`` is False until it has been read once."""

    def __missing__(self, key: str) -> str:
        if key != "isa" or "zebin" not in self:
            raise KeyError(key)
        # Here, not at the top: the ISA reader brings the zebin reader, PyYAML and pyelftools
        # (~0.1-0.2 s), which a process that only compiles and launches (invoke demo-ur) never needs.
        from xpukit.runtime.offline.isa import disassemble

        kernels = disassemble(self["zebin"]).kernels
        self["isa"] = (
            "\n".join(kernels.values())
            if len(kernels) == 1
            else "\n".join(f"// kernel {name}\n{text}" for name, text in kernels.items())
        )
        return self["isa"]


def ocloc_device_for(backend: Any) -> str:
    """The ocloc -device name for a backend instance: the one the kit's preset carries
    (``ocloc_device``: targets whose SYCL architecture is unknown, ptl, have only that), else our
    preset's for its architecture id, else the backend's own short name (upstream passes
    ``device_arch`` straight to ocloc)."""
    arch = getattr(getattr(backend, "target", None), "arch", None) or {}
    arch = arch if isinstance(arch, dict) else {}
    if arch.get("ocloc_device"):
        return str(arch["ocloc_device"])
    architecture = arch.get("architecture")
    known = preset_for_architecture(architecture)
    if known:
        return known.ocloc_device
    device = getattr(backend, "device_arch", "") or ""
    if not device:
        raise XpukitError(
            f"no GPU device for a zebin: target architecture {architecture!r} is not a known Intel GPU",
            "compile for a GPU target (pvc, bmg, acm-g10, arl-h, mtl, lnl, ptl) to get a zebin",
        )
    return device


def make_zebin(src: bytes, metadata: dict, device: str) -> bytes:
    """Upstream point 2 (``make_zebin`` at 9e23713): SPIR-V -> zebin with the kernel's build flags."""
    metadata["binary_ext"] = "zebin"
    result = find_ocloc().compile_spirv(bytes(src), device, metadata.get("build_flags") or "")
    metadata["build_flags"] = result.build_flags
    return result.zebin
