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
UR device (``xpukit.runtime.launch.target_for_device``: the ``cpu`` preset on the CPU device, UR device info
on a GPU), device and stream from the session, binaries are loaded through UR (the CPU SPIR-V patch
where needed, the native-binary :class:`~xpukit.runtime.launch.ProgramCache`), and the launcher follows
Triton's ABI through :class:`~xpukit.runtime.launch.LaunchABI`. Leaving the block restores whatever driver
Triton had before; Triton's own drivers are never touched.

Arguments: Python ints (raw device addresses or integers), xpukit USM allocations (passed as their
address, like ``.ptr``), :class:`DeviceArray` or anything with ``data_ptr()`` and ``dtype`` (a
typed pointer), Python/numpy scalars. A host numpy array is refused with a clear error before
anything is enqueued.

Triton's binder runs before any driver code sees the arguments, and it assumes torch tensors
(``.dtype`` plus ``.data_ptr()``). So while a UR driver is active, ``triton.runtime.jit.specialize_impl``
is wrapped: xpukit allocations and numpy scalars are specialized the way their values are, host
arrays and unknown objects get a :class:`KernelArgumentError`; everything else goes to Triton's own
function unchanged. The wrapper is removed when the last ``activate`` block ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import hashlib
import itertools
import json
import operator
import statistics
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from ctypes import byref, c_size_t, c_uint32, c_uint64, c_void_p
from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime import spirv as spv
from xpukit.runtime.launch import BoundKernel, CompiledArtifact, LaunchABI, ProgramCache, target_for_device
from xpukit.runtime.ur.core import Queue, Session, USMAllocation
from xpukit.runtime.ur.errors import ClosedError, KernelArgumentError, raise_result

__all__ = [
    "DeviceArray",
    "DriverStats",
    "NoActiveSession",
    "URDriver",
    "activate",
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


class DeviceArray:
    """Typed device memory: what Triton's binder takes as a tensor (``data_ptr()`` and ``dtype``).

    A view of a :class:`~xpukit.runtime.ur.USMAllocation` (``owns=True``: closing the view frees it).
    ``dtype`` is a numpy dtype, so Triton types the pointer argument from ``str(dtype)``.
    """

    def __init__(self, alloc: USMAllocation, dtype: Any, shape: int | Sequence[int] | None = None, owns: bool = False):
        import numpy as np

        self.alloc = alloc
        self.dtype = np.dtype(dtype)
        if shape is None:
            shape = alloc.nbytes // self.dtype.itemsize
        self.shape: tuple[int, ...] = (int(shape),) if isinstance(shape, int) else tuple(int(d) for d in shape)
        if self.nbytes > alloc.nbytes:
            raise KernelArgumentError(
                f"a {self.shape} {self.dtype} view needs {self.nbytes} bytes; the allocation has {alloc.nbytes}",
                "allocate enough bytes or pass a smaller shape",
            )
        self.owns = owns

    def data_ptr(self) -> int:
        return self.alloc.ptr  # raises ClosedError after close

    @property
    def ptr(self) -> int:
        return self.alloc.ptr

    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def stride(self, dim: int | None = None) -> Any:
        strides, acc = [], 1
        for d in reversed(self.shape):
            strides.append(acc)
            acc *= d
        strides.reverse()
        return tuple(strides) if dim is None else strides[dim]

    def to_numpy(self) -> Any:
        """Blocking copy to a new host array of this shape and dtype."""
        import numpy as np

        return self.alloc.copy_to(np.empty(self.shape, dtype=self.dtype))

    def copy_from(self, array: Any) -> DeviceArray:
        import numpy as np

        self.alloc.copy_from(np.ascontiguousarray(array, dtype=self.dtype))
        return self

    def close(self) -> None:
        if self.owns:
            self.alloc.close()

    def __enter__(self) -> DeviceArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<DeviceArray {self.shape} {self.dtype} {self.alloc!r}>"


def empty(shape: int | Sequence[int], dtype: Any, session: Session | None = None, kind: str = "device") -> DeviceArray:
    """A new :class:`DeviceArray` (owning its allocation) on ``session`` or the active one."""
    s = session or _active_driver().session
    return DeviceArray(s.empty(shape, dtype, kind), dtype, shape, owns=True)


def from_numpy(array: Any, session: Session | None = None, kind: str = "device") -> DeviceArray:
    """A device copy of a host numpy array, as a :class:`DeviceArray`."""
    import numpy as np

    array = np.ascontiguousarray(array)
    s = session or _active_driver().session
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
        if t is int and 0 < arg < 2**31 and _is_live_usm_address(arg):
            # A raw address that happens to be small is still an address: 64-bit, like a GPU's.
            return ("i64", specialize_extra(arg, "int", align=align) if specialize_value else None)
        if (t is int or t is float) and fast:
            return _scalar_spec(arg, specialize_extra, specialize_value, align)
        if t is int or t is float or t is bool or arg is None:
            return original(arg, specialize_extra, is_const, specialize_value, align)
        addr = _untyped_address(arg)
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
        except (AttributeError, KeyError, TypeError) as exc:
            raise KernelArgumentError(
                f"a {type(arg).__name__} cannot be a Triton kernel argument here ({exc})",
                "pass an int address, a USM allocation, a DeviceArray (or anything with data_ptr() and "
                "dtype), or a Python/numpy scalar",
            ) from None

    specialize_impl._xpukit_original = original  # type: ignore[attr-defined]
    return specialize_impl


# Sessions pushed on any URDriver: their live USM ranges decide whether a small int is an address.
_LIVE_SESSIONS: list[Session] = []


def _is_live_usm_address(value: int) -> bool:
    return any(not s.closed and s.is_usm_address(value) for s in _LIVE_SESSIONS)


_SPEC_LOCK = threading.Lock()
_SPEC_DEPTH = 0


def _install_specializer() -> None:
    global _SPEC_DEPTH
    import triton.runtime.jit as jit

    with _SPEC_LOCK:
        if _SPEC_DEPTH == 0 and not hasattr(jit.specialize_impl, "_xpukit_original"):
            jit.specialize_impl = _make_specializer(jit.specialize_impl)
        _SPEC_DEPTH += 1


def _remove_specializer() -> None:
    global _SPEC_DEPTH
    import triton.runtime.jit as jit

    with _SPEC_LOCK:
        _SPEC_DEPTH -= 1
        if _SPEC_DEPTH == 0 and hasattr(jit.specialize_impl, "_xpukit_original"):
            jit.specialize_impl = jit.specialize_impl._xpukit_original


# --- binaries and the launcher -----------------------------------------------------------------


class _URFunction:
    """What ``load_binary`` returns as Triton's module/function: one kernel's SPIR-V, loaded lazily
    on each session it runs on (a compiled kernel is shared by every session on the same device)."""

    __slots__ = ("bound", "form", "name", "options", "programs", "sha256", "spirv")

    def __init__(self, name: str, spirv: bytes, options: str, form: str = "spirv") -> None:
        self.name = name
        self.spirv = spirv  # SPIR-V, or the zebin when form == "zebin"
        self.sha256 = hashlib.sha256(spirv).hexdigest()
        self.options = options
        self.form = form  # "spirv" | "zebin" (Triton's native stage: loaded as is, no driver JIT)
        self.programs: dict[int, Any] = {}  # id(session) -> Program built by load_binary
        self.bound: dict[int, BoundKernel] = {}  # id(session) -> loaded kernel with its argument cache


class _Stream:
    """Triton's "stream": a session and one of its queues (the default one, or a profiling one)."""

    __slots__ = ("events", "queue", "session")

    def __init__(self, session: Session, queue: Queue, events: list[c_void_p] | None = None) -> None:
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
    launch_metadata, enter_hook, exit_hook, *all_arguments)``."""

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
        names = list(fn.arg_names)
        self.user_index = [i for i, n in enumerate(names) if sig.get(n) != "constexpr"]
        self.signature = {n: sig[n] for n in names if sig.get(n) != "constexpr"}
        self.constexprs = {n: v for n, v in getattr(src, "constants", {}).items()}
        self.abi = LaunchABI.from_metadata(fn, self.signature, metadata)
        self.metadata = metadata
        # 64-bit integer parameters may receive untyped device memory (the blog's addresses).
        self.addr_slots = [j for j, p in enumerate(self.abi.params) if p.ty in ("i64", "u64")]
        self.pick = operator.itemgetter(*self.user_index) if self.user_index else (lambda _args: ())
        self.single = len(self.user_index) == 1
        # The previous launch: (bound kernel, plain argument values, their types, grid). A launch
        # with exactly those values (ints/floats/bools only) on the same kernel re-enqueues without
        # converting or setting arguments again: the UR kernel still holds them.
        self._previous: tuple | None = None

    def _bound(self, function: _URFunction, session: Session) -> BoundKernel:
        sid = id(session)
        bound = function.bound.get(sid)
        if bound is not None and bound.session is session and not bound.closed:
            return bound
        for k in [k for k, b in function.bound.items() if b.closed]:  # sessions that have closed
            del function.bound[k]
        program = function.programs.pop(sid, None)
        if program is None or program.closed:
            program = self.driver._load_program(function, session)
        art = CompiledArtifact(
            name=function.name,
            spirv=function.spirv,
            spirv_sha256=function.sha256,
            metadata=self.metadata,
            signature=self.signature,
            constexprs=self.constexprs,
            abi=self.abi,
        )
        try:
            bound = BoundKernel(session, art, program)
        except BaseException:
            program.close()
            raise
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
        if session._closed:
            raise ClosedError("the session of this launch is closed", "open a new Session and activate it")
        picked = self.pick(args)
        if self.single:
            picked = (picked,)
        prev = self._previous
        if (
            prev is not None
            and prev[0].session is session
            and prev[1] == picked
            and prev[3] == (gx, gy, gz)
            and tuple(map(type, picked)) == prev[2]
        ):
            if stream.events is None and enter_hook is None and exit_hook is None:
                prev[0].relaunch(stream.queue.handle)  # the common case, kept short
                self.driver.stats.launches += 1
            else:
                self._enqueue_again(prev[0], stream, launch_metadata, enter_hook, exit_hook)
            return
        self._previous = None
        values = list(picked)
        for j in self.addr_slots:
            v = values[j]
            if type(v) is not int:
                addr = _untyped_address(v)
                if addr is not None:
                    values[j] = addr
        values = self.abi.convert(values)  # every check before any UR call
        try:
            g = (int(gx), int(gy), int(gz))
        except (TypeError, ValueError):
            raise KernelArgumentError(
                f"grid ({gx!r}, {gy!r}, {gz!r}) is not integers", "pass e.g. (n_blocks,)"
            ) from None
        if g[0] < 0 or g[1] < 0 or g[2] < 0:
            raise KernelArgumentError(f"grid {g} has a negative size", "pass non-negative program counts")
        if not (g[0] and g[1] and g[2]):
            return  # an empty grid launches nothing, as Triton's own launchers do
        if not isinstance(function, _URFunction):
            raise XpukitError(
                f"kernel {self.abi.kernel_name} was not loaded by xpukit's UR driver",
                "compile and launch it inside `activate(session)`",
            )
        bound = self._bound(function, session)
        if enter_hook is not None:
            enter_hook(launch_metadata)
        if stream.events is None:
            bound.enqueue(values, g, stream.queue.handle)
        else:
            ev = c_void_p()
            bound.enqueue(values, g, stream.queue.handle, ev)
            stream.events.append(ev)
        self.driver.stats.launches += 1
        types = tuple(map(type, picked))
        if all(t in _PLAIN for t in types):
            self._previous = (bound, picked, types, (gx, gy, gz))
        if exit_hook is not None:
            exit_hook(launch_metadata)

    def _enqueue_again(self, bound: BoundKernel, stream: _Stream, meta: Any, enter_hook: Any, exit_hook: Any) -> None:
        if enter_hook is not None:
            enter_hook(meta)
        if stream.events is None:
            bound.relaunch(stream.queue.handle)
        else:
            ev = c_void_p()
            bound.relaunch(stream.queue.handle, ev)
            stream.events.append(ev)
        self.driver.stats.launches += 1
        if exit_hook is not None:
            exit_hook(meta)


_PLAIN = (int, float, bool)


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


@dataclasses.dataclass
class _Active:
    session: Session
    device_key: str
    target: Any
    stream: _Stream


_SERIALS = itertools.count()
_PROFILING_START = 2  # UR_PROFILING_INFO_COMMAND_START (same value 2025.0-2025.3)
_PROFILING_END = 3  # UR_PROFILING_INFO_COMMAND_END


class URDriver:
    """Triton's driver interface on Unified Runtime (see the module docstring).

    Use :func:`activate` for a scoped activation; one process-wide instance (:func:`default_driver`)
    is enough, since sessions are pushed and popped on it. ``cache``: a :class:`ProgramCache`
    (default: ``$XPUKIT_CACHE_DIR/ur-programs``), or False for none.
    """

    def __init__(self, cache: ProgramCache | bool | None = None) -> None:
        self.cache: ProgramCache | None = (
            None if cache is False else (cache if isinstance(cache, ProgramCache) else ProgramCache())
        )
        self.stats = DriverStats()
        self.utils = _Utils(self)
        self._stack: list[_Active] = []
        self._devices: dict[str, Any] = {}  # device key -> DeviceInfo
        self._profiling: dict[int, Queue] = {}
        self._serial = next(_SERIALS)

    # -- Triton's driver interface ---------------------------------------------------------------
    @staticmethod
    def is_active() -> bool:
        # Never chosen by Triton's automatic driver discovery: activation is explicit.
        return False

    def launcher_cls(self, src: Any, metadata: Any) -> URLauncher:
        return URLauncher(self, src, metadata)

    def _top(self) -> _Active:
        if not self._stack:
            raise NoActiveSession(
                "no xpukit session is active for this Triton launch",
                "wrap it in `with ur.Session(...) as s, xpukit.runtime.triton_driver.activate(s):`",
            )
        top = self._stack[-1]
        if top.session.closed:
            raise NoActiveSession(
                "the session activated for Triton launches is closed",
                "keep the session open for the whole `activate(session)` block",
            )
        return top

    @property
    def session(self) -> Session:
        """The session launches currently run on."""
        return self._top().session

    def get_current_device(self) -> str:
        # A string key, never an int: Triton keys each JITFunction's compiled variants by device,
        # and an int could collide with Triton's own XPU driver's device 0 in the same process.
        stack = self._stack
        if stack and not stack[-1].session._closed:  # the per-launch path: no extra calls
            return stack[-1].device_key
        return self._top().device_key

    def get_current_stream(self, device: Any = None) -> _Stream:
        stack = self._stack
        if stack and not stack[-1].session._closed:
            return stack[-1].stream
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
        return self.do_bench

    def map_python_to_cpp_type(self, ty: str) -> str:  # pragma: no cover - only newer Triton asks
        return ty

    # -- sessions --------------------------------------------------------------------------------
    def _push(self, session: Session) -> _Active:
        if session.closed:
            raise ClosedError("session used after close()", "open a new Session")
        from triton.backends.compiler import GPUTarget

        from xpukit.runtime.tritonc import xpu_backend

        xpu_backend()  # before Triton constructs the Intel backend: the torch/SYCL-free arch parser
        dev = session.device
        props = target_for_device(dev)
        # One key per driver and device: variants compiled under this driver stay with it.
        text = f"{self._serial}|" + json.dumps(props, sort_keys=True) + "|" + dev.cache_key()
        key = "xpukit-ur:" + hashlib.sha256(text.encode()).hexdigest()[:16]
        self._devices[key] = dev
        act = _Active(session, key, GPUTarget("xpu", props, 32), _Stream(session, session.queue))
        self._stack.append(act)
        _LIVE_SESSIONS.append(session)
        return act

    def _pop(self, act: _Active) -> None:
        self._stack.remove(act)
        _LIVE_SESSIONS.remove(act.session)
        # Profiling queues belong to their session (closed with it); forget those already closed.
        for k in [k for k, q in self._profiling.items() if q.closed]:
            del self._profiling[k]

    @contextlib.contextmanager
    def use(self, session: Session) -> Iterator[URDriver]:
        """Route launches to ``session`` inside the block (without changing Triton's active driver)."""
        act = self._push(session)
        try:
            yield self
        finally:
            self._pop(act)

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
            function.programs[id(session)] = self._load_program(function, session)
            self.stats.variants += 1
            return function, function, 0, 0
        if session.device.type == "cpu":
            code = spv.patch_for_cpu(code)
            # Triton's build flags are Intel GPU compiler options; the CPU runtime has none of them.
            options = ""
        else:
            options = build_flags or ""
        function = _URFunction(name, code, options)
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

        Each repetition's time is from the first launch's start to the last launch's end, read with
        ``urEventGetProfilingInfo`` on a profiling queue of the active session. Same contract as
        ``triton.testing.do_bench``: ``quantiles`` -> a list, else ``return_mode`` (min, max, mean,
        median, all)."""
        top = self._top()
        session = top.session
        queue = self._profiling.get(id(session))
        if queue is None or queue.closed:
            queue = session.new_queue(profiling=True)
            self._profiling[id(session)] = queue
        get_info = _profiling_fn(session.lib)
        stream = _Stream(session, queue, [])
        self.stats.benchmarks += 1
        saved = top.stream
        top.stream = stream
        try:
            fn()
            session.synchronize()
            est = statistics.median(_time_once(fn, stream, session, get_info) for _ in range(5))
            n_warmup = max(1, min(1000, int(warmup / max(est, 1e-6))))
            n_repeat = max(1, min(1000, int(rep / max(est, 1e-6))))
            for _ in range(n_warmup):
                fn()
            queue.finish()
            times = [_time_once(fn, stream, session, get_info) for _ in range(n_repeat)]
        finally:
            top.stream = saved
            _release_events(session, stream)
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


def _profiling_fn(lib: Any) -> Any:
    # Same prototype in every supported release (2025.0-2025.3 headers); not in the shared binding.
    fn = getattr(lib, "_xpukit_event_profiling", None)
    if fn is None:
        fn = lib.raw.urEventGetProfilingInfo
        fn.argtypes = [c_void_p, c_uint32, c_size_t, c_void_p, ctypes.POINTER(c_size_t)]
        fn.restype = ctypes.c_int32
        lib._xpukit_event_profiling = fn
    return fn


def _time_once(fn: Callable[[], Any], stream: _Stream, session: Session, get_info: Any) -> float:
    """One call of ``fn``: (end of its last launch - start of its first) in ms, from UR events."""
    events = stream.events
    assert events is not None
    _release_events(session, stream)
    fn()
    if not events:
        raise XpukitError(
            "the benchmarked call launched no kernel through xpukit's UR driver",
            "benchmark a call that launches Triton kernels inside activate(session)",
        )
    last = (c_void_p * 1)(events[-1])
    session.lib.urEventWait(1, last)
    start, end = c_uint64(), c_uint64()
    for ev, prop, out in ((events[0], _PROFILING_START, start), (events[-1], _PROFILING_END, end)):
        code = get_info(ev, prop, ctypes.sizeof(out), byref(out), None)
        if code:
            raise_result(code, "urEventGetProfilingInfo")
    _release_events(session, stream)
    return (end.value - start.value) / 1e6


def _release_events(session: Session, stream: _Stream) -> None:
    events = stream.events
    if not events:
        return
    for ev in events:
        if ev.value:
            session.lib.urEventRelease(ev)
    events.clear()


# --- activation --------------------------------------------------------------------------------

_DEFAULT: URDriver | None = None
_DEFAULT_LOCK = threading.Lock()


def default_driver() -> URDriver:
    """The process-wide :class:`URDriver` that :func:`activate` uses unless given another."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = URDriver()
        return _DEFAULT


def _active_driver() -> URDriver:
    """Triton's active driver when it is a UR driver, else the default one."""
    from triton.runtime.driver import driver as triton_driver

    active = triton_driver.active
    return active if isinstance(active, URDriver) else default_driver()


@contextlib.contextmanager
def activate(session: Session, driver: URDriver | None = None) -> Iterator[URDriver]:
    """Make Triton launch through UR on ``session`` inside the block; restore Triton's previous
    driver afterwards (nested blocks restore in order)."""
    from triton.runtime.driver import driver as triton_driver

    drv = driver or default_driver()
    with drv.use(session):
        previous = triton_driver.active
        _install_specializer()
        triton_driver.set_active(drv)
        try:
            yield drv
        finally:
            if previous is triton_driver.default:
                triton_driver.reset_active()
            else:
                triton_driver.set_active(previous)
            _remove_specializer()


def do_bench(
    fn: Callable[[], Any],
    warmup: float = 25,
    rep: float = 100,
    quantiles: Sequence[float] | None = None,
    return_mode: str = "mean",
    **kwargs: Any,
) -> Any:
    """UR-event-profiled benchmarker for ``triton.autotune(..., do_bench=do_bench)`` when the
    decorator runs outside ``activate`` (Triton asks the active driver for it at decoration time).
    Times on whatever session is active when it runs."""
    return _active_driver().do_bench(fn, warmup=warmup, rep=rep, quantiles=quantiles, return_mode=return_mode, **kwargs)
