"""A session's foreign memory: what ``kernel[grid]`` does with dpnp/dpctl arrays,
``__sycl_usm_array_interface__`` objects and DLPack producers (:mod:`.memory` says which an
argument is, :mod:`.arrays` reads their protocols and asks UR about their pointers).

* **Checked once per array object.** A dpctl/dpnp ``usm_ndarray`` cannot change its data pointer,
  element type, extent or queue, and its allocation lives while it does: its UR check
  (``urUSMGetMemAllocInfo``), its ``__sycl_usm_array_interface__`` and the lending of its
  allocation to the session's table are done on its first launch and held until it is collected (a
  weak reference takes the lending back). A dpnp array is resolved to its ``usm_ndarray`` on every
  launch (dpnp may swap it). Any other producer (SUAI objects, DLPack) is checked and lent per launch.
* **Submitted to SYCL when SYCL can order it.** A launch whose dpnp/dpctl arrays all live on the
  session's own in-order SYCL queue and are held goes, from the compiled dispatch
  (``triton/_dispatch_foreign.c``), to SYCL itself: the same kernel built by SYCL once per kernel
  and session (:meth:`ForeignState.attach`), submitted with ``DPCTLQueue_SubmitNDRange`` on that
  queue, which orders it after every SYCL command before it and before every one after it, host
  tasks included; nothing is waited for and no barrier is needed. Its arguments are held in
  ``inflight`` until SYCL reports the queue empty.
* **Otherwise ordering is the kit's** (docs/ur.md, "dpnp and foreign memory"). Before a launch every
  producer's SYCL queue and the session's SYCL queue are waited for unless SYCL reports it empty
  (SYCL runs some commands as host tasks the native queue never sees: oneMKL's CPU gemm under
  ``dpnp.matmul``). After it, the
  launch is handed back to SYCL instead of finished: a SYCL barrier on the session's in-order SYCL
  queue (which shares the session's native queue, so the barrier follows the kernel) becomes that
  queue's last event, and the producers' other queues get it in their dpctl order manager, which
  every dpnp operation waits for. The producers stay referenced until that barrier has completed.
"""

from __future__ import annotations

import functools
import threading
import weakref
from ctypes import c_void_p
from typing import Any

from xpukit.runtime.ur.interop.arrays import ForeignPointer, alloc_info, bad_argument, view_of
from xpukit.runtime.ur.interop.memory import ARG_KINDS, HELD, WRAPPED, memory_kind
from xpukit.runtime.ur.interop.sycl import dpctl_submit_functions, sycl_queue_empty


class Lease:
    """Foreign memory one launch uses: the checked pointer, the producer's SYCL queue, and whether
    its allocation was lent for this launch only (returned by :meth:`ForeignState.release`)."""

    __slots__ = ("per_launch", "pointer", "queue", "sycl_pointer")

    def __init__(self, pointer: ForeignPointer, queue: Any, per_launch: bool, on_session: bool = False) -> None:
        self.pointer = pointer
        self.queue = queue
        self.per_launch = per_launch
        # on_session: the producer's queue is the session's SYCL queue, so SYCL can order the launch;
        # the compiled dispatch puts this pointer in the array's place (one read per array and launch)
        self.sycl_pointer = pointer if on_session else None


class ForeignState:
    """A session's foreign memory: the per-array checks held, the ranges lent to its allocation
    table (counted per allocation, so views of one allocation share an entry), and the launches
    handed to SYCL whose producers are still referenced."""

    HANDOFF_LIMIT = 256  # launches in flight before the session's queue is finished (their producers held)
    # slots: the compiled dispatch reads fast, kinds, held_version and inflight on every dpnp launch, at their offsets
    __slots__ = (
        "_empty", "after_barrier", "door_launches", "fast", "finished_launches", "handoff", "held", "held_version",
        "inflight", "kinds", "lent", "lock", "session", "settled_launches", "sycl_kernels",
    )  # fmt: skip

    def __init__(self, session: Any) -> None:
        self.session = session
        self.kinds = ARG_KINDS  # which argument types are foreign arrays (the classifier's cache)
        self.lock = threading.RLock()  # a collected array's weak reference may release inside a locked region
        self.lent: dict[int, int] = {}  # allocation base -> holders (bases the kit did not allocate)
        # id(usm_ndarray) -> (a weak reference whose callback gives the lending back, its lease)
        self.held: dict[int, tuple[weakref.ref, Lease]] = {}
        # bumped on every change to held: the compiled dispatch reuses the pointers it read from held
        # for a kernel's last launch while this is unchanged (and each array is still the one it read)
        self.held_version = 0
        self.inflight: list[Any] = []  # the producers of launches handed to SYCL, not yet known to have run
        self.settled_launches = 0  # launches let go of from inflight (known to have run)
        self.finished_launches = 0  # launches the door finished before returning (handoff off)
        self.door_launches = 0  # of those, the ones the Python door ordered (the rest were submitted to SYCL)
        self.handoff = True  # False: every launch finished before it returns (the probe's control)
        self.after_barrier = True  # False: no SYCL barrier after a launch (the probe's control, unsafe)
        self._empty: Any = None  # sycl::queue::ext_oneapi_empty, once libsycl is needed
        # Launches of held arrays on the session's SYCL queue submitted to SYCL (attach); Session.from_sycl
        # turns it on, the probe's controls off. sycl_kernels: (name, SPIR-V, options) -> dpctl's
        # program and kernel, or the reason SYCL could not build it (those launches take the Python door).
        self.fast = False
        self.sycl_kernels: dict[tuple[str, bytes, str], Any] = {}

    @property
    def launches(self) -> int:
        """Launches with foreign memory so far: each is in ``inflight`` until it is known to have
        run (counted, not bumped: the compiled dispatch only appends)."""
        return self.settled_launches + self.finished_launches + len(self.inflight)

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
        on_session = queue is not None and sq is not None and (queue is sq or queue == sq)
        pointer = ForeignPointer(view.data, view.dtype, view.keep, queue, 0, info.size)
        with self.lock:
            if not (s.allocations.find(info.base) is not None and info.base not in self.lent):
                if info.base not in self.lent:
                    s.allocations.add(info.base, info.size)
                self.lent[info.base] = self.lent.get(info.base, 0) + 1
                pointer.base = info.base  # lent (0: the kit's own allocation, a DLPack round trip)
        return Lease(pointer, queue, True, on_session)

    def lease(self, obj: Any) -> Lease:
        """``obj``'s lease: held per usm_ndarray object (checked on its first launch), else checked now."""
        kind = ARG_KINDS.get(type(obj)) or memory_kind(type(obj))
        if kind == WRAPPED:
            obj = obj._array_obj  # reach-in: dpnp's usm_ndarray (its get_array() is a call more per launch)
            kind = ARG_KINDS.get(type(obj)) or memory_kind(type(obj))
        if kind != HELD:
            return self.check(obj)
        held = self.held.get(id(obj))
        if held is not None and held[0]() is obj:
            return held[1]
        lease = self.check(obj)
        lease.per_launch = False
        lease.pointer.producer = None  # the cache must not keep the array alive: each launch holds it
        key = id(obj)
        with self.lock:
            self.held[key] = (weakref.ref(obj, functools.partial(self._collected, key)), lease)
            self.held_version += 1
        return lease

    def _collected(self, key: int, _ref: Any = None) -> None:
        with self.lock:
            held = self.held.pop(key, None)
            if held is not None:
                self.held_version += 1
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

    # -- launches submitted to SYCL ------------------------------------------------------------------
    def attach(self, launcher: Any, name: str, spirv: bytes, options: str) -> bool:
        """Give ``launcher`` the same kernel built by SYCL for the session's SYCL queue (once per
        kernel and session; dpctl's ``create_program_from_spirv``), so launches of held arrays on
        that queue are submitted to SYCL. False (and the reason kept in ``sycl_kernels``) when SYCL
        cannot build it: those launches take the Python door, ordered there."""
        sq = self.session.sycl_queue
        if not self.fast or sq is None:
            return False
        key = (name, spirv, options)
        built = self.sycl_kernels.get(key)
        if built is None:
            try:
                import dpctl.program

                program = dpctl.program.create_program_from_spirv(sq, spirv, options)
                built = (program, program.get_sycl_kernel(name))
            except Exception as e:  # any failure: the door's ordered UR launch instead
                built = f"{type(e).__name__}: {e}"
            self.sycl_kernels[key] = built
        if isinstance(built, str):
            return False
        if self._empty is None:
            self._empty = sycl_queue_empty()
        submit, delete = dpctl_submit_functions()
        program, kernel = built
        launcher.via_sycl(kernel.addressof_ref(), sq.addressof_ref(), submit, delete, (program, kernel, sq))
        return True

    def wait_sycl(self) -> None:
        """Wait for the launches submitted to SYCL (a SYCL queue's wait; the native queue's finish
        does not see a launch SYCL still holds back behind a host task)."""
        sq = self.session.sycl_queue
        if self.fast and sq is not None:
            sq.wait()

    # -- ordering -----------------------------------------------------------------------------------
    def before(self, queues: list[Any]) -> None:
        """Every producer's queue and the session's SYCL queue waited for (host tasks too), unless
        SYCL says everything submitted to it has completed (``ext_oneapi_empty``: no wait needed)."""
        sq = self.session.sycl_queue
        empty = self._empty
        if empty is None:
            empty = self._empty = sycl_queue_empty()
        for q in queues:
            if q is not sq and not empty(q.addressof_ref()):
                q.wait()
        if sq is not None and not empty(sq.addressof_ref()):
            sq.wait()

    def after(self, queues: list[Any], producers: Any) -> None:
        """The launch handed back to SYCL (or finished, ``handoff`` off): later SYCL work on the
        session's queue and the producers' queues follows it; the producers are held until it ran."""
        self.door_launches += 1
        sq = self.session.sycl_queue
        if not self.handoff or sq is None:
            self.session.queue.finish()
            self.finished_launches += 1
            return
        inflight = self.inflight
        inflight.append(producers)
        if self.after_barrier:
            event = sq.submit_barrier()  # on the in-order queue sharing the native one: after the kernel
            for q in queues:
                if q is not sq:
                    from dpctl.utils import SequentialOrderManager

                    SequentialOrderManager[q].add_event_pair(event, event)
        if len(inflight) % 32 == 0:  # every 32nd held launch (SYCL may not yet say empty)
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
                sq = self.session.sycl_queue
                if self.after_barrier and sq is not None and self._empty is not None:
                    finished = self._empty(sq.addressof_ref())
                if not finished and len(inflight) > self.HANDOFF_LIMIT:
                    self.session.queue.finish()
                    self.wait_sycl()
                    finished = True
            else:
                self.wait_sycl()  # the native queue was finished; SYCL may still hold a launch back
            if finished:
                self._let_go(known)

    def _let_go(self, known: int) -> None:
        """The first ``known`` launches of ``inflight`` have run: their producers are let go of."""
        del self.inflight[:known]
        self.settled_launches += known

    def close(self) -> None:
        """The session closes (its queue finished): nothing is held or lent any more."""
        if self.inflight:
            self.wait_sycl()
        with self.lock:
            self._let_go(len(self.inflight))
            self.held.clear()  # a weak reference dropped never calls back; one a kernel's memo holds finds nothing
            self.held_version += 1
            self.lent.clear()


__all__ = ["ForeignState", "Lease"]
