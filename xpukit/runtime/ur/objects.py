"""The UR objects a session owns: USM memory (and its typed view), queues, events, programs and
kernels. Every object owns one UR handle and releases it in ``close()`` (idempotent) or on leaving
its ``with`` block; using a closed object raises :class:`~xpukit.runtime.ur.errors.ClosedError`.
The session itself (ownership, address checks) is :mod:`xpukit.runtime.ur.core`.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from ctypes import byref, c_size_t, c_uint64, c_void_p
from typing import Any, Protocol

from xpukit.runtime.ur import _api
from xpukit.runtime.ur import launcher as _launcher
from xpukit.runtime.ur.errors import (
    BadDeviceRequest,
    ClosedError,
    KernelArgumentError,
    UrError,
    error_class,
    raise_result,
)
from xpukit.runtime.ur.interop import export as _export
from xpukit.runtime.ur.launcher import AllocationTable, ArgumentLauncher
from xpukit.runtime.ur.loader import UrLibrary
from xpukit.runtime.ur.usm import UsmLedger

USM_KINDS = ("device", "shared", "host")
_EXPORT_LOCK = threading.Lock()


class Session(Protocol):
    """What the objects use of the session that owns them. The session is
    :class:`xpukit.runtime.ur.core.Session`, which imports this module, so the objects name it by
    this interface; mypy checks the core's class against it wherever the core hands itself over."""

    @property
    def lib(self) -> UrLibrary: ...
    @property
    def context_handle(self) -> Any: ...  # the UR handles the objects are made on (None once closed)
    @property
    def device_handle(self) -> Any: ...
    @property
    def queue(self) -> Queue: ...
    @property
    def usm(self) -> UsmLedger: ...
    @property
    def allocations(self) -> AllocationTable: ...
    @property
    def sycl_queue(self) -> Any: ...  # the SYCL queue shared with the session, or None (DLPack export)
    def adopt(self, res: Resource) -> None: ...
    def disown(self, res: Resource) -> None: ...
    def free_usm(self, ptr: int, deferred: bool = False) -> None: ...
    def drain_queues(self) -> None: ...
    def synchronize(self) -> None: ...


class Resource:
    """One UR handle, released exactly once.

    ``session`` owns it; ``raw_handle`` is the handle (None once closed) and ``closed`` whether it
    was released: plain attributes, because the launch path reads them on every launch (the
    ``handle`` property raises the kit's error for a closed one)."""

    _kind = "resource"

    def __init__(self, session: Session, handle: int | None) -> None:
        self.session = session
        self.raw_handle = handle
        self.closed = False
        session.adopt(self)

    @property
    def handle(self) -> int:
        if self.closed:
            raise ClosedError(f"{self._kind} used after close()", f"create a new {self._kind}; this one was released")
        return self.raw_handle  # type: ignore[return-value]

    def _release(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            if self.raw_handle is not None:
                self._release()
        finally:
            self.raw_handle = None
            self.session.disown(self)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class USMAllocation(Resource):
    """A USM allocation: ``.ptr`` is the 64-bit address kernels receive."""

    _kind = "USM allocation"

    def __init__(self, session: Session, nbytes: int, kind: str = "device") -> None:
        if kind not in USM_KINDS:
            raise BadDeviceRequest(f"unknown USM kind {kind!r}", f"use one of: {', '.join(USM_KINDS)}")
        if nbytes <= 0:
            raise UrError_invalid_size(nbytes)
        lib, ctx, dev = session.lib, session.context_handle, session.device_handle
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
        self._exports = 0  # DLPack consumers still holding this memory
        self._free_pending = False
        super().__init__(session, self._ptr)
        session.usm.track(self._ptr, self.nbytes)

    @property
    def ptr(self) -> int:
        return self.handle

    def __int__(self) -> int:
        return self.handle

    def _release(self) -> None:
        s = self.session
        s.usm.untrack(self._ptr, self.nbytes)  # from here on, no launch accepts this memory
        # Kernels already enqueued may still use it: free only once the session's queues are
        # drained (as cudaFree does), never under a running kernel.
        s.drain_queues()
        with _EXPORT_LOCK:
            if self._exports:  # a DLPack consumer (a dpnp array) still uses it: freed when it lets go
                self._free_pending = True
                s.usm.deferred += 1  # freed by the last consumer (dlpack_released)
                return
        s.free_usm(self._ptr)

    # -- DLPack (consumers such as dpnp.from_dlpack take the memory without a copy) ----------------
    @property
    def exports(self) -> int:
        """DLPack consumers still holding this memory (closing it then defers the free to the last)."""
        return self._exports

    def dlpack_taken(self) -> None:
        """A DLPack consumer took this memory (xpukit.runtime.ur.interop.export)."""
        with _EXPORT_LOCK:
            self._exports += 1

    def dlpack_released(self) -> None:
        """A DLPack consumer let go; the last one frees the memory if it was closed meanwhile."""
        with _EXPORT_LOCK:
            self._exports -= 1
            free = self._exports == 0 and self._free_pending
            self._free_pending = self._free_pending and not free
        if free:
            self.session.free_usm(self._ptr, deferred=True)

    def __dlpack_device__(self) -> tuple[int, int]:
        return _export.dlpack_device(self.session)

    def __dlpack__(
        self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None
    ) -> Any:
        """The bytes as a 1-D uint8 DLPack tensor (kDLOneAPI); a typed view is DeviceArray's."""
        return _export.export(self.session, self, self.ptr, "uint8", (self.nbytes,), dl_device, copy)

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
            (queue or self.session.queue).memcpy(self.ptr, src, n, blocking=True)
        return self

    def copy_to(self, array: Any, queue: Queue | None = None) -> Any:
        """Blocking copy this allocation -> host array (filled in place, returned)."""
        dst, n = self._host_view(array, writable=True)
        if n:
            (queue or self.session.queue).memcpy(dst, self.ptr, n, blocking=True)
        return array

    def to_numpy(self, dtype: Any, shape: int | Sequence[int] | None = None) -> Any:
        import numpy as np

        dtype = np.dtype(dtype)
        out = np.empty(shape if shape is not None else self.nbytes // dtype.itemsize, dtype=dtype)
        return self.copy_to(out)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"ptr={self._ptr:#x}"
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

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.alloc.__dlpack_device__()

    def __dlpack__(
        self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None
    ) -> Any:
        """This shape and dtype as a DLPack tensor (kDLOneAPI), without a copy."""
        a = self.alloc
        return _export.export(a.session, a, a.ptr, self.dtype, self.shape, dl_device, copy)

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


class Queue(Resource):
    """An in-order UR queue."""

    _kind = "queue"

    def __init__(self, session: Session, profiling: bool = False, adopted: int | None = None) -> None:
        """A new queue on the session's device, or (``adopted``) a UR queue handle made elsewhere
        (urQueueCreateWithNativeHandle), owned from now on."""
        out = c_void_p(adopted)
        if adopted is None:
            props = None
            if profiling:  # events of this queue carry start/end timestamps (urEventGetProfilingInfo)
                flags = _api.QUEUE_FLAG_PROFILING_ENABLE
                props = byref(_api.QueueProperties(_api.STRUCTURE_TYPE_QUEUE_PROPERTIES, None, flags))
            session.lib.urQueueCreate(session.context_handle, session.device_handle, props, byref(out))
        self.profiling = profiling
        self._lib = session.lib
        super().__init__(session, out.value)

    def _release(self) -> None:
        self._lib.urQueueRelease(c_void_p(self.raw_handle))

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
        Python call of urEnqueueKernelLaunch (the checked per-argument path is a kernel's launcher,
        ``BoundKernel.launch`` for Triton kernels). ``event=True`` returns the launch's :class:`Event`."""
        dims = len(global_size)
        if not 1 <= dims <= 3 or (local_size is not None and len(local_size) != dims):
            raise ValueError("global/local sizes must have the same length, 1 to 3")
        g = _api.size_array(list(global_size))
        loc = _api.size_array(list(local_size)) if local_size is not None else None
        out = c_void_p() if event else None
        ev = byref(out) if out is not None else None
        lib, form = self._lib, self._lib.launch_form
        if form == _api.LaunchForm.WITH_ARGS:
            args, keep = kernel.argument_properties()
            lib.urEnqueueKernelLaunchWithArgsExp(self.handle, kernel.handle, dims, None, g, loc, len(args), args,
                                                 None, 0, None, ev)  # fmt: skip
            del keep  # the argument bytes live until the call has copied them
        elif form == _api.LaunchForm.SET_ARGS_LAUNCH11:
            lib.urEnqueueKernelLaunch(self.handle, kernel.handle, dims, None, g, loc, 0, None, 0, None, ev)
        else:
            lib.urEnqueueKernelLaunch(self.handle, kernel.handle, dims, None, g, loc, 0, None, ev)
        return Event(self.session, out.value) if out is not None else None


class Event(Resource):
    """A UR event: wait for it, read its profiling timestamps (profiling queues), release it."""

    _kind = "event"

    def __init__(self, session: Session, handle: int | None) -> None:
        self._lib = session.lib
        super().__init__(session, handle)

    def _release(self) -> None:
        self._lib.urEventRelease(c_void_p(self.raw_handle))

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


class Program(Resource):
    """A UR program from SPIR-V (``kind="il"``) or a native binary (``kind="binary"``), built."""

    _kind = "program"

    def __init__(self, session: Session, data: bytes, kind: str = "il", options: str = "") -> None:
        lib, ctx = session.lib, session.context_handle
        out = c_void_p()
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        if kind == "il":
            lib.urProgramCreateWithIL(ctx, buf, len(data), None, byref(out))
        elif kind == "binary":
            if lib.abi.binary_takes_device_array:
                devs = (c_void_p * 1)(session.device_handle)
                sizes = (c_size_t * 1)(len(data))
                ptrs = (c_void_p * 1)(ctypes.cast(buf, c_void_p))
                lib.urProgramCreateWithBinary(ctx, 1, devs, sizes, ptrs, None, byref(out))
            else:
                lib.urProgramCreateWithBinary(ctx, session.device_handle, len(data), buf, None, byref(out))
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
        s = self.session
        code = s.lib.raw.urProgramBuild(s.context_handle, self.raw_handle, options.encode() if options else None)
        if code:
            raise error_class(code)("urProgramBuild", build_log=self.build_log())

    def _release(self) -> None:
        self.session.lib.urProgramRelease(c_void_p(self.raw_handle))

    def build_log(self) -> str:
        s = self.session
        dev, h, log = s.device_handle, self.raw_handle, _api.PROGRAM_BUILD_INFO_LOG
        size = c_size_t()
        try:
            s.lib.urProgramGetBuildInfo(h, dev, log, 0, None, byref(size))
            buf = ctypes.create_string_buffer(size.value or 1)
            s.lib.urProgramGetBuildInfo(h, dev, log, size.value, buf, None)
        except UrError as exc:
            return f"(no build log: {exc.result_name})"
        return buf.value.decode(errors="replace")

    def binary(self) -> bytes:
        """The device's native binary (urProgramGetInfo BINARY_SIZES / BINARIES)."""
        lib, h = self.session.lib, self.handle
        sizes = (c_size_t * 1)()
        lib.urProgramGetInfo(h, _api.PROGRAM_INFO_BINARY_SIZES, ctypes.sizeof(sizes), sizes, None)
        buf = ctypes.create_string_buffer(sizes[0] or 1)
        ptrs = (c_void_p * 1)(ctypes.cast(buf, c_void_p))
        lib.urProgramGetInfo(h, _api.PROGRAM_INFO_BINARIES, ctypes.sizeof(ptrs), ptrs, None)
        return buf.raw[: sizes[0]]

    def kernel_names(self) -> list[str]:
        lib, h = self.session.lib, self.handle
        size = c_size_t()
        lib.urProgramGetInfo(h, _api.PROGRAM_INFO_KERNEL_NAMES, 0, None, byref(size))
        buf = ctypes.create_string_buffer(size.value or 1)
        lib.urProgramGetInfo(h, _api.PROGRAM_INFO_KERNEL_NAMES, size.value, buf, None)
        return [n for n in buf.value.decode().split(";") if n]

    def kernel(self, name: str) -> Kernel:
        return Kernel(self, name)


class Kernel(Resource):
    """A kernel of a built program; set arguments, then ``queue.launch(kernel, ...)``."""

    _kind = "kernel"

    def __init__(self, program: Program, name: str) -> None:
        s = program.session
        out = c_void_p()
        s.lib.urKernelCreate(program.handle, name.encode(), byref(out))
        self.name = name
        self.program = program
        self._lib = s.lib
        self._launchers: list[Any] = []
        self._args: dict[int, tuple[int, int, bytes | None, int]] = {}  # WITH_ARGS releases: the set arguments
        super().__init__(s, out.value)

    def _release(self) -> None:
        self._lib.urKernelRelease(c_void_p(self.raw_handle))

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

    def argument_properties(self) -> tuple[ctypes.Array, list[Any]]:
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
        if not 1 <= len(local_size) <= 3:
            raise ValueError(f"local size {tuple(local_size)}: one to three dimensions")
        x, y, z = (*(int(v) for v in local_size), 1, 1)[:3]
        form, fns = self._lib.launch_entry_points()
        launcher = _launcher.Launcher(
            self.handle, form, fns, kinds, (x, y, z), self.session.allocations, on_arg_error, raise_result
        )
        self._launchers.append(launcher)
        return launcher

    def close(self) -> None:
        for launcher in getattr(self, "_launchers", ()):
            launcher.close()  # before the handle goes: a launch after this is a clear error
        super().close()
