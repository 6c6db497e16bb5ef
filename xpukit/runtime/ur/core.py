"""A small Pythonic layer over the raw binding: session, device info, USM, queue, programs, kernels.

Every object owns one UR handle and releases it in ``close()`` (idempotent) or on leaving its
``with`` block. A session owns everything created through it and closes what is still open
when it closes, newest first, after finishing its queue. Nothing waits for the garbage
collector; using a closed object raises :class:`~xpukit.runtime.ur.errors.ClosedError`.
"""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import logging
import os
import weakref
from collections.abc import Callable, Sequence
from ctypes import byref, c_size_t, c_uint32, c_uint64, c_void_p
from typing import Any

from xpukit.runtime.ur import _api
from xpukit.runtime.ur import launcher as _launcher
from xpukit.runtime.ur.errors import (
    BadDeviceRequest,
    ClosedError,
    DeviceNotFound,
    KernelArgumentError,
    UrError,
    error_class,
    raise_result,
)
from xpukit.runtime.ur.loader import UrLibrary, load

log = logging.getLogger("xpukit.runtime.ur")

DEVICE_CHOICES = ("auto", "gpu", "cpu")
USM_KINDS = ("device", "shared", "host")


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    name: str
    type: str  # "gpu" | "cpu"
    backend: str  # "level_zero" | "opencl" | ...
    driver_version: str
    ur_release: str
    vendor: str
    platform: str
    max_work_group_size: int
    max_num_sub_groups: int
    sub_group_sizes: tuple[int, ...]
    has_fp64: bool
    compute_units: int
    global_mem_size: int
    local_mem_size: int
    ip_version: int  # 0 where the adapter does not report it (OpenCL CPU)
    extensions: tuple[str, ...]

    def cache_key(self) -> str:
        """What a native binary depends on: device, driver, backend."""
        return f"{self.backend}|{self.name}|{self.driver_version}|{self.ip_version:#x}"


class _Resource:
    """One UR handle, released exactly once."""

    _kind = "resource"

    def __init__(self, session: Session | None, handle: int | None) -> None:
        self._session = session
        self._handle = handle
        self._closed = False
        if session is not None:
            session._adopt(self)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def handle(self) -> int:
        if self._closed:
            raise ClosedError(f"{self._kind} used after close()", f"create a new {self._kind}; this one was released")
        return self._handle  # type: ignore[return-value]

    def _release(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._handle is not None:
                self._release()
        finally:
            self._handle = None
            if self._session is not None:
                self._session._children.pop(id(self), None)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class USMAllocation(_Resource):
    """A USM allocation: ``.ptr`` is the 64-bit address kernels receive."""

    _kind = "USM allocation"

    def __init__(self, session: Session, nbytes: int, kind: str = "device") -> None:
        if kind not in USM_KINDS:
            raise BadDeviceRequest(f"unknown USM kind {kind!r}", f"use one of: {', '.join(USM_KINDS)}")
        if nbytes <= 0:
            raise UrError_invalid_size(nbytes)
        lib, ctx, dev = session.lib, session._ctx, session._device
        out = c_void_p()
        if kind == "device":
            lib.urUSMDeviceAlloc(ctx, dev, None, None, nbytes, byref(out))
        elif kind == "shared":
            lib.urUSMSharedAlloc(ctx, dev, None, None, nbytes, byref(out))
        else:
            lib.urUSMHostAlloc(ctx, None, None, nbytes, byref(out))
        self.nbytes = int(nbytes)
        self.kind = kind
        self._ptr = int(out.value or 0)
        super().__init__(session, self._ptr)
        session._track_usm(self._ptr, self.nbytes)

    @property
    def ptr(self) -> int:
        return self.handle

    def __int__(self) -> int:
        return self.handle

    def _release(self) -> None:
        s = self._session
        s._untrack_usm(self._ptr, self.nbytes)  # from here on, no launch accepts this memory
        # Kernels already enqueued may still use it: free only once the session's queues are
        # drained (as cudaFree does), never under a running kernel.
        s._drain_queues()
        s.lib.urUSMFree(s._ctx, c_void_p(self._ptr))

    def _host_view(self, array: Any, writable: bool) -> tuple[int, int]:
        import numpy as np

        if not isinstance(array, np.ndarray):
            raise TypeError(f"expected a numpy array, got {type(array).__name__}")
        if not array.flags["C_CONTIGUOUS"] or (writable and not array.flags["WRITEABLE"]):
            raise ValueError("the numpy array must be C-contiguous (and writable to copy into it)")
        if array.nbytes > self.nbytes:
            raise ValueError(f"array of {array.nbytes} bytes does not fit in a {self.nbytes}-byte allocation")
        return array.ctypes.data, array.nbytes

    def copy_from(self, array: Any, queue: Queue | None = None) -> USMAllocation:
        """Blocking copy host array -> this allocation."""
        src, n = self._host_view(array, writable=False)
        if n:
            (queue or self._session.queue).memcpy(self.ptr, src, n, blocking=True)
        return self

    def copy_to(self, array: Any, queue: Queue | None = None) -> Any:
        """Blocking copy this allocation -> host array (filled in place, returned)."""
        dst, n = self._host_view(array, writable=True)
        if n:
            (queue or self._session.queue).memcpy(dst, self.ptr, n, blocking=True)
        return array

    def to_numpy(self, dtype: Any, shape: int | Sequence[int] | None = None) -> Any:
        import numpy as np

        dtype = np.dtype(dtype)
        out = np.empty(shape if shape is not None else self.nbytes // dtype.itemsize, dtype=dtype)
        return self.copy_to(out)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"ptr={self._ptr:#x}"
        return f"<USMAllocation {self.kind} {self.nbytes} B {state}>"


class DeviceArray:
    """Typed device memory: what Triton's binder takes as a tensor (``data_ptr()`` and ``dtype``).

    A view of a :class:`~xpukit.runtime.ur.USMAllocation` (``owns=True``: closing the view frees it).
    ``dtype`` is a numpy dtype, so Triton types the pointer argument from ``str(dtype)``.
    """

    __slots__ = ("alloc", "dtype", "owns", "shape")

    def __init__(
        self, alloc: USMAllocation, dtype: Any, shape: int | Sequence[int] | None = None, owns: bool = False
    ) -> None:
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

    @property
    def closed(self) -> bool:
        return self.alloc.closed

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


def UrError_invalid_size(nbytes: int) -> UrError:
    return error_class("UR_RESULT_ERROR_INVALID_USM_SIZE")(
        "urUSM*Alloc", f"size {nbytes} must be positive", fix="allocate at least one byte"
    )


class Queue(_Resource):
    """An in-order UR queue."""

    _kind = "queue"

    def __init__(self, session: Session, profiling: bool = False) -> None:
        out = c_void_p()
        props = None
        if profiling:  # events of this queue carry start/end timestamps (urEventGetProfilingInfo)
            flags = _api.QUEUE_FLAG_PROFILING_ENABLE
            props = byref(_api.QueueProperties(_api.STRUCTURE_TYPE_QUEUE_PROPERTIES, None, flags))
        session.lib.urQueueCreate(session._ctx, session._device, props, byref(out))
        self.profiling = profiling
        self._lib = session.lib
        super().__init__(session, out.value)

    def _release(self) -> None:
        self._lib.urQueueRelease(c_void_p(self._handle))

    def finish(self) -> None:
        """Block until every command in the queue has completed (urQueueFinish)."""
        self._lib.urQueueFinish(self.handle)

    def memcpy(self, dst: int, src: int, nbytes: int, blocking: bool = True) -> None:
        self._lib.urEnqueueUSMMemcpy(self.handle, blocking, dst, src, nbytes, 0, None, None)

    def launch(
        self,
        kernel: Kernel,
        global_size: Sequence[int],
        local_size: Sequence[int] | None = None,
        event: bool = False,
    ) -> Event | None:
        """Enqueue ``kernel`` over an ND-range with the arguments already set on it: the one
        Python call of urEnqueueKernelLaunch (the checked per-argument path is :meth:`submit`).
        ``event=True`` returns the launch's :class:`Event`."""
        dims = len(global_size)
        if not 1 <= dims <= 3 or (local_size is not None and len(local_size) != dims):
            raise ValueError("global/local sizes must have the same length, 1 to 3")
        g = _api.size_array(list(global_size))
        loc = _api.size_array(list(local_size)) if local_size is not None else None
        out = c_void_p() if event else None
        ev = byref(out) if out is not None else None
        lib, form = self._lib, self._lib.launch_form
        if form == _api.LaunchForm.WITH_ARGS:
            args, keep = kernel._pending_args()
            lib.urEnqueueKernelLaunchWithArgsExp(self.handle, kernel.handle, dims, None, g, loc, len(args), args,
                                                 None, 0, None, ev)  # fmt: skip
            del keep  # the argument bytes live until the call has copied them
        elif form == _api.LaunchForm.SET_ARGS_LAUNCH11:
            lib.urEnqueueKernelLaunch(self.handle, kernel.handle, dims, None, g, loc, 0, None, 0, None, ev)
        else:
            lib.urEnqueueKernelLaunch(self.handle, kernel.handle, dims, None, g, loc, 0, None, ev)
        return Event(self._session, out.value) if out is not None else None

    def submit(self, launcher: ArgumentLauncher, grid: Sequence[int], args: Sequence[Any], event: bool = False) -> Any:
        """Check ``args``, set the changed ones and enqueue over ``grid`` (Triton programs per
        axis), atomically with respect to other threads; ``event=True`` returns an :class:`Event`."""
        g = tuple(grid) + (1,) * (3 - len(grid))
        handle = launcher.launch(self.handle, g[0], g[1], g[2], args, event)
        return Event(self._session, handle) if event and handle else None


class Event(_Resource):
    """A UR event: wait for it, read its profiling timestamps (profiling queues), release it."""

    _kind = "event"

    def __init__(self, session: Session, handle: int) -> None:
        self._lib = session.lib
        super().__init__(session, handle)

    def _release(self) -> None:
        self._lib.urEventRelease(c_void_p(self._handle))

    def wait(self) -> None:
        events = (c_void_p * 1)(self.handle)
        self._lib.urEventWait(1, events)

    def profile(self) -> tuple[int, int]:
        """(start, end) of the command in nanoseconds (urEventGetProfilingInfo; a profiling queue)."""
        out = []
        for prop in (_api.PROFILING_INFO_COMMAND_START, _api.PROFILING_INFO_COMMAND_END):
            value = c_uint64()
            self._lib.urEventGetProfilingInfo(self.handle, prop, ctypes.sizeof(value), byref(value), None)
            out.append(value.value)
        return out[0], out[1]


class Program(_Resource):
    """A UR program from SPIR-V (``kind="il"``) or a native binary (``kind="binary"``), built."""

    _kind = "program"

    def __init__(self, session: Session, data: bytes, kind: str = "il", options: str = "") -> None:
        lib, ctx = session.lib, session._ctx
        out = c_void_p()
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        if kind == "il":
            lib.urProgramCreateWithIL(ctx, buf, len(data), None, byref(out))
        elif kind == "binary":
            if lib.abi.binary_takes_device_array:
                devs = (c_void_p * 1)(session._device)
                sizes = (c_size_t * 1)(len(data))
                ptrs = (c_void_p * 1)(ctypes.cast(buf, c_void_p))
                lib.urProgramCreateWithBinary(ctx, 1, devs, sizes, ptrs, None, byref(out))
            else:
                lib.urProgramCreateWithBinary(ctx, session._device, len(data), buf, None, byref(out))
        else:
            raise ValueError(f"program kind must be 'il' or 'binary', not {kind!r}")
        self.source_kind = kind
        super().__init__(session, out.value)
        try:
            self._build(options)
        except BaseException:
            self.close()
            raise

    def _build(self, options: str) -> None:
        s = self._session
        code = s.lib.raw.urProgramBuild(s._ctx, self._handle, options.encode() if options else None)
        if code:
            raise error_class(code)("urProgramBuild", build_log=self.build_log())

    def _release(self) -> None:
        self._session.lib.urProgramRelease(c_void_p(self._handle))

    def build_log(self) -> str:
        s = self._session
        size = c_size_t()
        try:
            s.lib.urProgramGetBuildInfo(self._handle, s._device, _api.PROGRAM_BUILD_INFO_LOG, 0, None, byref(size))
            buf = ctypes.create_string_buffer(size.value or 1)
            s.lib.urProgramGetBuildInfo(self._handle, s._device, _api.PROGRAM_BUILD_INFO_LOG, size.value, buf, None)
        except UrError as exc:
            return f"(no build log: {exc.result_name})"
        return buf.value.decode(errors="replace")

    def binary(self) -> bytes:
        """The device's native binary (urProgramGetInfo BINARY_SIZES / BINARIES)."""
        lib, h = self._session.lib, self.handle
        sizes = (c_size_t * 1)()
        lib.urProgramGetInfo(h, _api.PROGRAM_INFO_BINARY_SIZES, ctypes.sizeof(sizes), sizes, None)
        buf = ctypes.create_string_buffer(sizes[0] or 1)
        ptrs = (c_void_p * 1)(ctypes.cast(buf, c_void_p))
        lib.urProgramGetInfo(h, _api.PROGRAM_INFO_BINARIES, ctypes.sizeof(ptrs), ptrs, None)
        return buf.raw[: sizes[0]]

    def kernel_names(self) -> list[str]:
        lib, h = self._session.lib, self.handle
        size = c_size_t()
        lib.urProgramGetInfo(h, _api.PROGRAM_INFO_KERNEL_NAMES, 0, None, byref(size))
        buf = ctypes.create_string_buffer(size.value or 1)
        lib.urProgramGetInfo(h, _api.PROGRAM_INFO_KERNEL_NAMES, size.value, buf, None)
        return [n for n in buf.value.decode().split(";") if n]

    def kernel(self, name: str) -> Kernel:
        return Kernel(self, name)


class Kernel(_Resource):
    """A kernel of a built program; set arguments, then ``queue.launch(kernel, ...)``."""

    _kind = "kernel"

    def __init__(self, program: Program, name: str) -> None:
        s = program._session
        out = c_void_p()
        s.lib.urKernelCreate(program.handle, name.encode(), byref(out))
        self.name = name
        self.program = program
        self._lib = s.lib
        self._launchers: list[Any] = []
        self._args: dict[int, tuple[int, int, bytes | None, int]] = {}  # WITH_ARGS releases: the set arguments
        super().__init__(s, out.value)

    def _release(self) -> None:
        self._lib.urKernelRelease(c_void_p(self._handle))

    # The explicit argument API. Up to 2026.1 each call is the release's urKernelSetArg*; from
    # 2026.0 on (urKernelSetArg* are gone in 2026.2) the arguments are kept here and travel with
    # the next Queue.launch in one urEnqueueKernelLaunchWithArgsExp call.
    def set_arg_pointer(self, index: int, address: int) -> None:
        if self._lib.launch_form == _api.LaunchForm.WITH_ARGS:
            self._keep(index, _api.KERNEL_ARG_POINTER, 8, None, address)
        else:
            self._lib.urKernelSetArgPointer(self.handle, index, None, c_void_p(address))

    def set_arg_value(self, index: int, value: ctypes._SimpleCData) -> None:
        if self._lib.launch_form == _api.LaunchForm.WITH_ARGS:
            self._keep(
                index, _api.KERNEL_ARG_VALUE, ctypes.sizeof(value), ctypes.string_at(byref(value), ctypes.sizeof(value))
            )
        else:
            self._lib.urKernelSetArgValue(self.handle, index, ctypes.sizeof(value), None, byref(value))

    def set_arg_local(self, index: int, nbytes: int) -> None:
        if self._lib.launch_form == _api.LaunchForm.WITH_ARGS:
            self._keep(index, _api.KERNEL_ARG_LOCAL, nbytes, None)
        else:
            self._lib.urKernelSetArgLocal(self.handle, index, nbytes, None)

    def _keep(self, index: int, kind: int, size: int, data: bytes | None, address: int = 0) -> None:
        if not isinstance(index, int) or not 0 <= index < 2**32:
            raise ValueError(f"argument index {index!r} must be an integer in [0, 2**32)")
        _ = self.handle  # a closed kernel is refused here, as the setter would refuse it
        self._args[index] = (kind, size, data, address)

    def _pending_args(self) -> tuple[ctypes.Array, list[Any]]:
        """The arguments set so far as a ur_exp_kernel_arg_properties_t array (and the buffers it
        points into, which must outlive the call)."""
        items = sorted(self._args.items())
        args = (_api.KernelArgProperties * max(len(items), 1))()
        keep: list[Any] = []
        for a, (index, (kind, size, data, address)) in zip(args, items, strict=False):
            a.stype, a.index, a.type, a.size = _api.STRUCTURE_TYPE_EXP_KERNEL_ARG_PROPERTIES, index, kind, size
            if kind == _api.KERNEL_ARG_POINTER:
                a.value.pointer = address or None
            elif data is not None:
                buf = ctypes.create_string_buffer(data, len(data))
                keep.append(buf)
                a.value.value = ctypes.addressof(buf)
        return (args if items else (_api.KernelArgProperties * 0)()), keep

    def launcher(
        self,
        kinds: str,
        local_size: Sequence[int],
        on_arg_error: Callable[[int, int, Any], None],
    ) -> ArgumentLauncher:
        """The checked launch path for this kernel (see :mod:`xpukit.runtime.ur.launcher`): one
        kind letter per parameter; pointers are checked against the session's live allocations;
        unchanged arguments are not set again. Closing the kernel closes its launchers."""
        loc = tuple(int(x) for x in local_size) + (1,) * (3 - len(local_size))
        form, fns = self._lib.launch_entry_points()
        launcher = _launcher.Launcher(
            self.handle, form, fns, kinds, loc, self._session.allocations, on_arg_error, raise_result
        )
        self._launchers.append(launcher)
        return launcher

    def close(self) -> None:
        for launcher in getattr(self, "_launchers", ()):
            launcher.close()  # before the handle goes: a launch after this is a clear error
        super().close()


ArgumentLauncher = Any  # _xpukit_launcher.Launcher or its Python twin (launcher.PyLauncher)


def _get_info(lib: UrLibrary, fn: str, handle: Any, prop: int) -> bytes:
    size = c_size_t()
    getattr(lib, fn)(handle, prop, 0, None, byref(size))
    buf = ctypes.create_string_buffer(size.value or 1)
    getattr(lib, fn)(handle, prop, size.value, buf, None)
    return buf.raw[: size.value]


def _str(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode(errors="replace")


def _uint(raw: bytes) -> int:
    return int.from_bytes(raw[:8], "little") if raw else 0


def _device_info(lib: UrLibrary, dev: Any, backend: str, platform: str) -> DeviceInfo:
    def info(prop: int) -> bytes:
        return _get_info(lib, "urDeviceGetInfo", dev, prop)

    def optional(prop: int, default: bytes = b"") -> bytes:
        try:
            return info(prop)
        except UrError:
            return default

    sg_raw = optional(_api.DEVICE_INFO_SUB_GROUP_SIZES_INTEL)
    sub_groups = tuple(int.from_bytes(sg_raw[i : i + 4], "little") for i in range(0, len(sg_raw), 4))
    return DeviceInfo(
        name=_str(info(_api.DEVICE_INFO_NAME)),
        type=_api.DEVICE_TYPE_NAMES.get(_uint(info(_api.DEVICE_INFO_TYPE)), "unknown"),
        backend=backend,
        driver_version=_str(info(_api.DEVICE_INFO_DRIVER_VERSION)),
        ur_release=lib.release.version,
        vendor=_str(optional(_api.DEVICE_INFO_VENDOR)),
        platform=platform,
        max_work_group_size=_uint(info(_api.DEVICE_INFO_MAX_WORK_GROUP_SIZE)),
        max_num_sub_groups=_uint(optional(_api.DEVICE_INFO_MAX_NUM_SUB_GROUPS)),
        sub_group_sizes=sub_groups,
        has_fp64=_uint(optional(_api.DEVICE_INFO_DOUBLE_FP_CONFIG)) != 0,
        compute_units=_uint(optional(_api.DEVICE_INFO_MAX_COMPUTE_UNITS)),
        global_mem_size=_uint(optional(_api.DEVICE_INFO_GLOBAL_MEM_SIZE)),
        local_mem_size=_uint(optional(_api.DEVICE_INFO_LOCAL_MEM_SIZE)),
        ip_version=_uint(optional(_api.DEVICE_INFO_IP_VERSION)),
        extensions=tuple(_str(optional(_api.DEVICE_INFO_EXTENSIONS)).split()),
    )


class Session:
    """A UR context and queue on one device.

    ``device``: ``"auto"`` (GPU through Level Zero, else the CPU device, logged), ``"gpu"`` or
    ``"cpu"``. ``loader``: explicit loader path (else ``XPUKIT_UR_LOADER``, oneAPI, pip).
    """

    def __init__(self, device: str = "auto", loader: str | os.PathLike[str] | None = None) -> None:
        if device not in DEVICE_CHOICES:
            raise BadDeviceRequest(f"unknown device request {device!r}", f"use one of: {', '.join(DEVICE_CHOICES)}")
        self._children: dict[int, _Resource] = {}
        # Live USM ranges: every pointer argument is checked against them before a launch, and a
        # plain int is recognised as a device address (is_usm_address). Each free bumps its
        # generation, after which launchers set pointer arguments again.
        self.allocations = _launcher.AllocTable()
        # Recently freed ranges, only to say "freed" rather than "unknown" in an argument error.
        self._freed: collections.deque[tuple[int, int]] = collections.deque(maxlen=1024)
        self._closed = False
        self._device_wait = True  # urDeviceWaitExp, where the release exports it and the adapter has it
        self._adapters: list[int] = []
        self._ctx: Any = None
        self.note = ""
        self.lib = load(loader)
        _SESSIONS.add(self)
        try:
            self._open(device)
        except BaseException:
            self.close()
            raise

    # -- discovery -------------------------------------------------------------------------------
    def _platforms(self) -> list[tuple[Any, str, str]]:
        lib = self.lib
        n = c_uint32()
        lib.urAdapterGet(0, None, byref(n))
        adapters = (c_void_p * n.value)()
        lib.urAdapterGet(n.value, adapters, None)
        self._adapters = [a for a in adapters if a]
        found: list[Any] = []
        groups = [[a] for a in self._adapters]
        if lib.abi.platform_get_takes_adapter_array:
            groups = [self._adapters] if self._adapters else []
        for group in groups:
            count = c_uint32()
            if lib.abi.platform_get_takes_adapter_array:
                arr = (c_void_p * len(group))(*group)
                lib.urPlatformGet(arr, len(group), 0, None, byref(count))
                plats = (c_void_p * count.value)()
                if count.value:
                    lib.urPlatformGet(arr, len(group), count.value, plats, None)
            else:
                lib.urPlatformGet(group[0], 0, None, byref(count))
                plats = (c_void_p * count.value)()
                if count.value:
                    lib.urPlatformGet(group[0], count.value, plats, None)
            found.extend(p for p in plats if p)
        out = []
        for p in found:
            backend = _api.BACKEND_NAMES.get(_uint(_get_info(lib, "urPlatformGetInfo", p, _api.PLATFORM_INFO_BACKEND)))
            name = _str(_get_info(lib, "urPlatformGetInfo", p, _api.PLATFORM_INFO_NAME))
            out.append((p, backend, name))
        return out

    def _devices(self, platform: Any, dtype: int) -> list[Any]:
        n = c_uint32()
        code = self.lib.raw.urDeviceGet(platform, dtype, 0, None, byref(n))
        if code == _api.RESULT_CODES["UR_RESULT_ERROR_DEVICE_NOT_FOUND"] or (code == 0 and n.value == 0):
            return []
        if code:
            raise error_class(code)("urDeviceGet")
        devs = (c_void_p * n.value)()
        self.lib.urDeviceGet(platform, dtype, n.value, devs, None)
        return [d for d in devs if d]

    def _open(self, request: str) -> None:
        platforms = self._platforms()
        chosen = None
        if request in ("auto", "gpu"):
            # Level Zero first: Triton's Intel GPU path targets it; OpenCL GPUs are a last resort.
            order = sorted(platforms, key=lambda p: p[1] != "level_zero")
            for p, backend, pname in order:
                devs = self._devices(p, _api.DEVICE_TYPE_GPU)
                if devs:
                    chosen = (devs[0], backend, pname)
                    break
            if chosen is None and request == "gpu":
                raise DeviceNotFound(
                    "no GPU device found through UR "
                    f"(platforms: {', '.join(f'{n} [{b}]' for _, b, n in platforms) or 'none'})",
                    "check /dev/dri is visible (docker: --device /dev/dri) and the Level Zero "
                    "driver is installed, or use --device cpu",
                )
        if chosen is None:
            for p, backend, pname in platforms:
                devs = self._devices(p, _api.DEVICE_TYPE_CPU)
                if devs:
                    chosen = (devs[0], backend, pname)
                    break
            if chosen is None:
                raise DeviceNotFound(
                    "no CPU device found through UR "
                    f"(platforms: {', '.join(f'{n} [{b}]' for _, b, n in platforms) or 'none'})",
                    "pip install intel-opencl-rt (Intel's CPU OpenCL runtime) and set "
                    "OCL_ICD_FILENAMES=<prefix>/lib/libintelocl.so",
                )
            if request == "auto":
                self.note = "no GPU found through Level Zero; using the CPU device"
                log.warning("xpukit.runtime.ur: %s", self.note)
        dev, backend, pname = chosen
        self._device = dev
        self.device = _device_info(self.lib, dev, backend, pname)
        devs = (c_void_p * 1)(dev)
        ctx = c_void_p()
        self.lib.urContextCreate(1, devs, None, byref(ctx))
        self._ctx = ctx.value
        self.queue = Queue(self)

    # -- ownership -------------------------------------------------------------------------------
    def _adopt(self, res: _Resource) -> None:
        if self._closed:
            raise ClosedError("session used after close()", "open a new Session")
        self._children[id(res)] = res

    @property
    def closed(self) -> bool:
        return self._closed

    def _track_usm(self, ptr: int, nbytes: int) -> None:
        self.allocations.add(ptr, nbytes)

    def _untrack_usm(self, ptr: int, nbytes: int) -> None:
        if self.allocations.remove(ptr):
            self._freed.append((ptr, nbytes))

    @property
    def usm_generation(self) -> int:
        """Counts USM frees: launchers set pointer arguments again after one."""
        return self.allocations.generation

    def is_usm_address(self, value: int) -> bool:
        """Whether ``value`` points into a live USM allocation of this session.

        Triton types a small int as i32; an address must stay 64-bit even where the allocator
        hands out low addresses (Intel's CPU runtime under a non-PIE python, e.g. Debian's).
        """
        return self.allocations.find(value) is not None

    def explain_address(self, value: Any) -> str:
        """Why ``value`` is not a usable pointer on this session (for argument errors)."""
        if isinstance(value, USMAllocation | DeviceArray) and value.closed:
            return "its allocation was freed (closed)"
        try:
            addr = getattr(value, "ptr", value)
            addr = addr if isinstance(addr, int) else addr.__index__()
        except Exception:
            addr = None
        if value is None or addr == 0:
            return "it is null"
        if not isinstance(addr, int) or isinstance(addr, bool):
            return f"a {type(value).__name__} is not device memory"
        if self.is_usm_address(addr):
            return "it is live device memory"  # not an error: callers only ask on a failed check
        for other in list(_SESSIONS):
            if other is not self and not other.closed and other.is_usm_address(addr):
                return f"{addr:#x} belongs to another session; each session's memory is its own"
        if any(start <= addr < start + size for start, size in self._freed):
            return f"{addr:#x} lies in an allocation of this session that was freed"
        return f"{addr:#x} is not in any live allocation of this session (host memory or a stale address)"

    def _check(self) -> None:
        if self._closed:
            raise ClosedError("session used after close()", "open a new Session")

    # -- resources -------------------------------------------------------------------------------
    def alloc(self, nbytes: int, kind: str = "device") -> USMAllocation:
        self._check()
        return USMAllocation(self, nbytes, kind)

    def empty(self, shape: int | Sequence[int], dtype: Any, kind: str = "device") -> USMAllocation:
        import numpy as np

        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
        return self.alloc(max(n, 1), kind)

    def from_numpy(self, array: Any, kind: str = "device") -> USMAllocation:
        buf = self.alloc(max(array.nbytes, 1), kind)
        try:
            return buf.copy_from(array)
        except BaseException:
            buf.close()
            raise

    def program_from_spirv(self, spirv: bytes, options: str = "") -> Program:
        self._check()
        return Program(self, spirv, "il", options)

    def program_from_binary(self, binary: bytes, options: str = "") -> Program:
        self._check()
        return Program(self, binary, "binary", options)

    def finish(self) -> None:
        """Wait for the session's default queue (urQueueFinish)."""
        self._check()
        self.queue.finish()

    def new_queue(self, profiling: bool = False) -> Queue:
        """Another in-order queue on this session's device (owned and finished by the session)."""
        self._check()
        return Queue(self, profiling=profiling)

    def _drain_queues(self) -> None:
        for res in list(self._children.values()):
            if isinstance(res, Queue) and not res.closed:
                res.finish()

    def synchronize(self) -> None:
        """Device-wide wait: ``urDeviceWaitExp`` where the release and the adapter have it (2026.0+;
        the OpenCL adapter answers UNSUPPORTED_FEATURE), else finish every queue this session owns
        (every command xpukit can have submitted on this device)."""
        self._check()
        if self.lib.has_device_wait and self._device_wait:
            code = self.lib.raw.urDeviceWaitExp(self._device)
            if code == 0:
                return
            if code != _api.RESULT_CODES["UR_RESULT_ERROR_UNSUPPORTED_FEATURE"]:
                raise error_class(code)("urDeviceWaitExp")
            self._device_wait = False  # exported, but not by this adapter (OpenCL): finish the queues
        self._drain_queues()

    def close(self) -> None:
        """Finish the queue, release everything still open (newest first), then the context."""
        if self._closed:
            return
        errors: list[BaseException] = []
        queue = getattr(self, "queue", None)
        if queue is not None and not queue.closed:
            try:
                queue.finish()
            except UrError as exc:
                errors.append(exc)
        for res in reversed(list(self._children.values())):
            try:
                res.close()
            except UrError as exc:
                errors.append(exc)
        self._closed = True
        if self._ctx is not None:
            try:
                self.lib.urContextRelease(c_void_p(self._ctx))
            except UrError as exc:
                errors.append(exc)
            self._ctx = None
        for a in self._adapters:
            try:
                self.lib.urAdapterRelease(c_void_p(a))
            except UrError as exc:
                errors.append(exc)
        self._adapters = []
        if errors:
            raise errors[0]

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._closed:
            return "<Session closed>"
        d = self.device
        return f"<Session {d.name} [{d.type}, {d.backend}] UR {d.ur_release}>"


# Every open session, for telling "another session's memory" from "unknown" in argument errors.
_SESSIONS: weakref.WeakSet[Session] = weakref.WeakSet()

# The compiled launcher reads these types' addresses straight from the instance.
_launcher.register_memory_types(USMAllocation, DeviceArray)
