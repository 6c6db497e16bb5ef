"""Compile a @triton.jit function for an Intel GPU target with no PyTorch and no SYCL toolchain.

Intel's backend (triton-xpu) builds a tiny C++ module against SYCL headers in its constructor,
only to map the numeric SYCL architecture id to a short name ("pvc", "bmg", ...). We swap that
one call for a pure-Python table, inside the backend class's own globals (Triton loads the
backend's compiler.py under the module name ``intel``, so patching an import path does nothing).
Every other backend call stays Triton's own.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime.offline.specialization import split_hints
from xpukit.runtime.triton import debug_locations, kernel_cache, zebin_stage
from xpukit.targets import DEFAULT_TARGET, TRITON_ARCH_NAME, preset

# Triton's compiler is not safe to enter from several threads at once (CPython 3.11's sysconfig
# initialisation, reached through it, races): every compile in this process takes this lock.
COMPILE_LOCK = threading.RLock()


class _ArchParser:
    """Stands in for the backend's compiled arch_parser module."""

    @staticmethod
    def parse_device_arch(architecture: int) -> str:
        return TRITON_ARCH_NAME.get(int(architecture), "")


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
    # Not a cycle: triton_cache imports triton at module level, and this module must stay
    # importable where Triton is not installed (the host's unit tests read its presets).
    from xpukit.runtime.triton import triton_cache

    triton_cache.install()  # Triton's cache checks its entries and survives a read-only folder
    triton_cache.remember_triton_key()  # its key's hash of libtriton, once per Triton install, not per process
    backend = backends["intel"].compiler
    triton_cache.key_by_compiler(backend)  # a zebin's key names the ocloc and IGC that made it
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
    zebin_stage.install(backend)
    kernel_cache.install()  # XPUKIT_KERNEL_CACHE: Triton's cache shared through Redis
    return backend


def gpu_target(props: Mapping[str, Any], warp_size: int = 32) -> Any:
    """A ``GPUTarget`` for the xpu backend from a property dict (a preset's or a device's)."""
    xpu_backend()
    from triton.backends.compiler import GPUTarget

    return GPUTarget("xpu", dict(props), warp_size)


def parse_signature(text: str) -> dict[str, str]:
    """Parse ``"x_ptr:*fp32, n:i32"`` into Triton's signature mapping. Hints in Triton's AOT
    notation (``x_ptr:*fp32:16``) are checked and left out: ``specialization.for_signature`` reads them."""
    return split_hints(text)[0]


@functools.cache
def _file_keyed_source() -> type:
    """Triton's ASTSource with the kernel's file in its hash. Triton 3.3 keys a compile by the
    kernel's source text and first line, not its file: an identical kernel in another file would
    reuse the cached SPIR-V, whose DWARF names the first file (the report's lines would be that
    file's)."""
    from triton.compiler import ASTSource

    class FileKeyedSource(ASTSource):
        def hash(self) -> str:
            code = getattr(getattr(self.fn, "fn", None), "__code__", None)
            where = getattr(code, "co_filename", "")
            return hashlib.sha256(f"{super().hash()}-{where}-{debug_locations.VERSION}".encode()).hexdigest()

    return FileKeyedSource


def compile_kernel(
    fn: Any,
    signature: Mapping[str, str],
    constexprs: Mapping[str, Any] | None = None,
    target: str | Mapping[str, Any] = DEFAULT_TARGET,
    options: Mapping[str, Any] | None = None,
    divisible: Iterable[str] = (),
) -> Any:
    """Compile ``fn`` (a JITFunction) for a target preset name or a property dict.

    ``signature`` maps every non-constexpr argument name to a Triton type ("*fp32", "i32", ...).
    ``divisible``: arguments a launch knows 16-aligned (pointers) or divisible by 16 (ints), compiled
    with ``tt.divisibility = 16`` as Triton's launch does (``specialization.Specialization``).
    Returns Triton's CompiledKernel (``.asm["spv"]``, ``.metadata``).
    """
    import triton

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
    divisible = list(divisible)
    extra |= set(divisible) - set(arg_names)
    if extra:
        raise XpukitError(
            f"kernel {fn.__name__} has no argument(s) {', '.join(sorted(extra))}",
            f"its arguments are: {', '.join(arg_names)}",
        )
    target_obj = gpu_target(props)
    attrs = {(arg_names.index(name),): [["tt.divisibility", 16]] for name in divisible if name not in constexprs}
    src = _file_keyed_source()(fn, full_signature, constexprs=constexprs, attrs=attrs)
    with COMPILE_LOCK:
        return triton.compile(src, target=target_obj, options=dict(options or {}))
