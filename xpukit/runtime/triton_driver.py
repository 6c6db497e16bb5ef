"""A Triton driver backed by Unified Runtime: Triton's ordinary ``kernel[grid](...)`` with no PyTorch.

    import triton
    from xpukit.runtime import ur
    from xpukit.runtime.triton_driver import activate

    with ur.Session("auto") as s, activate(s):
        x = s.from_numpy(host)                       # USM; x.ptr is the raw device address
        y = s.alloc(host.nbytes)
        scale_kernel[grid](x.ptr, y.ptr, 2.0, n, BLOCK_SIZE=1024)   # the blog's call style
        s.synchronize()

Inside ``activate(session)`` Triton's runtime uses :class:`URDriver`: the target comes from the
UR device (``xpukit.runtime.launch.target_for_device``: the ``cpu`` preset on the CPU device, UR
device info on a GPU), device and stream from the session, binaries are loaded through UR (the CPU
SPIR-V patch where needed, the native-binary :class:`~xpukit.runtime.program_cache.ProgramCache`),
and every launch goes through the core layer's checked launcher (``xpukit.runtime.ur.launcher``).

Activation is per thread (and per asyncio task): each ``activate`` block sets the calling
context's session; other threads keep theirs, and a thread with none gets :class:`NoActiveSession`.
What is process-wide is what Triton keeps process-wide: while at least one block is open anywhere,
Triton's active driver is xpukit's, and ``triton.runtime.jit.specialize_impl`` and
``JITFunction.run`` are wrapped; the last block to end restores all three. The Intel backend's
arch parser is replaced for the rest of the process (``xpukit.runtime.tritonc.xpu_backend``).

Arguments: Python ints (raw device addresses or integers), xpukit USM allocations (passed as their
address, like ``.ptr``), :class:`DeviceArray` or anything with ``ptr``/``data_ptr()`` and ``dtype``
(a typed pointer), Python/numpy scalars. Every pointer, and every integer the kernel casts to a
pointer, must lie in live memory of the launching session; anything else (freed, another
session's, host memory, null) is a :class:`KernelArgumentError` before anything is enqueued.

Triton's binder assumes torch tensors (``.dtype`` plus ``.data_ptr()``), so the wrapped
``specialize_impl`` specializes xpukit allocations and numpy scalars the way their values are and
refuses host arrays and unknown objects with a :class:`KernelArgumentError`. The wrapped
``JITFunction.run`` keeps, per kernel, a table of launches it has seen (key: argument types,
alignment, constexprs, options; see ``xpukit.runtime.ur.launcher.fast_key``): a repeated call skips
Triton's binder and launcher and costs one dictionary lookup plus the compiled launcher
(docs/launch.md).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import itertools
import json
import operator
import os
import statistics
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime import kernel_cache
from xpukit.runtime import spirv as spv
from xpukit.runtime.launch import BoundKernel, CompiledArtifact, LaunchABI, ProgramCache, target_for_device
from xpukit.runtime.pointer_params import pointer_params
from xpukit.runtime.tritonc import COMPILE_LOCK, xpu_backend
from xpukit.runtime.ur.core import DeviceArray, Event, Queue, Session, USMAllocation
from xpukit.runtime.ur.errors import ClosedError, KernelArgumentError
from xpukit.runtime.ur.launcher import fast_key

__all__ = [
    "DeviceArray",
    "DriverStats",
    "NoActiveSession",
    "URDriver",
    "activate",
    "current_session",
    "default_driver",
    "do_bench",
    "empty",
    "from_numpy",
]


class ZebinNeedsGpu(XpukitError):
    """A native Intel GPU binary was handed to a device that cannot run it."""


class NoActiveSession(XpukitError):
    """A Triton launch reached xpukit's driver with no open session to run on."""


# --- typed device memory -----------------------------------------------------------------------


def empty(shape: int | Sequence[int], dtype: Any, session: Session | None = None, kind: str = "device") -> DeviceArray:
    """A new :class:`DeviceArray` (owning its allocation) on ``session`` or the active one."""
    s = session or current_session()
    return DeviceArray(s.empty(shape, dtype, kind), dtype, shape, owns=True)


def from_numpy(array: Any, session: Session | None = None, kind: str = "device") -> DeviceArray:
    """A device copy of a host numpy array, as a :class:`DeviceArray`."""
    import numpy as np

    array = np.ascontiguousarray(array)
    s = session or current_session()
    return DeviceArray(s.from_numpy(array, kind), array.dtype, array.shape, owns=True)


# --- argument specialization (Triton's binder) ---------------------------------------------------


def _untyped_address(arg: Any) -> int | None:
    """The address of device memory that has no element type (passed like an int address)."""
    if isinstance(arg, USMAllocation):
        return arg.ptr
    data_ptr = getattr(arg, "data_ptr", None)
    if callable(data_ptr) and not hasattr(arg, "dtype"):
        return int(data_ptr())
    return None


def _host_array_error(arg: Any) -> KernelArgumentError:
    return KernelArgumentError(
        f"a host numpy array ({arg.dtype}, shape {arg.shape}) was passed as a Triton kernel argument; "
        "kernels run on the UR device and need device memory",
        "copy it to the device first: session.from_numpy(a) (pass it or its .ptr) or "
        "xpukit.runtime.triton_driver.from_numpy(a) (a typed pointer)",
    )


def _scalar_spec(arg: Any, specialize_extra: Any, specialize_value: bool, align: bool) -> tuple:
    """Triton's specialization of a Python int or float, without its per-call import and frames
    (the launch path's hottest Python). Used only when :func:`_scalar_spec_agrees` with Triton."""
    if type(arg) is float:
        return ("fp32", None)
    key = specialize_extra(arg, "int", align=align) if specialize_value else None
    if specialize_value and arg == 1:
        return ("constexpr", 1)
    if -(2**31) <= arg < 2**31:
        return ("i32", key)
    if 2**63 <= arg < 2**64:
        return ("u64", key)
    return ("i64", key)


_SCALAR_PROBES = (0, 1, 2, 8, 16, 17, 32, -1, -16, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32, 2**40)
_SCALAR_PROBES += (2**63 - 1, 2**63, 2**64 - 16, 2**64 - 1, 0.0, 1.0, 1.5, -2.0)


def _scalar_spec_agrees(original: Callable[..., Any]) -> bool:
    """Does :func:`_scalar_spec` give exactly what this Triton gives for ints and floats?"""

    def extra(arg: Any, ty: str, align: bool = True) -> str:
        return "D" if align and arg % 16 == 0 else ""

    try:
        for v in _SCALAR_PROBES:
            for value in (True, False):
                for align in (True, False):
                    if _scalar_spec(v, extra, value, align) != tuple(original(v, extra, False, value, align)):
                        return False
    except Exception:  # a Triton whose specialize_impl has another shape: always use its own
        return False
    return True


def _make_specializer(original: Callable[..., Any]) -> Callable[..., Any]:
    fast = _scalar_spec_agrees(original)

    def specialize_impl(
        arg: Any, specialize_extra: Any, is_const: bool = False, specialize_value: bool = True, align: bool = True
    ) -> Any:
        t = type(arg)
        if t is int and 0 < arg < 2**31 and _is_current_usm_address(arg):
            # A raw address that happens to be small is still an address: 64-bit, like a GPU's.
            return ("i64", specialize_extra(arg, "int", align=align) if specialize_value else None)
        if (t is int or t is float) and fast:
            return _scalar_spec(arg, specialize_extra, specialize_value, align)
        if t is int or t is float or t is bool or arg is None:
            return original(arg, specialize_extra, is_const, specialize_value, align)
        try:
            addr = _untyped_address(arg)
        except ClosedError:
            raise KernelArgumentError(
                f"a {type(arg).__name__} whose memory was freed (closed) was passed as a kernel argument",
                "pass live device memory of the launching session",
            ) from None
        if addr is not None:
            # Untyped device memory is an address: always a 64-bit integer, like the blog's ints.
            key = specialize_extra(addr, "int", align=align) if specialize_value else None
            return ("u64" if addr >= 2**63 else "i64", key)
        np = sys.modules.get("numpy")
        if np is not None:
            if isinstance(arg, np.ndarray):
                raise _host_array_error(arg)
            if isinstance(arg, np.generic):  # numpy scalars carry .dtype: Triton would take them for tensors
                arg = arg.item()
                if not isinstance(arg, int | float | bool):
                    raise KernelArgumentError(
                        f"numpy scalar of type {type(arg).__name__} cannot be a kernel argument",
                        "pass an integer, float or bool",
                    )
        try:
            return original(arg, specialize_extra, is_const, specialize_value, align)
        except ClosedError:
            raise KernelArgumentError(
                f"a {type(arg).__name__} whose memory was freed (closed) was passed as a kernel argument",
                "pass live device memory of the launching session",
            ) from None
        except (AttributeError, KeyError, TypeError) as exc:
            raise KernelArgumentError(
                f"a {type(arg).__name__} cannot be a Triton kernel argument here ({exc})",
                "pass an int address, a USM allocation, a DeviceArray (or anything with data_ptr() and "
                "dtype), or a Python/numpy scalar",
            ) from None

    specialize_impl._xpukit_original = original  # type: ignore[attr-defined]
    return specialize_impl


def _is_current_usm_address(value: int) -> bool:
    act = _CURRENT.get()
    return act is not None and act.session.is_usm_address(value)


# --- activation state ----------------------------------------------------------------------------

# What this thread (or asyncio task) launches on: set by activate(), never shared between threads.
_CURRENT: contextvars.ContextVar[_Active | None] = contextvars.ContextVar("xpukit_ur_active", default=None)
# Process-wide: Triton's driver and JITFunction.run are global, so they are swapped while at least
# one activate() block is open anywhere and restored when the last one ends.
_GLOBAL_LOCK = threading.Lock()
_GLOBAL_DEPTH = 0
_SAVED: dict[str, Any] = {}


@dataclasses.dataclass
class _Active:
    driver: URDriver
    session: Session
    device_key: str
    target: Any
    stream: _Stream
    table_key: tuple[str, bool]  # fast-path table: device key and TRITON_DEBUG as read at activate()


def _enter_global(drv: URDriver) -> None:
    global _GLOBAL_DEPTH
    import triton.runtime.jit as jit
    from triton.runtime.driver import driver as triton_driver

    with _GLOBAL_LOCK:
        if _GLOBAL_DEPTH == 0:
            _SAVED["driver"] = triton_driver.active
            _SAVED["specialize_impl"] = jit.specialize_impl
            _SAVED["run"] = jit.JITFunction.run
            _SAVED["getitem"] = jit.JITFunction.__getitem__
            jit.specialize_impl = _make_specializer(jit.specialize_impl)
            jit.JITFunction.run = _make_fast_run(jit.JITFunction.run)
            jit.JITFunction.__getitem__ = _getitem
            triton_driver.set_active(drv)
        _GLOBAL_DEPTH += 1


def _leave_global() -> None:
    global _GLOBAL_DEPTH
    import triton.runtime.jit as jit
    from triton.runtime.driver import driver as triton_driver

    with _GLOBAL_LOCK:
        _GLOBAL_DEPTH -= 1
        if _GLOBAL_DEPTH == 0:
            jit.specialize_impl = _SAVED.pop("specialize_impl")
            jit.JITFunction.run = _SAVED.pop("run")
            jit.JITFunction.__getitem__ = _SAVED.pop("getitem")
            previous = _SAVED.pop("driver")
            if previous is triton_driver.default:
                triton_driver.reset_active()
            else:
                triton_driver.set_active(previous)


# --- the compiled-launch table (Triton's JITFunction.run, short-circuited) -----------------------


class _FastEntry:
    """One specialization of one kernel on one device: what Triton's run would pick, and per
    session the loaded kernel whose checked launcher takes the arguments."""

    __slots__ = ("bound", "defaults", "kernel", "param_names", "pick")

    def __init__(self, kernel: Any, pick: Callable[[tuple], tuple], param_names: tuple[str, ...], defaults: dict):
        self.kernel = kernel
        self.pick = pick
        self.param_names = param_names
        self.defaults = defaults
        self.bound: dict[int, BoundKernel] = {}

    def meta(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        """What Triton hands a grid callable: every parameter by name."""
        meta = dict(self.defaults)
        meta.update(zip(self.param_names, args, strict=False))
        for k, v in kwargs.items():
            if k in meta or k in self.param_names:
                meta[k] = v
        return meta


class _FastTable:
    """Per JITFunction: (device, TRITON_DEBUG, argument key) -> :class:`_FastEntry`."""

    MAX_ENTRIES = 512  # a call pattern that never repeats stops filling it (Triton's path still runs)

    def __init__(self, fn: Any) -> None:
        import inspect

        modes = []
        for p in fn.params:
            if p.is_constexpr:
                modes.append("c")
            elif p.do_not_specialize:
                modes.append("v")
            elif p.do_not_specialize_on_alignment:
                modes.append("a")
            else:
                modes.append("s")
        self.modes = "".join(modes).encode()
        self.names = tuple(p.name for p in fn.params)
        self.constexpr = {p.name for p in fn.params if p.is_constexpr}
        sig = inspect.signature(fn.fn)
        self.defaults = {
            n: prm.default for n, prm in sig.parameters.items() if prm.default is not inspect.Parameter.empty
        }
        self.entries: dict[tuple, _FastEntry] = {}
        # Positions of integer parameters the kernel has turned into pointers in a variant seen so
        # far: an int there must be a live address (else Triton would type a stale small address
        # as i32 and fail deep in its compiler).
        self.address_params: set[int] = set()
        # What the kernel's source says (xpukit.runtime.pointer_params): checked before compiling.
        pointers = pointer_params(fn)
        self.kernel_name = getattr(fn, "__name__", "kernel")
        self.cast_params = [(i, n) for i, n in enumerate(self.names) if n in pointers.address]
        self.typed_params = [(i, n) for i, n in enumerate(self.names) if n in pointers.typed]
        self.optional_params = pointers.optional
        self.lock = threading.Lock()

    def _argument(self, i: int, name: str, args: tuple, kwargs: dict) -> tuple[bool, Any]:
        if i < len(args):
            return True, args[i]
        if name in kwargs:
            return True, kwargs[name]
        return False, None

    def check_pointers(self, args: tuple, kwargs: dict, session: Session) -> None:
        """Refuse, by name and before Triton compiles, an argument the kernel's source uses as a
        pointer that is not one: Triton would type it from its value and fail in its compiler."""
        for i, name in self.cast_params:
            given, v = self._argument(i, name, args, kwargs)
            if v is None and name in self.optional_params:
                continue
            if given and (v is None or (type(v) is int and not session.is_usm_address(v))):
                raise KernelArgumentError(
                    f"argument {name!r} of {self.kernel_name} is cast to a pointer by the kernel, but "
                    f"{session.explain_address(v)}",
                    "pass a live USMAllocation or DeviceArray of this session (or its .ptr)",
                )
        for i, name in self.typed_params:
            given, v = self._argument(i, name, args, kwargs)
            if v is None and name in self.optional_params:
                continue
            if given and (v is None or type(v) is int or isinstance(v, USMAllocation)):
                what = "None" if v is None else f"{type(v).__name__} {v!r:.40}"
                raise KernelArgumentError(
                    f"argument {name!r} of {self.kernel_name} is a typed pointer in the kernel (it loads or "
                    f"stores through it), but got {what}, which Triton cannot type as a pointer",
                    "pass a DeviceArray (xpukit.runtime.triton_driver.from_numpy or empty), or cast an address "
                    "in the kernel: x.to(tl.pointer_type(tl.float32))",
                )

    def check_addresses(self, args: tuple, session: Session) -> None:
        for i in self.address_params:
            if i < len(args) and (args[i] is None or type(args[i]) is int) and not session.is_usm_address(args[i] or 0):
                raise KernelArgumentError(
                    f"argument {self.names[i]!r} is used as a device address by this kernel, but "
                    f"{session.explain_address(args[i])}",
                    "pass a live USMAllocation or DeviceArray of this session (or its .ptr)",
                )

    def record(self, table_key: tuple, key: tuple, kernel: Any, args: tuple, kwargs: dict, session: Session) -> None:
        """Remember what Triton's own run just launched, when this call's shape allows it: every
        non-constexpr parameter positional, keywords only for constexprs and compile options."""
        launcher = kernel.run
        function = getattr(kernel, "function", None)
        if not isinstance(launcher, URLauncher) or not isinstance(function, _URFunction):
            return
        # The compiled kernel's own parameters: Triton also makes an int equal to 1 a constexpr.
        idx = launcher.user_index
        if len(self.entries) >= self.MAX_ENTRIES or not idx or idx[-1] >= len(args):
            return
        if any(k in self.names and k not in self.constexpr for k in kwargs):
            return
        bound = function.bound.get(id(session))
        if bound is None or bound.session is not session:
            return
        pick = operator.itemgetter(*idx) if len(idx) > 1 else (lambda a, i=idx[0]: (a[i],))
        addresses = {idx[j] for j, p in enumerate(bound.abi.params) if p.kind == "A"}
        with self.lock:
            self.address_params |= addresses
            entry = self.entries.get((table_key, key))
            if entry is None:
                entry = _FastEntry(kernel, pick, self.names, self.defaults)
                self.entries[(table_key, key)] = entry
            if entry.kernel is kernel:
                for sid in [sid for sid, b in entry.bound.items() if b.closed]:  # sessions gone since
                    del entry.bound[sid]
                entry.bound[id(session)] = bound


def _getitem(self: Any, grid: Any) -> Callable[..., Any]:
    """``kernel[grid]``: Triton's own returns a Python lambda around ``run``; a partial is the same
    call without that frame on every launch."""
    return functools.partial(self.run, grid=grid, warmup=False)


def _make_fast_run(original: Callable[..., Any]) -> Callable[..., Any]:
    """JITFunction.run with a per-kernel table of compiled launches: a call whose arguments give a
    key seen before (same device, same specialization, same constexprs and options) skips
    Triton's binder, cache lookup and launcher and goes straight to the kernel's checked launcher.
    Anything else (first call, hooks, warmup, benchmarking, an argument the key does not cover)
    runs Triton's own code, serialised by the compile lock."""
    from triton.compiler import CompiledKernel

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        act = _CURRENT.get()
        if (
            act is None
            or act.session._closed  # Triton's path raises the kit's error for it
            or warmup
            or act.stream.events is not None
            or self.pre_run_hooks
            or CompiledKernel.launch_enter_hook is not None
            or CompiledKernel.launch_exit_hook is not None
        ):
            with COMPILE_LOCK:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        table = self.__dict__.get("_xpukit_fast")
        if table is None:
            table = self.__dict__.setdefault("_xpukit_fast", _FastTable(self))
        session = act.session
        key = fast_key(args, kwargs, table.modes, session.allocations)
        entry = table.entries.get((act.table_key, key)) if key is not None else None
        bound = entry.bound.get(id(session)) if entry is not None else None
        if bound is None or bound.session is not session or self.used_global_vals:
            table.check_pointers(args, kwargs, session)
            if table.address_params:
                table.check_addresses(args, session)
            with COMPILE_LOCK:
                kernel = original(self, *args, grid=grid, warmup=warmup, **kwargs)
            if key is not None and kernel is not None:
                table.record(act.table_key, key, kernel, args, kwargs, session)
            return kernel
        if callable(grid):
            grid = grid(entry.meta(args, kwargs))
        n = len(grid)
        queue = act.stream.queue._handle
        if queue is None:  # closed: its .handle raises the kit's error
            queue = act.stream.queue.handle
        bound.submit(queue, grid[0], grid[1] if n > 1 else 1, grid[2] if n > 2 else 1, entry.pick(args))
        act.driver.stats.launches += 1
        return entry.kernel

    run._xpukit_original = original  # type: ignore[attr-defined]
    return run


# --- binaries and the launcher -----------------------------------------------------------------


class _URFunction:
    """What ``load_binary`` returns as Triton's module/function: one kernel's SPIR-V, loaded lazily
    on each session it runs on (a compiled kernel is shared by every session on the same device)."""

    __slots__ = ("addresses", "bound", "form", "lock", "name", "options", "programs", "sha256", "spirv")

    def __init__(self, name: str, spirv: bytes, options: str, form: str = "spirv") -> None:
        self.name = name
        self.spirv = spirv  # SPIR-V, or the zebin when form == "zebin"
        self.sha256 = hashlib.sha256(spirv).hexdigest()
        self.options = options
        self.form = form  # "spirv" | "zebin" (Triton's native stage: loaded as is, no driver JIT)
        # Integer parameters the kernel casts to pointers: checked like pointers at launch.
        self.addresses = spv.address_parameters(spirv, name) if form == "spirv" else frozenset()
        self.programs: dict[int, Any] = {}  # id(session) -> Program built by load_binary
        self.bound: dict[int, BoundKernel] = {}  # id(session) -> loaded kernel with its launcher
        self.lock = threading.Lock()


class _Stream:
    """Triton's "stream": a session and one of its queues (the default one, or a profiling one)."""

    __slots__ = ("events", "queue", "session")

    def __init__(self, session: Session, queue: Queue, events: list[Event] | None = None) -> None:
        self.session = session
        self.queue = queue
        self.events = events  # a list while benchmarking: each launch's UR event is appended


@dataclasses.dataclass
class DriverStats:
    """Counters from the driver's own code paths (tests read them to count compiles and loads)."""

    variants: int = 0  # load_binary calls: one per kernel variant Triton compiled (or took from its cache)
    program_loads: int = 0  # UR programs built or loaded (per variant and session)
    launches: int = 0
    benchmarks: int = 0  # do_bench calls
    last_load: str = ""  # how the last program was loaded: zebin | program-cache | spirv


class URLauncher:
    """Triton's ``launcher_cls``: ``launcher(gx, gy, gz, stream, function, packed_metadata,
    launch_metadata, enter_hook, exit_hook, *all_arguments)``. Triton's own path (first calls,
    hooks, benchmarking); repeated calls take the compiled-launch table above."""

    def __init__(self, driver: URDriver, src: Any, metadata: Any) -> None:
        self.driver = driver
        fn = src.fn
        sig = dict(src.signature)
        for name, ty in sig.items():
            if isinstance(ty, tuple):
                raise XpukitError(
                    f"kernel {fn.__name__}: tuple argument {name!r} is not supported by xpukit's UR driver",
                    "pass the tuple's elements as separate arguments",
                )
        self.fn = fn
        names = list(fn.arg_names)
        self.user_index = [i for i, n in enumerate(names) if sig.get(n) != "constexpr"]
        self.signature = {n: sig[n] for n in names if sig.get(n) != "constexpr"}
        self.constexprs = {n: v for n, v in getattr(src, "constants", {}).items()}
        self.metadata = metadata
        self.pick = operator.itemgetter(*self.user_index) if self.user_index else (lambda _args: ())
        self.single = len(self.user_index) == 1

    def _bound(self, function: _URFunction, session: Session) -> BoundKernel:
        sid = id(session)
        bound = function.bound.get(sid)
        if bound is not None and bound.session is session and not bound.closed:
            return bound
        with function.lock:
            bound = function.bound.get(sid)
            if bound is not None and bound.session is session and not bound.closed:
                return bound
            for k in [k for k, b in function.bound.items() if b.closed]:  # sessions that have closed
                del function.bound[k]
            program = function.programs.pop(sid, None)
            if program is None or program.closed or program._session is not session:
                program = self.driver._load_program(function, session)
            abi = LaunchABI.from_metadata(self.fn, self.signature, self.metadata, function.addresses)
            art = CompiledArtifact(
                name=function.name,
                spirv=function.spirv,
                spirv_sha256=function.sha256,
                metadata=self.metadata,
                signature=self.signature,
                constexprs=self.constexprs,
                abi=abi,
            )
            bound = BoundKernel(session, art, program)
            function.bound[sid] = bound
            return bound

    def __call__(
        self,
        gx: int,
        gy: int,
        gz: int,
        stream: Any,
        function: Any,
        packed_metadata: Any,
        launch_metadata: Any,
        enter_hook: Any,
        exit_hook: Any,
        *args: Any,
    ) -> None:
        if type(stream) is not _Stream:
            raise NoActiveSession(
                f"Triton passed stream {stream!r:.60}, not an xpukit session",
                "launch inside `with xpukit.runtime.triton_driver.activate(session):`",
            )
        session = stream.session
        if session.closed:
            raise ClosedError("the session of this launch is closed", "open a new Session and activate it")
        if not isinstance(function, _URFunction):
            raise XpukitError(
                f"kernel {self.fn.__name__} was not loaded by xpukit's UR driver",
                "compile and launch it inside `activate(session)`",
            )
        picked = self.pick(args)
        if self.single:
            picked = (picked,)
        bound = self._bound(function, session)
        if enter_hook is not None:
            enter_hook(launch_metadata)
        want_event = stream.events is not None
        handle = bound.submit(stream.queue.handle, gx, gy, gz, picked, want_event)
        if want_event and handle:
            stream.events.append(Event(session, handle))
        self.driver.stats.launches += 1
        if exit_hook is not None:
            exit_hook(launch_metadata)


class _Utils:
    """``driver.utils``: what Triton's CompiledKernel and testing helpers call."""

    def __init__(self, driver: URDriver) -> None:
        self._driver = driver

    def load_binary(self, name: str, kernel: bytes, shared: int, build_flags: str, device: Any) -> tuple:
        return self._driver._load_binary(name, kernel, shared, build_flags, device)

    def get_device_properties(self, device: Any) -> dict[str, Any]:
        return self._driver.device_properties(device)

    def wait(self) -> None:
        self._driver.session.synchronize()


_SERIALS = itertools.count()


class URDriver:
    """Triton's driver interface on Unified Runtime (see the module docstring).

    Use :func:`activate` for a scoped activation; one process-wide instance (:func:`default_driver`)
    is enough. What a launch runs on is per thread (and per asyncio task): the session of the
    innermost ``activate`` block of the calling context. ``cache``: a :class:`ProgramCache`
    (default: ``$XPUKIT_CACHE_DIR/ur-programs``), or False for none.
    """

    def __init__(self, cache: ProgramCache | bool | None = None) -> None:
        self.cache: ProgramCache | None = (
            None if cache is False else (cache if isinstance(cache, ProgramCache) else kernel_cache.program_cache())
        )
        self.stats = DriverStats()
        self.utils = _Utils(self)
        self._devices: dict[str, Any] = {}  # device key -> DeviceInfo
        self._profiling: dict[int, Queue] = {}
        self._lock = threading.Lock()
        self._serial = next(_SERIALS)

    # -- Triton's driver interface ---------------------------------------------------------------
    @staticmethod
    def is_active() -> bool:
        # Never chosen by Triton's automatic driver discovery: activation is explicit.
        return False

    def launcher_cls(self, src: Any, metadata: Any) -> URLauncher:
        return URLauncher(self, src, metadata)

    def _top(self) -> _Active:
        act = _CURRENT.get()
        if act is None:
            raise NoActiveSession(
                "no xpukit session is active for this Triton launch in this thread",
                "wrap it in `with ur.Session(...) as s, xpukit.runtime.triton_driver.activate(s):` in the same thread",
            )
        if act.session.closed:
            raise NoActiveSession(
                "the session activated for Triton launches is closed",
                "keep the session open for the whole `activate(session)` block",
            )
        return act

    @property
    def session(self) -> Session:
        """The session launches of the calling thread run on."""
        return self._top().session

    def get_current_device(self) -> str:
        # A string key, never an int: Triton keys each JITFunction's compiled variants by device,
        # and an int could collide with Triton's own XPU driver's device 0 in the same process.
        return self._top().device_key

    def get_current_stream(self, device: Any = None) -> _Stream:
        return self._top().stream

    def get_current_target(self) -> Any:
        return self._top().target

    def get_active_torch_device(self) -> Any:
        raise XpukitError(
            "xpukit's UR driver has no torch device (it runs without PyTorch)",
            "pass device memory as USM allocations, int addresses or xpukit DeviceArrays",
        )

    def get_device_interface(self) -> Any:
        raise XpukitError(
            "xpukit's UR driver has no torch device interface (triton.testing.do_bench needs one)",
            "time with xpukit.runtime.triton_driver.do_bench (UR event profiling)",
        )

    def get_benchmarker(self) -> Callable[..., Any]:
        return do_bench

    def map_python_to_cpp_type(self, ty: str) -> str:  # pragma: no cover - only newer Triton asks
        return ty

    # -- sessions --------------------------------------------------------------------------------
    def _make_active(self, session: Session) -> _Active:
        if session.closed:
            raise ClosedError("session used after close()", "open a new Session")
        from triton.backends.compiler import GPUTarget

        xpu_backend()  # before Triton constructs the Intel backend: the torch/SYCL-free arch parser
        dev = session.device
        props = target_for_device(dev)
        # One key per driver and device: variants compiled under this driver stay with it.
        text = f"{self._serial}|" + json.dumps(props, sort_keys=True) + "|" + dev.cache_key()
        key = "xpukit-ur:" + hashlib.sha256(text.encode()).hexdigest()[:16]
        with self._lock:
            self._devices[key] = dev
        debug = os.environ.get("TRITON_DEBUG", "0") == "1"
        return _Active(self, session, key, GPUTarget("xpu", props, 32), _Stream(session, session.queue), (key, debug))

    @contextlib.contextmanager
    def use(self, session: Session) -> Iterator[URDriver]:
        """Route this context's launches to ``session`` inside the block (Triton's active driver
        is left alone; :func:`activate` also sets it)."""
        token = _CURRENT.set(self._make_active(session))
        try:
            yield self
        finally:
            _CURRENT.reset(token)
            with self._lock:  # profiling queues belong to their session; forget closed ones
                for k in [k for k, q in self._profiling.items() if q.closed]:
                    del self._profiling[k]

    def device_properties(self, device: Any) -> dict[str, Any]:
        dev = self._devices.get(device)
        if dev is None:
            raise NoActiveSession(f"device {device!r} is not an xpukit UR device", "use activate(session)")
        return {
            "name": dev.name,
            "max_shared_mem": dev.local_mem_size,
            "multiprocessor_count": dev.compute_units,
            "max_work_group_size": dev.max_work_group_size,
            "max_num_sub_groups": dev.max_num_sub_groups,
            "sub_group_sizes": list(dev.sub_group_sizes),
            "has_fp64": dev.has_fp64,
            "global_mem_size": dev.global_mem_size,
            "mem_clock_rate": 0,  # not reported through UR
            "mem_bus_width": 0,
        }

    # -- binaries --------------------------------------------------------------------------------
    def _load_binary(self, name: str, kernel: bytes, shared: int, build_flags: str, device: Any) -> tuple:
        session = self.session
        code = bytes(kernel)
        if code[:4] == b"\x7fELF":
            # Triton's zebin stage (generate_native_code / TRITON_XPU_GEN_NATIVE_CODE) made a native
            # Intel GPU binary: it loads with urProgramCreateWithBinary and skips the driver's JIT.
            if session.device.type != "gpu":
                raise ZebinNeedsGpu(
                    f"kernel {name} was compiled to a zebin (native Intel GPU code), which the "
                    f"{session.device.type} device cannot run",
                    "drop generate_native_code / unset TRITON_XPU_GEN_NATIVE_CODE on this device",
                )
            function = _URFunction(name, code, build_flags or "", form="zebin")
        elif session.device.type == "cpu":
            # Triton's build flags are Intel GPU compiler options; the CPU runtime has none of them.
            function = _URFunction(name, spv.patch_for_cpu(code), "")
        else:
            function = _URFunction(name, code, build_flags or "")
        function.programs[id(session)] = self._load_program(function, session)  # build errors surface here
        self.stats.variants += 1
        return function, function, 0, 0

    def _load_program(self, function: _URFunction, session: Session) -> Any:
        self.stats.program_loads += 1
        if function.form == "zebin":
            self.stats.last_load = "zebin"
            return session.program_from_binary(function.spirv, function.options)
        if self.cache is not None:
            program = self.cache.load(session, function.spirv, options=function.options, spirv_sha256=function.sha256)
            hit = bool(self.cache.events) and self.cache.events[-1][0] == "hit"
            self.stats.last_load = "program-cache" if hit else "spirv"
            return program
        self.stats.last_load = "spirv"
        return session.program_from_spirv(function.spirv, function.options)

    # -- benchmarking ----------------------------------------------------------------------------
    def _profiling_queue(self, session: Session) -> Queue:
        with self._lock:
            queue = self._profiling.get(id(session))
            if queue is None or queue.closed or queue._session is not session:
                queue = session.new_queue(profiling=True)
                self._profiling[id(session)] = queue
            return queue

    def do_bench(
        self,
        fn: Callable[[], Any],
        warmup: float = 25,
        rep: float = 100,
        quantiles: Sequence[float] | None = None,
        return_mode: str = "mean",
        **_ignored: Any,
    ) -> Any:
        """Time ``fn`` (which launches Triton kernels) with UR event profiling, in milliseconds.

        Each repetition's time is from the first launch's start to the last launch's end
        (:meth:`~xpukit.runtime.ur.core.Event.profile`) on a profiling queue of the calling
        thread's session. Same contract as ``triton.testing.do_bench``: ``quantiles`` -> a list,
        else ``return_mode`` (min, max, mean, median, all)."""
        top = self._top()
        session = top.session
        queue = self._profiling_queue(session)
        stream = _Stream(session, queue, [])
        self.stats.benchmarks += 1
        saved = top.stream
        top.stream = stream
        try:
            fn()
            session.synchronize()
            est = statistics.median(_time_once(fn, stream) for _ in range(5))
            n_warmup = max(1, min(1000, int(warmup / max(est, 1e-6))))
            n_repeat = max(1, min(1000, int(rep / max(est, 1e-6))))
            for _ in range(n_warmup):
                fn()
            queue.finish()
            times = [_time_once(fn, stream) for _ in range(n_repeat)]
        finally:
            top.stream = saved
            _release_events(stream)
        if quantiles is not None:
            ordered = sorted(times)
            out = [_quantile(ordered, q) for q in quantiles]
            return out[0] if len(out) == 1 else out
        if return_mode == "all":
            return times
        return {
            "min": min,
            "max": max,
            "mean": statistics.fmean,
            "median": statistics.median,
        }[return_mode](times)


def _quantile(sorted_times: list[float], q: float) -> float:
    pos = q * (len(sorted_times) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_times) - 1)
    return sorted_times[lo] + (sorted_times[hi] - sorted_times[lo]) * (pos - lo)


def _time_once(fn: Callable[[], Any], stream: _Stream) -> float:
    """One call of ``fn``: (end of its last launch - start of its first) in ms, from UR events."""
    events = stream.events
    assert events is not None
    _release_events(stream)
    fn()
    if not events:
        raise XpukitError(
            "the benchmarked call launched no kernel through xpukit's UR driver",
            "benchmark a call that launches Triton kernels inside activate(session)",
        )
    events[-1].wait()
    start, _ = events[0].profile()
    _, end = events[-1].profile()
    _release_events(stream)
    return (end - start) / 1e6


def _release_events(stream: _Stream) -> None:
    events = stream.events
    if not events:
        return
    for ev in events:
        ev.close()
    events.clear()


# --- activation --------------------------------------------------------------------------------

_DEFAULT: URDriver | None = None
_DEFAULT_LOCK = threading.Lock()


def _stand_in_for_no_driver() -> None:
    """Make xpukit's driver what Triton's lazily resolved default driver becomes when no Triton
    backend driver is active (no torch XPU device: Triton would raise "0 active drivers").

    Triton code written as its tutorials write it asks for that driver before any session exists:
    ``@triton.autotune`` takes its benchmarker from it at decoration time. With the stand-in the
    decorator gets xpukit's UR benchmarker (it times on whatever session is active when it runs),
    and a launch outside ``activate()`` is the kit's :class:`NoActiveSession`. Where Triton finds
    its own driver (torch with an XPU device) nothing changes. Runs once, at import.
    """
    try:
        from triton.runtime.driver import driver as triton_drivers
    except ImportError:  # host-side use without Triton
        return
    proxy = triton_drivers.default
    if getattr(proxy, "_obj", True) is not None or getattr(proxy._init_fn, "xpukit_stand_in", False):
        return  # already resolved (Triton's own driver, or ours), or not Triton's LazyProxy
    original = proxy._init_fn

    def resolve() -> Any:
        try:
            return original()
        except RuntimeError as exc:
            if not str(exc).startswith("0 active drivers"):
                raise
            return default_driver()

    resolve.xpukit_stand_in = True  # type: ignore[attr-defined]
    proxy._init_fn = resolve


def default_driver() -> URDriver:
    """The process-wide :class:`URDriver` that :func:`activate` uses unless given another."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = URDriver()
        return _DEFAULT


def _active_driver() -> URDriver:
    """The driver of the calling context's activation, else the default one."""
    act = _CURRENT.get()
    return act.driver if act is not None else default_driver()


def current_session() -> Session:
    """The session of the calling thread's innermost ``activate`` block."""
    return _active_driver()._top().session


@contextlib.contextmanager
def activate(session: Session, driver: URDriver | None = None) -> Iterator[URDriver]:
    """Make Triton launch through UR on ``session`` inside the block, for the calling thread (or
    asyncio task) only: other threads keep their own sessions, and a thread with none gets
    :class:`NoActiveSession`. While any block is open, Triton's active driver is xpukit's and
    ``JITFunction.run``/``specialize_impl`` are wrapped (see the module docstring); the last block
    to end restores them."""
    drv = driver or default_driver()
    with drv.use(session):
        _enter_global(drv)
        try:
            yield drv
        finally:
            _leave_global()


def do_bench(
    fn: Callable[[], Any],
    warmup: float = 25,
    rep: float = 100,
    quantiles: Sequence[float] | None = None,
    return_mode: str = "mean",
    **kwargs: Any,
) -> Any:
    """UR-event-profiled benchmarker for ``triton.autotune(..., do_bench=do_bench)`` (Triton asks
    the active driver for it at decoration time). Times on the calling thread's session."""
    return _active_driver().do_bench(fn, warmup=warmup, rep=rep, quantiles=quantiles, return_mode=return_mode, **kwargs)


_stand_in_for_no_driver()
