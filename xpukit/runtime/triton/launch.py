"""Triton -> Unified Runtime with no PyTorch and no SYCL toolchain.

Pieces, each reusable on its own (a Triton driver can take ``LaunchABI`` and ``ProgramCache``
without ``TritonKernel``):

* :func:`target_for_device` - Triton target properties for a session's device (a preset for the
  CPU device; for GPUs the UR device info, architecture = ip_version << 8 as SYCL defines it).
* :func:`compile_for_device` - Triton SPIR-V for the device; the CPU compatibility patch applied.
* :class:`LaunchABI` - Triton's launch ABI from the compiled kernel's metadata: the user arguments
  and the launcher's kind letter for each, the scratch pointers Triton 3.4 and later append, the
  local-memory argument when the kernel takes one (:func:`takes_local_argument`); grid -> ND-range;
  the error a refused argument raises, naming it (the kernel's launcher checks and converts).
* :class:`ProgramCache` - the device's native binary keyed by device, driver, build options and
  SPIR-V hash; a stale or corrupt entry is rebuilt from SPIR-V, never trusted.
* :class:`TritonKernel` / :class:`BoundKernel` - ``kernel[grid](*args)`` on a session.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence, Set
from typing import Any

from xpukit.runtime.offline import spirv as spv
from xpukit.runtime.triton import dispatch as compiled_dispatch
from xpukit.runtime.triton import kernel_cache
from xpukit.runtime.triton.program_cache import ProgramCache, default_cache_dir
from xpukit.runtime.triton.tritonc import compile_kernel, parse_signature
from xpukit.runtime.ur import launcher as launcher_mod
from xpukit.runtime.ur.core import Session
from xpukit.runtime.ur.errors import ClosedError, KernelArgumentError
from xpukit.runtime.ur.launcher import (
    ARG_CLOSED,
    ARG_COUNT,
    ARG_GRID,
    ARG_NOT_LIVE,
    ARG_NULL,
    ARG_RANGE,
    ARG_TYPE,
    kind_of,
)
from xpukit.runtime.ur.objects import Event, Kernel, Program, Queue, USMAllocation
from xpukit.targets import PRESETS, preset_for_architecture

# --- targets ----------------------------------------------------------------------------------


def target_for_device(device: Any) -> dict[str, Any]:
    """Triton ``GPUTarget.arch`` properties for a :class:`~xpukit.runtime.ur.DeviceInfo`."""
    if device.type == "cpu":
        return PRESETS["cpu"].props()
    # SYCL's architecture enum for Intel GPUs is the device IP version shifted left by 8 bits.
    arch = int(device.ip_version) << 8
    exts = set(device.extensions)
    known = preset_for_architecture(arch)
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
    abi = LaunchABI.from_metadata(
        fn,
        sig,
        ck.metadata,
        spv.address_parameters(code, ck.metadata.name),
        spv.parameter_count(code, ck.metadata.name),
    )
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


@dataclasses.dataclass
class ArgSpec:
    """One kernel argument as UR sees it."""

    index: int
    name: str
    ty: str  # Triton type
    kind: str  # launcher kind letter (xpukit.runtime.ur.launcher.KINDS)


def takes_local_argument(metadata: Any, shared: int, before: int, kernel_params: int | None) -> bool:
    """Whether the kernel takes a trailing local-memory argument after its ``before`` arguments.

    Triton 3.3 to release/3.8 append one whenever the kernel uses shared memory. Main since #7606
    allocates shared memory inside the module and takes none, unless compiled with
    ``dynamic_shared_memory`` (an option, so in the metadata) or a layout that needs it; upstream's
    launcher then tells by the kernel's declared parameter count, as this does when it is known."""
    if shared <= 0:
        return False
    if kernel_params in (before, before + 1):
        return kernel_params == before + 1
    if hasattr(metadata, "dynamic_shared_memory"):
        return bool(metadata.dynamic_shared_memory)
    return True


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
    def from_metadata(
        cls,
        fn: Any,
        signature: Mapping[str, str],
        metadata: Any,
        addresses: Set[int] = frozenset(),
        kernel_params: int | None = None,
    ) -> LaunchABI:
        """``addresses``: indices of integer parameters the kernel turns into pointers
        (:func:`xpukit.runtime.offline.spirv.address_parameters`): checked like pointers at launch.
        ``kernel_params``: how many parameters the compiled kernel declares
        (:func:`xpukit.runtime.offline.spirv.parameter_count`), None when unknown (a native binary)."""
        names = [n for n in getattr(fn, "arg_names", list(signature)) if n in signature]
        params = []
        for i, n in enumerate(names):
            try:
                kind = kind_of(signature[n], address=i in addresses)
            except ValueError:
                raise KernelArgumentError(
                    f"unsupported Triton argument type {signature[n]!r} for {n!r}",
                    "use pointers (*fp32, ...), integers (i1..i64, u8..u64) or floats (fp16, bf16, fp32, fp64)",
                ) from None
            params.append(ArgSpec(i, n, signature[n], kind))
        scratch: list[tuple[str, int, int]] = []
        # Triton 3.4 and later (9e23713, release/3.8, main) report these sizes and append one pointer
        # each after the user arguments (null when the size is 0); Triton 3.3 has neither field.
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
            local_index=nxt if takes_local_argument(metadata, shared, nxt, kernel_params) else None,
        )

    @property
    def kinds(self) -> str:
        return "".join(p.kind for p in self.params)

    @property
    def local_size(self) -> tuple[int, int, int]:
        return (self.num_warps * self.threads_per_warp, 1, 1)

    def nd_range(self, grid: Sequence[int]) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """Triton grid (programs per axis) -> UR (global, local) work sizes."""
        gx, gy, gz = (int(x) for x in padded_grid(grid))
        return (gx * self.local_size[0], gy, gz), self.local_size

    def argument_error(self, session: Session) -> Callable[[int, int, Any], None]:
        """The launcher's ``on_arg_error``: raises :class:`KernelArgumentError` naming the argument."""
        return functools.partial(_argument_error, self, weakref.ref(session))


_KIND_WORDS = {"P": "a device pointer", "A": "a device address (the kernel casts it to a pointer)"}


def _argument_error(abi: LaunchABI, session_ref: Any, index: int, code: int, value: Any) -> None:
    if code == ARG_COUNT:
        expected = ", ".join(f"{p.name}:{p.ty}" for p in abi.params)
        raise KernelArgumentError(
            f"kernel {abi.kernel_name} takes {len(abi.params)} argument(s), got {index}",
            f"pass ({expected}); constexpr arguments are fixed at compile time",
        )
    if code == ARG_GRID:
        raise KernelArgumentError(f"grid size {value!r:.40} is not an integer in [0, 2**31)", "pass e.g. (n_blocks,)")
    if code == ARG_CLOSED:
        raise ClosedError(f"kernel {abi.kernel_name} used after close()", "load the kernel again on an open session")
    p = abi.params[index]
    what = f"argument {p.name!r} ({p.ty}) of {abi.kernel_name}"
    if code in (ARG_NULL, ARG_NOT_LIVE) or (code == ARG_TYPE and p.kind in "PAqQ" and hasattr(type(value), "ptr")):
        session = session_ref()
        reason = session.explain_address(value) if session is not None else "its session is closed"
        raise KernelArgumentError(
            f"{what} must point into live device memory of the launching session: {reason}",
            "pass a live USMAllocation or DeviceArray of this session (or its .ptr)",
        )
    if code == ARG_RANGE:
        raise KernelArgumentError(
            f"{what}: {value!r:.40} does not fit {p.ty}", "pass a value in range or change the kernel's signature"
        )
    expected = _KIND_WORDS.get(p.kind, "an integer" if p.kind in "qQiIhHbB?" else "a number")
    raise KernelArgumentError(
        f"{what} must be {expected}, got {type(value).__name__} {value!r:.40}",
        "pass a USMAllocation/DeviceArray or its .ptr" if p.kind in "PA" else "pass a Python or numpy scalar",
    )


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


def padded_grid(grid: Sequence[Any]) -> tuple[Any, Any, Any]:
    """A grid of 1 to 3 sizes as the launcher takes it, (gx, gy, gz): the sizes it lacks are 1."""
    n = len(grid)
    return grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1


# --- kernels ---------------------------------------------------------------------------------


class BoundKernel:
    """A compiled Triton kernel loaded on one session: ``bk[grid](*args)`` or ``bk.launch(grid, *args)``.

    Every launch, whichever door it came in by (``bk[grid]``, :meth:`launch`, Triton's
    ``kernel[grid]`` through the driver, the driver's table of compiled launches), goes through
    :attr:`submit`: arguments are converted and checked (pointers against the session's live
    allocations) before anything reaches UR, scratch buffers grow with the grid, and argument
    setting + enqueue is atomic across threads.
    """

    def __init__(self, session: Session, artifact: CompiledArtifact, program: Program) -> None:
        self.session = session
        self.artifact = artifact
        self.abi = artifact.abi
        self.program = program  # owned from here on: closed with this kernel, or now if loading fails
        self._scratch: list[USMAllocation | None] = [None] * len(self.abi.scratch)
        self._scratch_programs = 0  # the grid the scratch buffers are sized for
        self._retired: list[USMAllocation] = []  # outgrown scratch, alive for launches still queued
        self._scratch_lock = threading.Lock()
        try:
            self.kernel: Kernel = program.kernel(artifact.name)
            self.launcher = self.kernel.launcher(self.abi.kinds, self.abi.local_size, self.abi.argument_error(session))
            self.launcher.hidden(self._hidden())
        except BaseException:
            program.close()
            raise
        self.grows_scratch = any(size > 0 for _name, size, _align in self.abi.scratch)
        if self.grows_scratch:  # the launcher grows the scratch before a launch of more programs than ever
            self.launcher.grow_with(self._grow_scratch)
        # The one launch door: submit(queue_handle, gx, gy, gz, args[, want_event]) -> event | None,
        # the checked launcher itself (no Python frame per launch).
        self.submit: Callable[..., Any] = self.launcher.launch
        self._queue = session.queue  # its .handle refuses a closed session's queue
        # launch() in C for its common call (a tuple grid, no keywords; the compiled launcher): the
        # steps below without their frame; any other call is the method below.
        if (
            compiled_dispatch.Direct is not None
            and type(self.launcher) is launcher_mod.Launcher
            and type(self).launch is BoundKernel.launch
        ):
            self.launch = compiled_dispatch.Direct(  # this instance's own door
                self.launcher, self._queue, BoundKernel.launch.__get__(self)
            )

    def _hidden(self) -> list[tuple[str, int]]:
        """Triton's arguments after the user's: one pointer per scratch kind (null while its size
        is 0), then the local-memory buffer when the kernel uses shared memory."""
        hidden = [("P", buf.ptr if buf is not None else 0) for buf in self._scratch]
        if self.abi.local_index is not None:
            hidden.append(("L", self.abi.shared))
        return hidden

    def _grow_scratch(self, programs: int) -> None:
        """Scratch is per program: reallocated for the largest grid seen. The old buffers stay
        alive until the kernel closes, so launches already queued keep valid memory."""
        with self._scratch_lock:
            if programs <= self._scratch_programs:
                return
            for i, (_name, size, align) in enumerate(self.abi.scratch):
                if size > 0:
                    buf = self.session.alloc(size * programs + max(align, 1))
                    old = self._scratch[i]
                    self._scratch[i] = buf
                    if old is not None:
                        self._retired.append(old)
            self.launcher.hidden(self._hidden())
            self._scratch_programs = programs

    @property
    def scratch_buffers(self) -> list[USMAllocation | None]:
        """The current scratch allocation per scratch kind (None while its size is 0)."""
        return list(self._scratch)

    @property
    def closed(self) -> bool:
        return self.kernel.closed or self.session.closed

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return functools.partial(self.launch, grid)

    def launch(self, grid: Any, *args: Any, queue: Queue | None = None, event: bool = False) -> Any:
        """Check the arguments and enqueue over ``grid`` (asynchronous; ``session.finish()`` waits),
        on ``queue`` (the session's if None); ``event=True`` returns the launch's Event."""
        if type(grid) is not tuple or not 1 <= len(grid) <= 3:
            if callable(grid):
                names = (p.name for p in self.abi.params)
                grid = grid({**self.artifact.constexprs, **dict(zip(names, args, strict=False))})
            grid = normalize_grid(grid)
        q = self._queue if queue is None else queue
        h = q.raw_handle  # read directly on every launch; the property raises the kit's error once closed
        if h is None or q.closed:
            h = q.handle
        handle = self.submit(h, *padded_grid(grid), args, event)
        return Event(self.session, handle) if event and handle else None

    def close(self) -> None:
        for b in [*self._scratch, *self._retired]:
            if b is not None:
                b.close()
        self._scratch = [None] * len(self.abi.scratch)
        self._retired.clear()
        self.kernel.close()
        self.program.close()


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
            None if cache is False else (cache if isinstance(cache, ProgramCache) else kernel_cache.program_cache())
        )
        self._artifacts: dict[str, CompiledArtifact] = {}
        self._bound: weakref.WeakKeyDictionary[Session, BoundKernel] = weakref.WeakKeyDictionary()
        self._lock = threading.RLock()  # first compile and load from several threads: once

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
        with self._lock:
            bound = self._bound.get(session)
            if bound is not None and not bound.closed:
                return bound
            return self._load(session)

    def _load(self, session: Session) -> BoundKernel:
        art = self.compile(session.device)
        if self.cache is not None:
            program = self.cache.load(session, art.spirv, spirv_sha256=art.spirv_sha256).program
        else:
            program = session.program_from_spirv(art.spirv)
        bound = BoundKernel(session, art, program)
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
