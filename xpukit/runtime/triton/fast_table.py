"""The compiled-launch table: Triton's ``JITFunction.run`` short-circuited for a call seen before,
and ``kernel[grid]`` without Triton's lambda (both installed by :func:`activate`)."""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Callable
from typing import Any

from xpukit.runtime.triton import dispatch as compiled_dispatch
from xpukit.runtime.triton.dispatch import fast_key
from xpukit.runtime.triton.driver import TritonRun, URFunction
from xpukit.runtime.triton.launch import BoundKernel, padded_grid
from xpukit.runtime.triton.pointer_params import pointer_params
from xpukit.runtime.triton.seam import Hit
from xpukit.runtime.triton.state import CURRENT
from xpukit.runtime.triton.tritonc import COMPILE_LOCK
from xpukit.runtime.ur.core import Session
from xpukit.runtime.ur.errors import KernelArgumentError
from xpukit.runtime.ur.interop.memory import ARG_KINDS, memory_kind
from xpukit.runtime.ur.objects import USMAllocation

# Whose memory each argument is (xpukit.runtime.ur.interop.memory): asked once per argument type,
# read from its cache on every launch.
_ARG_KIND = ARG_KINDS
_arg_kind = memory_kind


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
        # What kernel[grid] reads (the Dispatch, in C or its Python twin): (table key, fast key) ->
        # Hit (xpukit.runtime.triton.seam), the last session recorded; another session's call takes
        # the Python door, which finds its own.
        self.hits: dict[tuple, Hit] = {}
        # told to forget what they matched when an entry is recorded
        self.dispatchers: list[compiled_dispatch.KernelDispatch] = []
        # Positions of integer parameters the kernel has turned into pointers in a variant seen so
        # far: an int there must be a live address (else Triton would type a stale small address
        # as i32 and fail deep in its compiler).
        self.address_params: set[int] = set()
        # What the kernel's source says (xpukit.runtime.triton.pointer_params): checked before compiling.
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
                    "pass a DeviceArray (xpukit.runtime.triton.from_numpy or empty), or cast an address "
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
        run = kernel.run
        function = getattr(kernel, "function", None)
        if not isinstance(run, TritonRun) or not isinstance(function, URFunction):
            return
        # The compiled kernel's own parameters: Triton also makes an int equal to 1 a constexpr.
        idx = run.user_index
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
                index = None if tuple(idx) == tuple(range(len(args))) else tuple(idx)
                self.hits[(table_key, key)] = Hit(session, bound.submit, index, kernel, entry)
                for d in self.dispatchers:
                    d.forget()


class PyDispatch:
    """The Python twin of ``_xpukit_dispatch.Dispatch`` (used when the launcher is not compiled,
    and by the parity tests): ``kernel[grid](*args)`` for a call the table has seen goes straight
    to the recorded kernel's launch door (``BoundKernel.submit``); every other case (no session,
    a closed one, hooks, benchmarking, an unseen signature, another session's entry, a bad grid)
    is Triton's ``run`` as the kit wrapped it, which checks, compiles, records and launches."""

    def __init__(self, fn: Any, hits: dict, modes: bytes, current: Any, compiled_kernel: Any) -> None:
        self.fn, self.hits, self.modes, self.current, self.ck = fn, hits, modes, current, compiled_kernel

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self.call, grid)

    def forget(self) -> None:
        """The compiled Dispatch drops the last key it matched; the twin keeps none."""

    def _python_door(self, grid: Any, args: tuple, kwargs: dict) -> Any:
        return self.fn.run(*args, grid=grid, warmup=False, **kwargs)

    def call(self, grid: Any, *args: Any, **kwargs: Any) -> Any:
        act = self.current.get()
        if act is None:
            return self._python_door(grid, args, kwargs)
        session, stream = act.session, act.stream
        if (
            session.closed
            or stream.events is not None
            or self.fn.pre_run_hooks
            or self.ck.launch_enter_hook is not None
            or self.ck.launch_exit_hook is not None
            or self.fn.used_global_vals
        ):
            return self._python_door(grid, args, kwargs)
        key = fast_key(args, kwargs or None, self.modes, session.allocations)
        hit = self.hits.get((act.table_key, key)) if key is not None else None
        if hit is None or hit[0] is not session:
            return self._python_door(grid, args, kwargs)
        _session, submit, index, kernel, entry = hit
        g = grid
        if not isinstance(g, tuple | list) and callable(g):
            g = g(entry.meta(args, kwargs))
        if not isinstance(g, tuple | list) or not 1 <= len(g) <= 3:
            return self._python_door(grid, args, kwargs)
        queue = stream.queue.raw_handle
        if queue is None:
            return self._python_door(grid, args, kwargs)
        submit(queue, *padded_grid(g), args if index is None else tuple(args[i] for i in index))
        act.driver.stats.launches += 1
        return kernel


def dispatch_for(fn: Any, compiled: bool | None = None) -> compiled_dispatch.KernelDispatch:
    """The kernel's Dispatch (compiled when the launcher is), made on first use and kept on it."""
    name = "_xpukit_dispatch" if compiled is None else f"_xpukit_dispatch_{int(compiled)}"
    d = fn.__dict__.get(name)
    if d is None:
        from triton.compiler import CompiledKernel

        table = fn.__dict__.get("_xpukit_fast")
        if table is None:
            table = fn.__dict__.setdefault("_xpukit_fast", _FastTable(fn))
        use_c = compiled_dispatch.COMPILED if compiled is None else compiled
        cls = compiled_dispatch.Dispatch if use_c else PyDispatch
        if cls is None:
            raise RuntimeError("the compiled dispatch (_xpukit_dispatch) is not loaded: ask for the Python one")
        with table.lock:
            d = fn.__dict__.get(name)
            if d is None:
                d = fn.__dict__.setdefault(name, cls(fn, table.hits, table.modes, CURRENT, CompiledKernel))
                table.dispatchers.append(d)
    return d


def getitem_dispatch(self: Any, grid: Any) -> Callable[..., Any]:
    """``kernel[grid]``: the kernel's Dispatch bound to the grid (Triton's own returns a lambda
    around ``run``, which costs Triton's and the kit's Python on every launch)."""
    d = self.__dict__.get("_xpukit_dispatch")
    return (d if d is not None else dispatch_for(self))[grid]


def make_fast_run(original: Callable[..., Any]) -> Callable[..., Any]:
    """JITFunction.run with a per-kernel table of compiled launches: a call whose arguments give a
    key seen before (same device, same specialization, same constexprs and options) skips
    Triton's binder, cache lookup and CompiledKernel.run and goes straight to the kernel's checked launcher.
    Anything else (first call, hooks, warmup, benchmarking, an argument the key does not cover)
    runs Triton's own code, serialised by the compile lock."""
    from triton.compiler import CompiledKernel

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        act = CURRENT.get()
        if act is not None and not act.session.closed:
            kinds = _ARG_KIND
            for value in (*args, *kwargs.values()):
                k = kinds.get(type(value))
                if k or (k is None and _arg_kind(type(value))):
                    # foreign memory (dpnp/dpctl arrays, SUAI, DLPack): the session's adapter resolves
                    # it once (lease, ordering before, hand-back after) around the kit's own launch
                    launch = functools.partial(inner, self, act, grid, warmup)
                    return act.session.foreign.run(args, kwargs, warmup, launch)
        return inner(self, act, grid, warmup, args, kwargs)

    def inner(self: Any, act: Any, grid: Any, warmup: bool, args: tuple, kwargs: dict) -> Any:
        if (
            act is None
            or act.session.closed  # Triton's path raises the kit's error for it
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
        entry: Any = table.entries.get((act.table_key, key)) if key is not None else None
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
        hit = table.hits.get((act.table_key, key))
        if hit is not None and hit.session is not session and hit.session.closed:
            # kernel[grid]'s hit names a session closed since: this one takes it over (else every
            # call of this signature would come through here)
            table.record(act.table_key, key, entry.kernel, args, kwargs, session)
        if callable(grid):
            grid = grid(entry.meta(args, kwargs))
        queue = act.stream.queue.raw_handle
        if queue is None:  # closed: its .handle raises the kit's error
            queue = act.stream.queue.handle
        bound.submit(queue, *padded_grid(grid), entry.pick(args))
        act.driver.stats.launches += 1
        return entry.kernel

    run._xpukit_original = original  # type: ignore[attr-defined]
    return run
