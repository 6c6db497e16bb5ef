"""Compile a @triton.jit function for an Intel GPU target with no PyTorch and no SYCL toolchain.

Intel's backend (triton-xpu) builds a tiny C++ module against SYCL headers in its constructor,
only to map the numeric SYCL architecture id to a short name ("pvc", "bmg", ...). We swap that
one call for a pure-Python table, inside the backend class's own globals (Triton loads the
backend's compiler.py under the module name ``intel``, so patching an import path does nothing).
Every other backend call stays Triton's own.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

from xpukit.errors import XpukitError

# SYCL experimental architecture enum values (sycl::ext::oneapi::experimental::architecture).
SYCL_ARCH = {
    "pvc": 0x030F000700,
    "acm-g10": 0x030DC00800,  # a.k.a. dg2-g10; Triton names it "dg2"
    "bmg": 0x0500400400,  # bmg-g21
    "lnl": 0x0501000400,  # lnl-m
    "mtl": 0x0311C00400,  # mtl-h
}
_ARCH_SHORT_NAME = {
    SYCL_ARCH["pvc"]: "pvc",
    SYCL_ARCH["acm-g10"]: "dg2",
    SYCL_ARCH["bmg"]: "bmg",
    SYCL_ARCH["lnl"]: "lnl",
    SYCL_ARCH["mtl"]: "mtl",
}


@dataclasses.dataclass(frozen=True)
class TargetPreset:
    """Device properties Triton's Intel backend reads from ``GPUTarget.arch``."""

    name: str
    ocloc_device: str  # the -device name ocloc takes; "" for the CPU device
    architecture: int
    max_work_group_size: int
    max_num_sub_groups: int
    sub_group_sizes: tuple[int, ...]
    has_fp64: bool
    has_subgroup_matrix_multiply_accumulate: bool
    has_subgroup_2d_block_io: bool
    has_bfloat16_conversions: bool

    def props(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("ocloc_device")
        data["sub_group_sizes"] = list(self.sub_group_sizes)
        return data


# Presets for compiling without the device present. On a real device the session's properties
# come from UR device info instead. The "cpu" preset has no matrix engine and no 2D block IO, so
# tl.dot lowers to plain FMAs that Intel's CPU OpenCL runtime can run.
PRESETS: dict[str, TargetPreset] = {
    p.name: p
    for p in (
        TargetPreset("pvc", "pvc", SYCL_ARCH["pvc"], 1024, 64, (16, 32), True, True, True, True),
        TargetPreset("acm-g10", "acm-g10", SYCL_ARCH["acm-g10"], 1024, 128, (8, 16, 32), False, True, False, True),
        TargetPreset("bmg", "bmg", SYCL_ARCH["bmg"], 1024, 64, (16, 32), True, True, True, True),
        TargetPreset("lnl", "lnl", SYCL_ARCH["lnl"], 1024, 64, (16, 32), True, True, True, True),
        TargetPreset("mtl", "mtl", SYCL_ARCH["mtl"], 1024, 64, (8, 16, 32), False, False, False, True),
        TargetPreset("cpu", "", 0, 8192, 1024, (8, 16, 32, 64), True, False, False, False),
    )
}


def preset(name: str) -> TargetPreset:
    """The preset for a target name, or an error listing the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise XpukitError(
            f"unknown target {name!r}",
            f"use one of: {', '.join(PRESETS)}",
        ) from None


class _ArchParser:
    """Stands in for the backend's compiled arch_parser module."""

    @staticmethod
    def parse_device_arch(architecture: int) -> str:
        return _ARCH_SHORT_NAME.get(int(architecture), "")


@functools.cache
def xpu_backend() -> type:
    """Triton's XPUBackend class, made constructible without SYCL headers or torch."""
    try:
        from triton.backends import backends
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise XpukitError(
            f"Triton is not importable here ({exc})",
            "run inside the kit's image (invoke shell) or pip install the cpu lock file",
        ) from None
    if "intel" not in backends:
        raise XpukitError(
            "the installed Triton has no Intel (xpu) backend",
            "install triton-xpu (cpu profile) or Intel's Triton build (xpu profile)",
        )
    from xpukit.runtime import triton_cache

    triton_cache.install()  # Triton's cache checks its entries and survives a read-only folder
    backend = backends["intel"].compiler
    init_globals = backend.__init__.__globals__
    original = init_globals["compile_module_from_src"]
    if not getattr(original, "_xpukit_wrapped", False):

        def compile_module_from_src(src: str, name: str, *args: Any, **kwargs: Any) -> Any:
            if name == "arch_utils":
                return _ArchParser
            return original(src, name, *args, **kwargs)

        compile_module_from_src._xpukit_wrapped = True  # type: ignore[attr-defined]
        init_globals["compile_module_from_src"] = compile_module_from_src
    # Without upstream's zebin stage (triton-xpu 3.3), register xpukit's so generate_native_code works.
    from xpukit.runtime import zebin_stage

    zebin_stage.install(backend)
    return backend


def gpu_target(props: Mapping[str, Any], warp_size: int = 32) -> Any:
    """A ``GPUTarget`` for the xpu backend from a property dict (a preset's or a device's)."""
    xpu_backend()
    from triton.backends.compiler import GPUTarget

    return GPUTarget("xpu", dict(props), warp_size)


def parse_signature(text: str) -> dict[str, str]:
    """Parse ``"x_ptr:*fp32, n:i32"`` into Triton's signature mapping."""
    signature: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, ty = (s.strip() for s in item.partition(":"))
        if not sep or not name or not ty:
            raise XpukitError(
                f"malformed signature entry {item!r}",
                "write name:type pairs separated by commas, e.g. 'x_ptr:*fp32,n:i32'",
            )
        signature[name] = ty
    return signature


def compile_kernel(
    fn: Any,
    signature: Mapping[str, str],
    constexprs: Mapping[str, Any] | None = None,
    target: str | Mapping[str, Any] = "pvc",
    options: Mapping[str, Any] | None = None,
) -> Any:
    """Compile ``fn`` (a JITFunction) for a target preset name or a property dict.

    ``signature`` maps every non-constexpr argument name to a Triton type ("*fp32", "i32", ...).
    Returns Triton's CompiledKernel (``.asm["spv"]``, ``.metadata``).
    """
    import triton
    from triton.compiler import ASTSource

    props = preset(target).props() if isinstance(target, str) else dict(target)
    constexprs = dict(constexprs or {})
    arg_names = list(getattr(fn, "arg_names", []))
    if not arg_names:
        raise XpukitError(f"{fn!r} is not a @triton.jit function", "decorate the kernel with @triton.jit")
    full_signature: dict[str, str] = {}
    for name in arg_names:
        if name in constexprs:
            full_signature[name] = "constexpr"
        elif name in signature:
            full_signature[name] = signature[name]
        else:
            raise XpukitError(
                f"kernel {fn.__name__} argument {name!r} has no type and no constexpr value",
                f"add '{name}:<type>' to the signature or '{name}=<value>' to the constexprs",
            )
    extra = set(signature) - set(arg_names)
    extra |= set(constexprs) - set(arg_names)
    if extra:
        raise XpukitError(
            f"kernel {fn.__name__} has no argument(s) {', '.join(sorted(extra))}",
            f"its arguments are: {', '.join(arg_names)}",
        )
    target_obj = gpu_target(props)
    src = ASTSource(fn, full_signature, constexprs=constexprs)
    return triton.compile(src, target=target_obj, options=dict(options or {}))
