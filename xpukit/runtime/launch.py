"""Triton -> Unified Runtime with no PyTorch and no SYCL toolchain.

Pieces, each reusable on its own (a Triton driver can take ``LaunchABI`` and ``ProgramCache``
without ``TritonKernel``):

* :func:`target_for_device` - Triton target properties for a session's device (a preset for the
  CPU device; for GPUs the UR device info, architecture = ip_version << 8 as SYCL defines it).
* :func:`compile_for_device` - Triton SPIR-V for the device; the CPU compatibility patch applied.
* :class:`LaunchABI` - Triton's launch ABI from the compiled kernel's metadata: user arguments,
  the scratch pointers newer Triton appends, a local-memory argument when ``shared > 0``; grid ->
  ND-range; argument checking and packing (errors before anything is enqueued).
* :class:`ProgramCache` - the device's native binary keyed by device, driver, build options and
  SPIR-V hash; a stale or corrupt entry is rebuilt from SPIR-V, never trusted.
* :class:`TritonKernel` / :class:`BoundKernel` - ``kernel[grid](*args)`` on a session.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import json
import logging
import weakref
from collections.abc import Callable, Mapping, Sequence
from ctypes import byref, c_size_t, c_void_p
from typing import Any

from xpukit.runtime import spirv as spv
from xpukit.runtime.program_cache import ProgramCache, default_cache_dir
from xpukit.runtime.tritonc import PRESETS, SYCL_ARCH, compile_kernel, parse_signature
from xpukit.runtime.ur import _api
from xpukit.runtime.ur.core import Kernel, Program, Session, USMAllocation
from xpukit.runtime.ur.errors import ClosedError, KernelArgumentError

log = logging.getLogger("xpukit.runtime.launch")

# --- targets ----------------------------------------------------------------------------------

_PRESET_BY_ARCH = {arch: name for name, arch in SYCL_ARCH.items()}


def target_for_device(device: Any) -> dict[str, Any]:
    """Triton ``GPUTarget.arch`` properties for a :class:`~xpukit.runtime.ur.DeviceInfo`."""
    if device.type == "cpu":
        return PRESETS["cpu"].props()
    # SYCL's architecture enum for Intel GPUs is the device IP version shifted left by 8 bits.
    arch = int(device.ip_version) << 8
    exts = set(device.extensions)
    known = PRESETS.get(_PRESET_BY_ARCH.get(arch, ""))
    props = {
        "name": device.name,
        "architecture": arch,
        "max_work_group_size": device.max_work_group_size,
        "max_num_sub_groups": device.max_num_sub_groups,
        "sub_group_sizes": list(device.sub_group_sizes),
        "has_fp64": device.has_fp64,
        # The extension strings are what Triton's own driver asks SYCL for; where the adapter does
        # not list them, fall back to the known preset for this architecture.
        "has_subgroup_matrix_multiply_accumulate": "cl_intel_subgroup_matrix_multiply_accumulate" in exts
        or bool(known and known.has_subgroup_matrix_multiply_accumulate),
        "has_subgroup_2d_block_io": "cl_intel_subgroup_2d_block_io" in exts
        or bool(known and known.has_subgroup_2d_block_io),
        "has_bfloat16_conversions": "cl_intel_bfloat16_conversions" in exts
        or bool(known and known.has_bfloat16_conversions),
    }
    return props


@dataclasses.dataclass(frozen=True)
class CompiledArtifact:
    name: str
    spirv: bytes  # as loaded into UR (patched for the CPU device)
    spirv_sha256: str
    metadata: Any
    signature: dict[str, str]
    constexprs: dict[str, Any]
    abi: LaunchABI


def compile_for_device(
    fn: Any,
    signature: Mapping[str, str] | str,
    constexprs: Mapping[str, Any] | None,
    device: Any,
    options: Mapping[str, Any] | None = None,
) -> CompiledArtifact:
    """Compile a ``@triton.jit`` function for a UR device; returns SPIR-V ready for UR."""
    sig = parse_signature(signature) if isinstance(signature, str) else dict(signature)
    constexprs = dict(constexprs or {})
    ck = compile_kernel(fn, sig, constexprs, target_for_device(device), options)
    code = ck.asm["spv"]
    if device.type == "cpu":
        code = spv.patch_for_cpu(code)
    abi = LaunchABI.from_metadata(fn, sig, ck.metadata)
    return CompiledArtifact(
        name=ck.metadata.name,
        spirv=code,
        spirv_sha256=hashlib.sha256(code).hexdigest(),
        metadata=ck.metadata,
        signature=sig,
        constexprs=constexprs,
        abi=abi,
    )


# --- launch ABI ------------------------------------------------------------------------------

_INT_TYPES: dict[str, tuple[type, int, int]] = {
    "i1": (ctypes.c_int8, 0, 1),
    "i8": (ctypes.c_int8, -(2**7), 2**7 - 1),
    "i16": (ctypes.c_int16, -(2**15), 2**15 - 1),
    "i32": (ctypes.c_int32, -(2**31), 2**31 - 1),
    "i64": (ctypes.c_int64, -(2**63), 2**63 - 1),
    "u1": (ctypes.c_uint8, 0, 1),
    "u8": (ctypes.c_uint8, 0, 2**8 - 1),
    "u16": (ctypes.c_uint16, 0, 2**16 - 1),
    "u32": (ctypes.c_uint32, 0, 2**32 - 1),
    "u64": (ctypes.c_uint64, 0, 2**64 - 1),
}
_FLOAT_TYPES: dict[str, type] = {"fp32": ctypes.c_float, "f32": ctypes.c_float, "fp64": ctypes.c_double}
_HALF_TYPES = ("fp16", "bf16")  # passed as their 16-bit patterns


def _is_int(v: Any) -> bool:
    if isinstance(v, int):
        return True
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        return False
    return isinstance(v, np.integer | np.bool_)


def _is_number(v: Any) -> bool:
    if _is_int(v) or isinstance(v, float):
        return True
    import numpy as np

    return isinstance(v, np.floating)


def _address(v: Any) -> int | None:
    """The device address of a pointer-like argument, or None if it is not one."""
    if isinstance(v, USMAllocation):
        return v.ptr
    if v is None:
        return 0
    if _is_int(v) and not isinstance(v, bool):
        return int(v)
    ptr = getattr(v, "ptr", None)
    if isinstance(ptr, int):
        return ptr
    data_ptr = getattr(v, "data_ptr", None)  # torch-like tensors, for a later driver
    if callable(data_ptr):
        return int(data_ptr())
    return None


@dataclasses.dataclass
class ArgSpec:
    """One kernel argument as UR sees it."""

    index: int
    name: str
    ty: str  # Triton type, or "scratch"/"local" for hidden arguments
    kind: str  # "pointer" | "int" | "float" | "half" | "hidden"

    def convert(self, v: Any) -> Any:
        """Check one user value and turn it into what UR gets (int address or ctypes value)."""
        ty = self.ty
        if self.kind == "pointer":
            addr = _address(v)
            if addr is None or not 0 <= addr < 2**64:
                raise KernelArgumentError(
                    f"argument {self.name!r} ({ty}) must be a USM allocation or a 64-bit address, "
                    f"got {type(v).__name__} {v!r:.40}",
                    "pass a USMAllocation (session.alloc / from_numpy) or its .ptr",
                )
            return addr
        if self.kind == "int":
            if isinstance(v, USMAllocation) and ty in ("i64", "u64"):
                v = v.ptr  # the blog's style: a raw address the kernel casts to a typed pointer
            if not _is_int(v):
                raise KernelArgumentError(
                    f"argument {self.name!r} ({ty}) must be an integer, got {type(v).__name__} {v!r:.40}",
                    "pass a Python int or numpy integer",
                )
            ctype, lo, hi = _INT_TYPES[ty]
            v = int(v)
            if not lo <= v <= hi:
                raise KernelArgumentError(
                    f"argument {self.name!r} = {v} does not fit {ty} [{lo}, {hi}]",
                    "pass a value in range or change the kernel's signature",
                )
            return ctype(v)
        if self.kind == "float":
            if not _is_number(v):
                raise KernelArgumentError(
                    f"argument {self.name!r} ({ty}) must be a number, got {type(v).__name__} {v!r:.40}",
                    "pass a Python float/int or numpy scalar",
                )
            return _FLOAT_TYPES[ty](float(v))
        if self.kind == "half":
            if not _is_number(v):
                raise KernelArgumentError(
                    f"argument {self.name!r} ({ty}) must be a number, got {type(v).__name__}",
                    "pass a Python float or numpy scalar",
                )
            import numpy as np

            if ty == "fp16":
                bits = int(np.array(float(v), dtype=np.float16).view(np.uint16))
            else:  # bf16: round-to-nearest-even of the fp32 pattern
                f = int(np.array(float(v), dtype=np.float32).view(np.uint32))
                bits = ((f + 0x7FFF + ((f >> 16) & 1)) >> 16) & 0xFFFF
            return ctypes.c_uint16(bits)
        raise KernelArgumentError(f"argument {self.name!r} has unsupported type {ty}", "")


def _arg_kind(ty: str) -> str:
    if ty.startswith("*"):
        return "pointer"
    if ty in _INT_TYPES:
        return "int"
    if ty in _FLOAT_TYPES:
        return "float"
    if ty in _HALF_TYPES:
        return "half"
    raise KernelArgumentError(
        f"unsupported Triton argument type {ty!r}",
        "use pointers (*fp32, ...), integers (i1..i64, u8..u64) or floats (fp16, bf16, fp32, fp64)",
    )


@dataclasses.dataclass
class LaunchABI:
    """How Triton's compiled kernel takes its arguments and maps its grid."""

    kernel_name: str
    params: list[ArgSpec]
    num_warps: int
    threads_per_warp: int
    shared: int  # local memory bytes: one urKernelSetArgLocal argument when > 0
    scratch: list[tuple[str, int, int]]  # newer Triton: (name, size per program, alignment)
    local_index: int | None

    @classmethod
    def from_metadata(cls, fn: Any, signature: Mapping[str, str], metadata: Any) -> LaunchABI:
        names = [n for n in getattr(fn, "arg_names", list(signature)) if n in signature]
        params = [ArgSpec(i, n, signature[n], _arg_kind(signature[n])) for i, n in enumerate(names)]
        scratch: list[tuple[str, int, int]] = []
        # The 9e23713 Triton line reports these sizes and appends one pointer each after the
        # user arguments (null when the size is 0); Triton 3.3 has neither field.
        for field, align_field in (
            ("global_scratch_size", "global_scratch_align"),
            ("profile_scratch_size", "profile_scratch_align"),
        ):
            if hasattr(metadata, field):
                scratch.append((field, int(getattr(metadata, field) or 0), int(getattr(metadata, align_field, 1) or 1)))
        shared = int(getattr(metadata, "shared", 0) or 0)
        nxt = len(params) + len(scratch)
        return cls(
            kernel_name=metadata.name,
            params=params,
            num_warps=int(metadata.num_warps),
            threads_per_warp=int(getattr(metadata, "threads_per_warp", 32)),
            shared=shared,
            scratch=scratch,
            local_index=nxt if shared > 0 else None,
        )

    @property
    def local_size(self) -> tuple[int, int, int]:
        return (self.num_warps * self.threads_per_warp, 1, 1)

    def nd_range(self, grid: Sequence[int]) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """Triton grid (programs per axis) -> UR (global, local) work sizes."""
        g = tuple(int(x) for x in grid) + (1,) * (3 - len(grid))
        lx = self.local_size[0]
        return (g[0] * lx, g[1], g[2]), self.local_size

    def convert(self, args: Sequence[Any]) -> list[Any]:
        """Check every user argument; raises :class:`KernelArgumentError` before any UR call."""
        if len(args) != len(self.params):
            expected = ", ".join(f"{p.name}:{p.ty}" for p in self.params)
            raise KernelArgumentError(
                f"kernel {self.kernel_name} takes {len(self.params)} argument(s), got {len(args)}",
                f"pass ({expected}); constexpr arguments are fixed at compile time",
            )
        return [p.convert(v) for p, v in zip(self.params, args, strict=True)]


def normalize_grid(grid: Any, meta: Mapping[str, Any] | None = None) -> tuple[int, ...]:
    """A Triton grid (ints, or a callable of the launch's meta-parameters) as 1 to 3 ints."""
    if callable(grid):
        grid = grid(dict(meta or {}))
    if isinstance(grid, int):
        grid = (grid,)
    try:
        g = tuple(int(x) for x in grid)
    except (TypeError, ValueError):
        raise KernelArgumentError(f"grid {grid!r} is not 1 to 3 integers", "pass e.g. (n_blocks,)") from None
    if not 1 <= len(g) <= 3 or any(x < 0 for x in g):
        raise KernelArgumentError(f"grid {grid!r} must be 1 to 3 non-negative integers", "pass e.g. (n_blocks,)")
    return g


# --- kernels ---------------------------------------------------------------------------------


class BoundKernel:
    """A compiled Triton kernel loaded on one session: ``bk[grid](*args)``."""

    def __init__(self, session: Session, artifact: CompiledArtifact, program: Program) -> None:
        self.session = session
        self.artifact = artifact
        self.abi = artifact.abi
        self.program = program
        self.kernel: Kernel = program.kernel(artifact.name)
        lib = session.lib
        self._set_ptr = lib.raw.urKernelSetArgPointer
        self._set_val = lib.raw.urKernelSetArgValue
        self._launch = lib.raw.urEnqueueKernelLaunch
        self._props = lib.abi.launch_has_properties
        self._g = (c_size_t * 3)()
        self._l = (c_size_t * 3)(*self.abi.local_size)
        self._last: list[Any] = [object()] * len(self.abi.params)
        # Arguments persist on a UR kernel, so unchanged ones are not set again, but only while no
        # USM memory was freed: Intel's CPU runtime binds a pointer argument to its allocation when
        # it is set, and a new allocation at a freed address must be set again (skipping that
        # corrupted the runtime's heap).
        self._usm_generation = session.usm_generation
        self._scratch: list[USMAllocation] = []
        self._set_hidden()

    def _set_hidden(self) -> None:
        abi, k = self.abi, self.kernel
        idx = len(abi.params)
        for _name, _size, _align in abi.scratch:
            # Size is per program: allocate for the largest grid seen (grown in _ensure_scratch).
            k.set_arg_pointer(idx, 0)
            idx += 1
        if abi.local_index is not None:
            k.set_arg_local(abi.local_index, abi.shared)

    def _ensure_scratch(self, programs: int) -> None:
        idx = len(self.abi.params)
        for i, (_name, size, _align) in enumerate(self.abi.scratch):
            if size > 0:
                need = size * programs
                if i >= len(self._scratch) or self._scratch[i].nbytes < need:
                    buf = self.session.alloc(need)
                    if i < len(self._scratch):
                        self._scratch[i].close()
                        self._scratch[i] = buf
                    else:
                        self._scratch.append(buf)
                    self.kernel.set_arg_pointer(idx + i, buf.ptr)

    @property
    def closed(self) -> bool:
        return self.kernel.closed or self.session.closed

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args: self.launch(grid, *args)

    def launch(self, grid: Any, *args: Any) -> None:
        """Check and set the arguments, then enqueue (asynchronous; ``session.finish()`` waits)."""
        values = self.abi.convert(args)  # every check before any UR call
        if callable(grid):
            names = (p.name for p in self.abi.params)
            grid = grid({**self.artifact.constexprs, **dict(zip(names, args, strict=True))})
        g = normalize_grid(grid)
        if 0 in g:
            return
        self.enqueue(values, g)

    def enqueue(self, values: Sequence[Any], grid: Sequence[int], queue: Any = None, event: Any = None) -> None:
        """Set the already-converted ``values`` (from ``abi.convert``) and enqueue over ``grid``
        (1 to 3 positive ints) on ``queue`` (a raw queue handle; the session's queue if None).
        ``event``: a ``c_void_p`` that receives the launch's UR event (the caller releases it).
        Shared by :meth:`launch` and xpukit's Triton driver."""
        g = grid
        (gx, gy, gz), _ = self.abi.nd_range(g)
        h = self.kernel.handle  # raises ClosedError after close
        q = self.session.queue.handle if queue is None else queue
        if self.abi.scratch:
            self._ensure_scratch(g[0] * (g[1] if len(g) > 1 else 1) * (g[2] if len(g) > 2 else 1))
        last = self._last
        if self._usm_generation != self.session.usm_generation:
            last[:] = [object()] * len(last)
            self._usm_generation = self.session.usm_generation
        for spec, v in zip(self.abi.params, values, strict=True):
            i = spec.index
            if spec.kind == "pointer":
                if last[i] == v:
                    continue  # UR kernels keep their arguments: skip the unchanged ones
                code = self._set_ptr(h, i, None, c_void_p(v))
                key = v
            else:
                key = (type(v), v.value)
                if last[i] == key:
                    continue
                code = self._set_val(h, i, ctypes.sizeof(v), None, byref(v))
            if code:
                last[i] = object()
                _raise(code, "urKernelSetArgPointer" if spec.kind == "pointer" else "urKernelSetArgValue")
            last[i] = key
        gs = self._g
        gs[0], gs[1], gs[2] = gx, gy, gz
        ev = None if event is None else byref(event)
        if self._props:
            code = self._launch(q, h, 3, None, gs, self._l, 0, None, 0, None, ev)
        else:
            code = self._launch(q, h, 3, None, gs, self._l, 0, None, ev)
        if code:
            _raise(code, "urEnqueueKernelLaunch")

    def relaunch(self, queue: Any, event: Any = None) -> None:
        """Enqueue again with the arguments and grid of the previous :meth:`enqueue` (UR kernels keep
        their arguments): the driver's path for a launch identical to the one before."""
        h = self.kernel.handle  # raises ClosedError after close
        if self._usm_generation != self.session.usm_generation:
            # Memory was freed since the arguments were set: bind the pointers again (see __init__).
            for spec in self.abi.params:
                if spec.kind == "pointer":
                    code = self._set_ptr(h, spec.index, None, c_void_p(self._last[spec.index]))
                    if code:
                        _raise(code, "urKernelSetArgPointer")
            self._usm_generation = self.session.usm_generation
        ev = None if event is None else byref(event)
        if self._props:
            code = self._launch(queue, h, 3, None, self._g, self._l, 0, None, 0, None, ev)
        else:
            code = self._launch(queue, h, 3, None, self._g, self._l, 0, None, ev)
        if code:
            _raise(code, "urEnqueueKernelLaunch")

    def close(self) -> None:
        for b in self._scratch:
            b.close()
        self._scratch = []
        self.kernel.close()
        self.program.close()


def _raise(code: int, fn: str) -> None:
    from xpukit.runtime.ur.errors import raise_result

    raise_result(code, fn)


class TritonKernel:
    """A ``@triton.jit`` function compiled for UR devices on demand, one program per session.

    ``signature``: ``{"x": "*fp32", "n": "i32"}`` or ``"x:*fp32,n:i32"`` for every non-constexpr
    argument; ``constexprs``: the constexpr values; ``options``: Triton compile options
    (``num_warps``...). ``cache``: a :class:`ProgramCache`, None for the default one, False for none.
    """

    def __init__(
        self,
        fn: Any,
        signature: Mapping[str, str] | str,
        constexprs: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        cache: ProgramCache | bool | None = None,
    ) -> None:
        self.fn = fn
        self.signature = parse_signature(signature) if isinstance(signature, str) else dict(signature)
        self.constexprs = dict(constexprs or {})
        self.options = dict(options or {})
        self.cache: ProgramCache | None = (
            None if cache is False else (cache if isinstance(cache, ProgramCache) else ProgramCache())
        )
        self._artifacts: dict[str, CompiledArtifact] = {}
        self._bound: weakref.WeakKeyDictionary[Session, BoundKernel] = weakref.WeakKeyDictionary()

    def compile(self, device: Any) -> CompiledArtifact:
        key = json.dumps(target_for_device(device), sort_keys=True) + device.type
        art = self._artifacts.get(key)
        if art is None:
            art = compile_for_device(self.fn, self.signature, self.constexprs, device, self.options)
            self._artifacts[key] = art
        return art

    def bind(self, session: Session) -> BoundKernel:
        """Load this kernel on ``session`` (compiling and caching as needed)."""
        if session.closed:
            raise ClosedError("session used after close()", "open a new Session")
        bound = self._bound.get(session)
        if bound is not None and not bound.closed:
            return bound
        art = self.compile(session.device)
        if self.cache is not None:
            program = self.cache.load(session, art.spirv, spirv_sha256=art.spirv_sha256)
        else:
            program = session.program_from_spirv(art.spirv)
        try:
            bound = BoundKernel(session, art, program)
        except BaseException:
            program.close()
            raise
        self._bound[session] = bound
        return bound

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        def run(*args: Any, session: Session) -> None:
            self.bind(session).launch(grid, *args)

        return run

    def launch(self, session: Session, grid: Any, *args: Any) -> None:
        self.bind(session).launch(grid, *args)


__all__ = [
    "ArgSpec",
    "BoundKernel",
    "CompiledArtifact",
    "LaunchABI",
    "ProgramCache",
    "TritonKernel",
    "compile_for_device",
    "default_cache_dir",
    "normalize_grid",
    "target_for_device",
]

_ = _api  # the raw module stays importable from here for drivers that need the enums
