"""A session's foreign memory: what ``kernel[grid]`` does with dpnp/dpctl arrays,
``__sycl_usm_array_interface__`` objects and DLPack producers (:mod:`.memory` says which an
argument is, :mod:`.arrays` reads their protocols and asks UR about their pointers). Its one entry
is :meth:`ForeignState.run`, the adapter the kit's launch door calls with a call's arguments; below
it the kit launches its own memory only.

* **Resolved once per call, before the dispatch.** Each foreign argument is replaced by its checked
  typed pointer (:class:`~.arrays.ForeignPointer`), lent to the session's allocation table, so the
  launch that follows is the ordinary one of the kit's own memory: the compiled dispatch and the
  checked launcher know nothing else. A dpctl/dpnp ``usm_ndarray`` cannot change its data pointer,
  element type, extent or queue, and its allocation lives while it does: its UR check
  (``urUSMGetMemAllocInfo``), its ``__sycl_usm_array_interface__`` and the lending are done on its
  first launch and held until it is collected (a weak reference takes the lending back). A dpnp
  array is resolved to its ``usm_ndarray`` on every launch (dpnp may swap it). Any other producer
  (SUAI objects, DLPack) is checked and lent per launch.
* **Ordered with SYCL around the launch** (docs/ur.md, "dpnp and foreign memory"). Before it every
  producer's SYCL queue and the session's SYCL queue are waited for unless SYCL reports it empty
  (SYCL runs some commands as host tasks the native queue never sees: oneMKL's CPU gemm under
  ``dpnp.matmul``). After it the launch is handed back to SYCL instead of finished: a SYCL barrier
  on the session's in-order SYCL queue (which shares the session's native queue, so the barrier
  follows the kernel) becomes that queue's last event, and the producers' other queues get it in
  their dpctl order manager, which every dpnp operation waits for. The producers stay referenced
  until the kit knows the launch has run.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from ctypes import c_void_p
from typing import Any, Protocol

from xpukit.runtime.ur.interop.arrays import ForeignPointer, alloc_info, bad_argument, view_of
from xpukit.runtime.ur.interop.memory import ARG_KINDS, HELD, WRAPPED, memory_kind
from xpukit.runtime.ur.interop.sycl import sycl_queue_empty
from xpukit.runtime.ur.launcher import AllocationTable
from xpukit.runtime.ur.loader import UrLibrary


class _Finishing(Protocol):
    def finish(self) -> None: ...


class ForeignSession(Protocol):
    """What the foreign-memory state uses of its session (:class:`xpukit.runtime.ur.core.Session`,
    which is above this floor and so is named by this interface)."""

    @property
    def lib(self) -> UrLibrary: ...
    @property
    def context_handle(self) -> Any: ...
    @property
    def device_handle(self) -> Any: ...
    @property
    def closed(self) -> bool: ...
    @property
    def allocations(self) -> AllocationTable: ...
    @property
    def queue(self) -> _Finishing: ...
    @property
    def sycl_queue(self) -> Any: ...  # a dpctl.SyclQueue, or None
    def check_open(self) -> None: ...


class Lease:
    """Foreign memory one launch uses: the checked pointer, the producer's SYCL queue when it is not
    the session's own (``other_queue``: waited for before a launch and told about it after; None:
    the session's queue, or unknown), and whether its allocation was lent for this launch only
    (returned by :meth:`ForeignState.release`)."""

    __slots__ = ("other_queue", "per_launch", "pointer")

    def __init__(self, pointer: ForeignPointer, other_queue: Any, per_launch: bool) -> None:
        self.pointer = pointer
        self.other_queue = other_queue
        self.per_launch = per_launch


class ForeignState:
    """A session's foreign memory: the per-array checks held, the ranges lent to its allocation
    table (counted per allocation, so views of one allocation share an entry), and the launches
    handed to SYCL whose producers are still referenced."""

    HANDOFF_LIMIT = 256  # launches in flight before the session's queue is finished (their producers held)
    SETTLE_EVERY = 32  # launches in flight between two questions to SYCL (is the session's queue empty?)
    __slots__ = (
        "_empty", "_sq_ref", "after_barrier", "finished_launches", "handoff", "held", "inflight", "lent", "lock",
        "session", "settled_launches",
    )  # fmt: skip

    def __init__(self, session: ForeignSession) -> None:
        self.session = session
        self.lock = threading.RLock()  # a collected array's weak reference may release inside a locked region
        self.lent: dict[int, int] = {}  # allocation base -> holders (bases the kit did not allocate)
        # id(usm_ndarray) -> (a weak reference whose callback gives the lending back, its lease)
        self.held: dict[int, tuple[weakref.ref, Lease]] = {}
        self.inflight: list[Any] = []  # the producers of launches handed to SYCL, not yet known to have run
        self.settled_launches = 0  # launches let go of from inflight (known to have run)
        self.finished_launches = 0  # launches finished before they returned (handoff off, or no SYCL queue)
        self.handoff = True  # False: every launch finished before it returns (the probe's control)
        self.after_barrier = True  # False: no SYCL barrier after a launch (the probe's control, unsafe)
        self._empty: Any = None  # sycl::queue::ext_oneapi_empty, once libsycl is needed (_bind_sycl)
        self._sq_ref = 0  # the session's SYCL queue as libsycl takes it (its addressof_ref(); 0: none)

    @property
    def launches(self) -> int:
        """Launches with foreign memory so far (each is in ``inflight`` until it is known to have run)."""
        return self.settled_launches + self.finished_launches + len(self.inflight)

    # -- the adapter -----------------------------------------------------------------------------
    def run(self, args: tuple, kwargs: dict, warmup: bool, launch: Callable[[tuple, dict], Any]) -> Any:
        """One launch with foreign arguments, the one way such a launch goes: each foreign argument
        resolved to its lease's typed pointer (checked and lent on an array object's first launch,
        held after), the producers' queues waited for (:meth:`before`), ``launch(args, kwargs)``
        called with the pointers in their places (the kit's own launch: its memory only), then the
        launch handed back to SYCL with its producers held until it has run (:meth:`after`).
        ``warmup``: Triton compiles only, nothing is ordered. What was lent for this launch only is
        taken back whatever happens."""
        held, kinds = self.held, ARG_KINDS
        new_args = list(args)
        producers: list[Any] = []  # what owns the memory, held until the launch has run
        lent: list[Lease] = []  # leases lent for this launch only
        others: dict[int, Any] = {}  # the producers' SYCL queues other than the session's, once each
        try:
            for i, value in enumerate(args):
                kind = kinds.get(type(value))
                if kind is None:
                    kind = memory_kind(type(value))
                if kind:
                    u = value._array_obj if kind == WRAPPED else value  # reach-in: dpnp's usm_ndarray, read per launch
                    h = held.get(id(u))
                    if h is not None and h[0]() is u and h[1].other_queue is None:
                        new_args[i] = h[1].pointer  # held, on the session's queue: the usual case, inline
                        producers.append(u)
                    else:
                        new_args[i] = self._resolve(u, lent, others, producers)
            for name, value in kwargs.items() if kwargs else ():  # keywords: rare, the general path
                kind = kinds.get(type(value))
                if kind is None:
                    kind = memory_kind(type(value))
                if kind:
                    u = value.get_array() if kind == WRAPPED else value
                    kwargs = {**kwargs, name: self._resolve(u, lent, others, producers)}
            if warmup:
                return launch(tuple(new_args), kwargs)
            self.before(others)
            result = launch(tuple(new_args), kwargs)
            self.after(others, producers)
            return result
        finally:
            if lent:
                self.release(lent)

    def _resolve(self, obj: Any, lent: list[Lease], others: dict[int, Any], producers: list[Any]) -> ForeignPointer:
        """A foreign argument's typed pointer on the adapter's general path: its lease (checked and
        lent now, or held), noted in ``lent`` (per launch), ``others`` (another queue) and
        ``producers`` (what the launch holds: the object, and a per-launch lease whose pointer holds
        a DLPack capsule)."""
        lease = self.lease(obj)
        producers.append(obj)
        if lease.per_launch:
            lent.append(lease)
            producers.append(lease)
        q = lease.other_queue
        if q is not None:
            others[id(q)] = q
        return lease.pointer

    # -- checks and lending ------------------------------------------------------------------------
    def check(self, obj: Any) -> Lease:
        """Check ``obj``'s memory through UR (this context's USM, in bounds, this device) and lend its
        allocation to the session's table (until :meth:`release`, or while ``obj`` lives if it is held)."""
        s = self.session
        s.check_open()
        view = view_of(obj, s.sycl_queue)
        if not view.data:
            raise bad_argument(obj, "its data pointer is null", "pass a live array")
        info = alloc_info(s.lib, c_void_p(s.context_handle), view.data)
        if info.kind == "unknown":
            raise bad_argument(
                obj,
                f"{view.data:#x} is not USM memory of this session's context (another SYCL context, host "
                "memory, or freed)",
                "open the session over the array's own queue: ur.Session.from_sycl(array.sycl_queue), or copy "
                "the array into a queue of this session's context (dpnp.asarray(a, sycl_queue=session.sycl_queue))",
            )
        if view.data + view.low < info.base or view.data + view.high > info.base + info.size:
            raise bad_argument(
                obj,
                f"its elements [{view.data + view.low:#x}, {view.data + view.high:#x}) overrun its allocation "
                f"[{info.base:#x}, {info.base + info.size:#x})",
                "pass an array whose shape and strides lie inside its memory",
            )
        if info.kind != "host" and info.device and info.device != s.device_handle:
            raise bad_argument(
                obj,
                f"its {info.kind} USM belongs to another device of the context",
                "pass memory of the session's device",
            )
        queue = view.queue if view.queue is not None and hasattr(view.queue, "wait") else None
        sq = s.sycl_queue
        other = None if queue is None or (sq is not None and (queue is sq or queue == sq)) else queue
        pointer = ForeignPointer(view.data, view.dtype, view.keep, queue, 0, info.size)
        with self.lock:
            if not (s.allocations.find(info.base) is not None and info.base not in self.lent):
                if info.base not in self.lent:
                    s.allocations.add(info.base, info.size)
                self.lent[info.base] = self.lent.get(info.base, 0) + 1
                pointer.base = info.base  # lent (0: the kit's own allocation, a DLPack round trip)
        return Lease(pointer, other, True)

    def lease(self, obj: Any) -> Lease:
        """``obj``'s lease: held per usm_ndarray object (checked on its first launch), else checked now
        (``obj``: a usm_ndarray or another producer; a dpnp array is resolved to its usm_ndarray first)."""
        if (ARG_KINDS.get(type(obj)) or memory_kind(type(obj))) != HELD:
            return self.check(obj)
        held = self.held.get(id(obj))
        if held is not None and held[0]() is obj:
            return held[1]
        lease = self.check(obj)
        lease.per_launch = False
        lease.pointer.producer = None  # the cache must not keep the array alive: each launch holds it
        key = id(obj)
        with self.lock:
            other = self.held.get(key)
            if other is not None and other[0]() is obj:  # another thread held it meanwhile: keep one
                self._give_back(lease.pointer.base)
                return other[1]
            self.held[key] = (weakref.ref(obj, functools.partial(self._collected, key)), lease)
        return lease

    def _collected(self, key: int, _ref: Any = None) -> None:
        with self.lock:
            held = self.held.pop(key, None)
            if held is not None:
                self._give_back(held[1].pointer.base)

    def _give_back(self, base: int) -> None:
        if base and base in self.lent:
            self.lent[base] -= 1
            if self.lent[base] == 0:
                del self.lent[base]
                if not self.session.closed:
                    self.session.allocations.remove(base)

    def release(self, leases: list[Lease]) -> None:
        """The launches using ``leases`` have been enqueued (or never were): take back what was lent
        for them only."""
        with self.lock:
            for lease in leases:
                if lease.per_launch:
                    self._give_back(lease.pointer.base)

    # -- ordering -----------------------------------------------------------------------------------
    def before(self, others: dict[int, Any]) -> None:
        """The producers' other queues and the session's SYCL queue waited for (host tasks too), each
        unless SYCL says everything submitted to it has completed (``ext_oneapi_empty``)."""
        empty = self._empty
        if empty is None:
            empty = self._bind_sycl()
        if others:
            for q in others.values():
                if not empty(q.addressof_ref()):
                    q.wait()
        if self._sq_ref and not empty(self._sq_ref):
            self.session.sycl_queue.wait()

    def _bind_sycl(self) -> Any:
        """libsycl's ``ext_oneapi_empty``, and the session's SYCL queue as it takes it (0: none)."""
        sq = self.session.sycl_queue
        self._sq_ref = sq.addressof_ref() if sq is not None else 0  # stable while the session holds sq
        self._empty = sycl_queue_empty()
        return self._empty

    def after(self, others: dict[int, Any], producers: list[Any]) -> None:
        """The launch handed back to SYCL (or finished, ``handoff`` off or no SYCL queue): later SYCL
        work on the session's queue and the producers' other queues follows it; the producers are
        held until it has run."""
        sq = self.session.sycl_queue
        if not self.handoff or sq is None:
            self.session.queue.finish()
            self.finished_launches += 1
            return
        if self.after_barrier:
            event = sq.submit_barrier()  # on the in-order queue sharing the native one: after the kernel
            if others:
                from dpctl.utils import SequentialOrderManager

                for q in others.values():
                    SequentialOrderManager[q].add_event_pair(event, event)
        # appended once its barrier is queued: settle() lets go of what it counts when that queue is empty
        inflight = self.inflight
        inflight.append(producers)
        if len(inflight) % self.SETTLE_EVERY == 0:  # not after every launch: SYCL may not yet say empty
            self.settle(finished=False)

    def settle(self, finished: bool = True) -> None:
        """Let go of the producers of launches that have run: all of them when the session's native
        queue was just finished, or when SYCL reports the session's queue empty (its last barrier,
        after every launch so far, has completed); beyond ``HANDOFF_LIMIT`` launches the native
        queue is finished first."""
        with self.lock:
            inflight = self.inflight
            known = len(inflight)  # a launch appended from now on (another thread's) stays held
            if not known:
                return
            if not finished:
                if self.after_barrier and self._sq_ref and self._empty is not None:
                    finished = self._empty(self._sq_ref)
                if not finished and len(inflight) > self.HANDOFF_LIMIT:
                    self.session.queue.finish()  # the launches are on the session's native queue
                    finished = True
            if finished:
                self._let_go(known)

    def _let_go(self, known: int) -> None:
        """The first ``known`` launches of ``inflight`` have run: their producers are let go of."""
        del self.inflight[:known]
        self.settled_launches += known

    def close(self) -> None:
        """The session closes (its queue finished): nothing is held or lent any more."""
        with self.lock:
            self._let_go(len(self.inflight))
            self.held.clear()  # a weak reference dropped never calls back
            self.lent.clear()
            self._sq_ref = 0  # the session lets go of its SYCL queue


__all__ = ["ForeignState", "Lease"]
