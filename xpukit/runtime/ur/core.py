"""A small Pythonic layer over the raw binding: the session (ownership, address checks); the device
it opens is found by :mod:`xpukit.runtime.ur.discovery`, the objects it owns are in
:mod:`xpukit.runtime.ur.objects`, memory and devices of other runtimes meet it in
:mod:`xpukit.runtime.ur.interop`.

Every object owns one UR handle and releases it in ``close()`` (idempotent) or on leaving its
``with`` block. A session owns everything created through it and closes what is still open
when it closes, newest first, after finishing its queue. Nothing waits for the garbage
collector; using a closed object raises :class:`~xpukit.runtime.ur.errors.ClosedError`.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Sequence
from ctypes import c_void_p
from typing import Any

from xpukit.runtime.ur import _api, discovery, seam
from xpukit.runtime.ur import launcher as _launcher
from xpukit.runtime.ur.discovery import DEVICE_CHOICES, DeviceInfo
from xpukit.runtime.ur.errors import BadDeviceRequest, ClosedError, UrError, error_class
from xpukit.runtime.ur.interop import memory as _memory
from xpukit.runtime.ur.interop import sycl as _sycl
from xpukit.runtime.ur.interop.state import ForeignState
from xpukit.runtime.ur.loader import load
from xpukit.runtime.ur.objects import _EXPORT_LOCK, DeviceArray, Program, Queue, Resource, USMAllocation
from xpukit.runtime.ur.usm import UsmLedger

log = logging.getLogger("xpukit.runtime.ur")


class Session:
    """A UR context and queue on one device.

    ``device``: ``"auto"`` (GPU through Level Zero, else the CPU device, logged), ``"gpu"`` or
    ``"cpu"``. ``loader``: explicit loader path (else ``XPUKIT_UR_LOADER``, oneAPI, pip).
    """

    def __init__(
        self, device: str | _sycl.NativeHandles = "auto", loader: str | os.PathLike[str] | None = None
    ) -> None:
        """``device``: a request (see the class), or another runtime's native handles
        (:meth:`from_native`, :meth:`from_sycl` make them)."""
        native = device if isinstance(device, _sycl.NativeHandles) else None
        if native is None and device not in DEVICE_CHOICES:
            raise BadDeviceRequest(f"unknown device request {device!r}", f"use one of: {', '.join(DEVICE_CHOICES)}")
        self._children: dict[int, Resource] = {}
        # Its USM memory; ``allocations`` is the live ranges every pointer argument is checked
        # against (read on every launch, by the compiled dispatch too).
        self.usm = UsmLedger()
        self.allocations = self.usm.table
        # A plain attribute, not a property: every launch reads it (the compiled dispatch too).
        self.closed = False
        self._device_wait = True  # urDeviceWaitExp, where the release exports it and the adapter has it
        self._adapters: list[int] = []
        self.context_handle: Any = None  # the UR context and device (what the objects are created on)
        self.device_handle: Any = None
        self.note = ""
        # Sessions over someone else's device (from_native, from_sycl): the SYCL queue shared with
        # the session (in-order), foreign memory lent for launches, allocations freed by their last DLPack consumer.
        self.sycl_queue: Any = None
        self.foreign = ForeignState(self)
        try:
            self.lib = load(loader)
        except BaseException:
            if native is not None:
                _sycl.release_opencl(native)
            raise
        _SESSIONS.add(self)
        try:
            self._adapters = discovery.adapters(self.lib)
            if native is None:
                opened, queue = discovery.open_device(self.lib, str(device), self._adapters), 0
            else:
                opened, queue = discovery.open_native(self.lib, native, self._adapters)
            self.device_handle, self.context_handle, self.device = opened.device, opened.context, opened.info
            if opened.note:
                self.note = opened.note
                log.warning("xpukit.runtime.ur: %s", self.note)
            self.queue = Queue(self, adopted=queue or None)  # the native queue, else a new in-order one
        except BaseException:
            self.close()
            raise

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
        return cls(_sycl.NativeHandles(backend, context, device, queue, queue_desc, owned), loader)

    @classmethod
    def from_sycl(cls, queue: Any, loader: str | os.PathLike[str] | None = None) -> Session:
        """A session sharing a SYCL queue's context and device (a ``dpctl.SyclQueue``, or a dpnp/dpctl
        array's queue). Launches go to an in-order SYCL queue (``session.sycl_queue``): the queue
        itself when it is in-order, else a new in-order queue on its context and device. A launch
        with foreign memory waits for the producers' queues first and is handed back to SYCL after
        (xpukit.runtime.ur.interop.state), so out-of-order queues and SYCL host tasks never race it."""
        shared = _sycl.in_order_queue(_sycl.sycl_queue_of(queue))
        session = cls(_sycl.sycl_native_handles(shared), loader)
        session.sycl_queue = shared
        return session

    # -- ownership -------------------------------------------------------------------------------
    def adopt(self, res: Resource) -> None:
        """Own ``res`` (every object made through the session): closed with it, newest first."""
        self.check_open()
        self._children[id(res)] = res

    def owned(self) -> list[Resource]:
        """The open objects this session owns (and closes with it), oldest first."""
        return list(self._children.values())

    def disown(self, res: Resource) -> None:
        """``res`` was closed: the session no longer closes it."""
        self._children.pop(id(res), None)

    def free_usm(self, ptr: int, deferred: bool = False) -> None:
        """``urUSMFree`` on this session's context. ``deferred``: a free put off while a DLPack consumer
        held the memory (``usm.deferred``); the last one of a closed session releases its context."""
        self.lib.urUSMFree(self.context_handle, c_void_p(ptr))
        if deferred:
            with _EXPORT_LOCK:
                self.usm.deferred -= 1
                last = self.usm.deferred == 0 and self.closed
            if last:
                self._release_context([])

    @property
    def usm_generation(self) -> int:
        """Counts USM frees: launchers set pointer arguments again after one."""
        return self.allocations.generation

    def is_usm_address(self, value: int) -> bool:
        """Whether ``value`` points into a live USM allocation of this session.

        Triton types a small int as i32; an address must stay 64-bit even where the allocator
        hands out low addresses (Intel's CPU runtime under a non-PIE python, e.g. Debian's).
        """
        return self.usm.holds(value)

    def explain_address(self, value: Any) -> str:
        """Why ``value`` is not a usable pointer on this session (for argument errors)."""
        if isinstance(value, USMAllocation | DeviceArray) and value.closed:
            return "its allocation was freed (closed)"
        return self.usm.explain(value, [o.usm for o in list(_SESSIONS) if o is not self and not o.closed])

    def check_open(self) -> None:
        """Raise the kit's ClosedError once the session has closed."""
        if self.closed:
            raise ClosedError("session used after close()", "open a new Session")

    # -- resources -------------------------------------------------------------------------------
    def alloc(self, nbytes: int, kind: str = "device") -> USMAllocation:
        self.check_open()
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
        self.check_open()
        return Program(self, spirv, "il", options)

    def program_from_binary(self, binary: bytes, options: str = "") -> Program:
        self.check_open()
        return Program(self, binary, "binary", options)

    def finish(self) -> None:
        """Wait for the session's default queue (urQueueFinish), and let go of the producers of
        the foreign launches it ran."""
        self.check_open()
        self.queue.finish()
        if self.foreign.inflight:
            self.foreign.settle(finished=True)

    def new_queue(self, profiling: bool = False) -> Queue:
        """Another in-order queue on this session's device (owned and finished by the session)."""
        self.check_open()
        return Queue(self, profiling=profiling)

    def drain_queues(self) -> None:
        """Finish every queue this session owns."""
        for res in list(self._children.values()):
            if isinstance(res, Queue) and not res.closed:
                res.finish()

    def synchronize(self) -> None:
        """Device-wide wait: ``urDeviceWaitExp`` where the release and the adapter have it (2026.0+;
        the OpenCL adapter answers UNSUPPORTED_FEATURE), else finish every queue this session owns
        (every command xpukit can have submitted on this device)."""
        self.check_open()
        if self.lib.has_device_wait and self._device_wait:
            code = self.lib.raw.urDeviceWaitExp(self.device_handle)
            if code == 0:
                return
            if code != _api.RESULT_CODES["UR_RESULT_ERROR_UNSUPPORTED_FEATURE"]:
                raise error_class(code)("urDeviceWaitExp")
            self._device_wait = False  # exported, but not by this adapter (OpenCL): finish the queues
        self.drain_queues()

    def close(self) -> None:
        """Finish the queue, release everything still open (newest first), then the context."""
        if self.closed:
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
        self.closed = True
        with _EXPORT_LOCK:
            deferred = self.usm.deferred > 0
        if not deferred:  # else the last DLPack consumer to let go releases them (free_usm, deferred)
            self._release_context(errors)
        if errors:
            raise errors[0]

    def _release_context(self, errors: list[BaseException]) -> None:
        if self.context_handle is not None:
            try:
                self.lib.urContextRelease(c_void_p(self.context_handle))
            except UrError as exc:
                errors.append(exc)
            self.context_handle = None
        for a in self._adapters:
            try:
                self.lib.urAdapterRelease(c_void_p(a))
            except UrError as exc:
                errors.append(exc)
        self._adapters = []
        self.sycl_queue = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return "<Session closed>"
        d = self.device
        return f"<Session {d.name} [{d.type}, {d.backend}] UR {d.ur_release}>"


# Every open session, for telling "another session's memory" from "unknown" in argument errors.
_SESSIONS: weakref.WeakSet[Session] = weakref.WeakSet()

# The seam: the attribute names the compiled launcher reads (declared in xpukit.runtime.ur.seam), and
# the kit's memory types, whose addresses it reads straight from the instance.
_launcher.bind(seam.table(seam.LAUNCHER_READS), USMAllocation, DeviceArray)
# The classifier's "the kit's own memory" (the interop floor sits below the objects).
_memory.bind_kit_types(USMAllocation, DeviceArray)

__all__ = ["DEVICE_CHOICES", "DeviceInfo", "Session"]
