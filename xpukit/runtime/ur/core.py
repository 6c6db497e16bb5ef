"""A small Pythonic layer over the raw binding: the session (device discovery, ownership, address
checks) and device info; the objects it owns are in :mod:`xpukit.runtime.ur.objects`.

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
from collections.abc import Sequence
from ctypes import byref, c_size_t, c_uint32, c_void_p
from typing import Any

from xpukit.runtime.ur import _api, seam
from xpukit.runtime.ur import foreign as _foreign
from xpukit.runtime.ur import foreign_state as _foreign_state
from xpukit.runtime.ur import launcher as _launcher
from xpukit.runtime.ur.errors import (
    BadDeviceRequest,
    ClosedError,
    DeviceNotFound,
    UrError,
    error_class,
)
from xpukit.runtime.ur.loader import UrLibrary, load
from xpukit.runtime.ur.objects import _EXPORT_LOCK, DeviceArray, Program, Queue, Resource, USMAllocation

log = logging.getLogger("xpukit.runtime.ur")

DEVICE_CHOICES = ("auto", "gpu", "cpu")


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
        self._init_state(loader)
        try:
            self._open(device)
        except BaseException:
            self.close()
            raise

    def _init_state(self, loader: str | os.PathLike[str] | None) -> None:
        self._children: dict[int, Resource] = {}
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
        # Sessions over someone else's device (from_native, from_sycl): the SYCL queue shared with
        # the session (in-order), foreign memory lent for launches, allocations freed by their last DLPack consumer.
        self.sycl_queue: Any = None
        self.foreign = _foreign_state.ForeignState(self)
        self._pending_frees = 0
        self.lib = load(loader)
        _SESSIONS.add(self)

    @classmethod
    def from_native(
        cls,
        backend: str,
        context: int,
        device: int,
        queue: int = 0,
        *,
        owned: bool = False,
        queue_desc: int = 0,
        loader: str | os.PathLike[str] | None = None,
    ) -> Session:
        """A session over another runtime's native handles (``backend``: "opencl" or "level_zero"):
        its context and device, and its queue when given (it must be in-order; without one the
        session makes its own in-order queue). ``owned``: the handles carry a reference the session
        takes over and releases on close (what OpenCL's ``get_native`` hands out); else the caller
        keeps them alive for the session's life."""
        return cls._over(_foreign.NativeHandles(backend, context, device, queue, queue_desc, owned), loader)

    @classmethod
    def from_sycl(cls, queue: Any, loader: str | os.PathLike[str] | None = None) -> Session:
        """A session sharing a SYCL queue's context and device (a ``dpctl.SyclQueue``, or a dpnp/dpctl
        array's queue). Launches go to an in-order SYCL queue (``session.sycl_queue``): the queue
        itself when it is in-order, else a new in-order queue on its context and device. A launch
        of dpnp arrays already seen on that queue is submitted to SYCL, which orders it; any other
        launch with foreign memory waits for the producers' queues first and is handed back to SYCL
        after (xpukit.runtime.ur.foreign_state), so out-of-order queues and SYCL host tasks never race it."""
        import dpctl

        given = _foreign.sycl_queue_of(queue)
        shared = (
            given if given.is_in_order else dpctl.SyclQueue(given.sycl_context, given.sycl_device, property="in_order")
        )
        session = cls._over(_foreign.sycl_native_handles(shared), loader)
        session.sycl_queue = shared
        session.foreign.fast = True  # launches of its held arrays are submitted to SYCL (foreign_state)
        return session

    @classmethod
    def _over(cls, handles: _foreign.NativeHandles, loader: str | os.PathLike[str] | None) -> Session:
        session = cls.__new__(cls)
        try:
            session._init_state(loader)
        except BaseException:
            _foreign.release_opencl(handles)
            raise
        try:
            session._open_native(handles)
        except BaseException:
            session.close()
            raise
        return session

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
            backend = _api.BACKEND_NAMES.get(
                _uint(_get_info(lib, "urPlatformGetInfo", p, _api.PLATFORM_INFO_BACKEND)), "unknown"
            )
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
        one_device = (c_void_p * 1)(dev)
        ctx = c_void_p()
        self.lib.urContextCreate(1, one_device, None, byref(ctx))
        self._ctx = ctx.value
        self.queue = Queue(self)

    def _open_native(self, h: _foreign.NativeHandles) -> None:
        lib = self.lib
        taken = {"context": False, "queue": False}  # native references a UR object took over
        try:
            want = {"opencl": _api.BACKEND_OPENCL, "level_zero": _api.BACKEND_LEVEL_ZERO}.get(h.backend)
            if want is None:
                raise BadDeviceRequest(f"unknown native backend {h.backend!r}", "use 'opencl' or 'level_zero'")
            if not h.context or not h.device:
                raise BadDeviceRequest("a null native context or device handle", "pass the runtime's live handles")
            n = c_uint32()
            lib.urAdapterGet(0, None, byref(n))
            adapters = (c_void_p * n.value)()
            lib.urAdapterGet(n.value, adapters, None)
            self._adapters = [a for a in adapters if a]
            adapter = next(
                (
                    a
                    for a in self._adapters
                    if _uint(_get_info(lib, "urAdapterGetInfo", c_void_p(a), _api.ADAPTER_INFO_BACKEND)) == want
                ),
                None,
            )
            if adapter is None:
                raise DeviceNotFound(
                    f"this UR loader has no {h.backend} adapter", "install the runtime the handles come from"
                )
            dev = c_void_p()
            props = _api.NativeProperties(_api.STRUCTURE_TYPE_DEVICE_NATIVE_PROPERTIES, None, False)
            lib.urDeviceCreateWithNativeHandle(c_void_p(h.device), c_void_p(adapter), byref(props), byref(dev))
            self._device = dev.value
            platform = _get_info(lib, "urDeviceGetInfo", dev, _api.DEVICE_INFO_PLATFORM)
            pname = _str(_get_info(lib, "urPlatformGetInfo", c_void_p(_uint(platform)), _api.PLATFORM_INFO_NAME))
            self.device = _device_info(lib, dev, h.backend, pname)
            devs = (c_void_p * 1)(dev.value)
            ctx = c_void_p()
            props = _api.NativeProperties(_api.STRUCTURE_TYPE_CONTEXT_NATIVE_PROPERTIES, None, h.owned)
            lib.urContextCreateWithNativeHandle(
                c_void_p(h.context), c_void_p(adapter), 1, devs, byref(props), byref(ctx)
            )
            self._ctx = ctx.value
            taken["context"] = True
            if not h.queue:
                self.queue = Queue(self)
                return
            native_data = ctypes.c_int(h.queue_desc)
            desc = _api.QueueNativeDesc(_api.STRUCTURE_TYPE_QUEUE_NATIVE_DESC, None, ctypes.addressof(native_data))
            qprops = _api.NativeProperties(_api.STRUCTURE_TYPE_QUEUE_NATIVE_PROPERTIES, None, h.owned)
            if h.backend == "level_zero":
                qprops.pNext = ctypes.addressof(desc)
            out = c_void_p()
            lib.urQueueCreateWithNativeHandle(c_void_p(h.queue), c_void_p(self._ctx), dev, byref(qprops), byref(out))
            taken["queue"] = True
            self.queue = Queue.adopt(self, out.value)
            flags = _uint(_get_info(lib, "urQueueGetInfo", out, _api.QUEUE_INFO_FLAGS))
            if flags & _api.QUEUE_FLAG_OUT_OF_ORDER_EXEC_MODE_ENABLE:
                raise BadDeviceRequest(
                    "the native queue is out-of-order: kernels on it could run before the commands they depend on",
                    "pass an in-order queue, none (the session makes its own), or use Session.from_sycl(queue)",
                )
        finally:
            if h.owned and not all(taken.values()):
                _foreign.release_opencl(
                    _foreign.NativeHandles(
                        h.backend, 0 if taken["context"] else h.context, 0, 0 if taken["queue"] else h.queue, owned=True
                    )
                )

    # -- ownership -------------------------------------------------------------------------------
    def _adopt(self, res: Resource) -> None:
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
        """Wait for the session's default queue (urQueueFinish), and let go of the producers of
        the foreign launches it ran."""
        self._check()
        self.queue.finish()
        if self.foreign.inflight:
            self.foreign.settle(finished=True)

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
        if getattr(self, "foreign", None) is not None:
            self.foreign.close()
        for res in reversed(list(self._children.values())):
            try:
                res.close()
            except UrError as exc:
                errors.append(exc)
        self._closed = True
        with _EXPORT_LOCK:
            deferred = self._pending_frees > 0
        if not deferred:  # else the last DLPack consumer to let go releases them (_pending_free_done)
            self._release_context(errors)
        if errors:
            raise errors[0]

    def _release_context(self, errors: list[BaseException]) -> None:
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
        self.sycl_queue = None

    def _pending_free_done(self) -> None:
        """An allocation closed while exported was freed by its last consumer; a closed session whose
        last such allocation this was releases its context now."""
        with _EXPORT_LOCK:
            self._pending_frees -= 1
            last = self._pending_frees == 0 and self._closed
        if last:
            self._release_context([])

    # -- DLPack export ---------------------------------------------------------------------------
    def _dlpack_device(self) -> tuple[int, int]:
        if self.sycl_queue is None:
            raise BufferError(
                "DLPack export needs a session over a SYCL context (its consumers find memory through "
                "SYCL): this session made its own context"
            )
        return _foreign.KDL_ONEAPI, int(self.sycl_queue.sycl_device.get_device_id())

    def _export(self, owner: USMAllocation, address: int, dtype: Any, shape: tuple[int, ...], dl_device: Any,
                copy: Any) -> Any:  # fmt: skip
        device = self._dlpack_device()
        if copy:
            raise BufferError("xpukit exports its memory without a copy only (copy=True asked for one)")
        if dl_device is not None and tuple(int(x) for x in dl_device) != device:
            raise BufferError(f"xpukit memory lives on DLPack device {device}, not {tuple(dl_device)}")
        # The consumer may read on any queue: everything this session queued is finished first.
        self.synchronize()
        return _foreign.export_dlpack(owner, address, dtype, tuple(int(d) for d in shape), device[1])

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

# The seam: the attribute names the compiled launcher reads (declared in xpukit.runtime.ur.seam), and
# the kit's memory types, whose addresses it reads straight from the instance.
_launcher.bind(seam.table(seam.LAUNCHER_READS), USMAllocation, DeviceArray)
