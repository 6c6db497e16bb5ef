"""Triton's driver protocol on Unified Runtime: :class:`URDriver` (device, stream, target,
binaries loaded through UR, benchmarking), :class:`TritonRun` (what Triton calls as
``CompiledKernel.run``, its ``launcher_cls``: every launch through the kernel's one launch door,
``BoundKernel.submit``), the process-wide default driver and the calling context's session."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import operator
import os
import statistics
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime.offline import spirv as spv
from xpukit.runtime.triton import kernel_cache
from xpukit.runtime.triton.bench import quantile, release_events, time_once
from xpukit.runtime.triton.launch import BoundKernel, CompiledArtifact, LaunchABI, ProgramCache, target_for_device
from xpukit.runtime.triton.state import CURRENT, Active, NoActiveSession, ZebinNeedsGpu
from xpukit.runtime.triton.tritonc import xpu_backend
from xpukit.runtime.ur.core import Session
from xpukit.runtime.ur.errors import ClosedError
from xpukit.runtime.ur.objects import DeviceArray, Event, Queue


class URFunction:
    """What ``load_binary`` returns as Triton's module/function: one kernel's SPIR-V, loaded lazily
    on each session it runs on (a compiled kernel is shared by every session on the same device)."""

    __slots__ = ("addresses", "artifact", "bound", "form", "lock", "name", "options", "parameters", "programs",
                 "sha256", "spirv")  # fmt: skip

    def __init__(self, name: str, spirv: bytes, options: str, form: str = "spirv") -> None:
        self.name = name
        self.spirv = spirv  # SPIR-V, or the zebin when form == "zebin"
        self.sha256 = hashlib.sha256(spirv).hexdigest()
        self.options = options
        self.form = form  # "spirv" | "zebin" (Triton's native stage: loaded as is, no driver JIT)
        # Integer parameters the kernel casts to pointers: checked like pointers at launch.
        self.addresses = spv.address_parameters(spirv, name) if form == "spirv" else frozenset()
        # The kernel's declared parameter count tells whether it takes a local-memory argument (#7606).
        self.parameters = spv.parameter_count(spirv, name) if form == "spirv" else None
        self.programs: dict[int, Any] = {}  # id(session) -> Program built by load_binary
        self.bound: dict[int, BoundKernel] = {}  # id(session) -> loaded kernel with its launcher
        self.artifact: CompiledArtifact | None = None  # made once, on the first session it runs on
        self.lock = threading.Lock()


class Stream:
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


class TritonRun:
    """Triton's ``launcher_cls``, called as ``CompiledKernel.run(gx, gy, gz, stream, function,
    packed_metadata, launch_metadata, enter_hook, exit_hook, *all_arguments)``; named for that
    role, since in xpukit "launcher" is only the kernel's checked argument launcher
    (``ur.launcher``). Triton's own path (first calls, hooks, benchmarking); repeated calls take
    the compiled-launch table and the Dispatch."""

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

    def _bound(self, function: URFunction, session: Session) -> BoundKernel:
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
            if program is None or program.closed or program.session is not session:
                program = self.driver.load_program(function, session)
            if function.artifact is None:  # the same for every session: made once
                abi = LaunchABI.from_metadata(
                    self.fn, self.signature, self.metadata, function.addresses, function.parameters
                )
                function.artifact = CompiledArtifact(
                    name=function.name,
                    spirv=function.spirv,
                    spirv_sha256=function.sha256,
                    metadata=self.metadata,
                    signature=self.signature,
                    constexprs=self.constexprs,
                    abi=abi,
                )
            bound = BoundKernel(session, function.artifact, program)
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
        if type(stream) is not Stream:
            raise NoActiveSession(
                f"Triton passed stream {stream!r:.60}, not an xpukit session",
                "launch inside `with xpukit.runtime.triton.activate(session):`",
            )
        session = stream.session
        if session.closed:
            raise ClosedError("the session of this launch is closed", "open a new Session and activate it")
        if not isinstance(function, URFunction):
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
        if stream.events is not None and handle:
            stream.events.append(Event(session, handle))
        self.driver.stats.launches += 1
        if exit_hook is not None:
            exit_hook(launch_metadata)


class _Utils:
    """``driver.utils``: what Triton's CompiledKernel and testing helpers call."""

    def __init__(self, driver: URDriver) -> None:
        self._driver = driver

    def load_binary(self, name: str, kernel: bytes, shared: int, build_flags: str, device: Any) -> tuple:
        return self._driver.load_binary(name, kernel, shared, build_flags, device)

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

    def launcher_cls(self, src: Any, metadata: Any) -> TritonRun:
        return TritonRun(self, src, metadata)

    def active(self) -> Active:
        """The calling context's activation (its session open), else the kit's NoActiveSession."""
        act = CURRENT.get()
        if act is None:
            raise NoActiveSession(
                "no xpukit session is active for this Triton launch in this thread",
                "wrap it in `with ur.Session(...) as s, xpukit.runtime.triton.activate(s):` in the same thread",
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
        return self.active().session

    def get_current_device(self) -> str:
        # A string key, never an int: Triton keys each JITFunction's compiled variants by device,
        # and an int could collide with Triton's own XPU driver's device 0 in the same process.
        return self.active().device_key

    def get_current_stream(self, device: Any = None) -> Stream:
        return self.active().stream

    def get_current_target(self) -> Any:
        return self.active().target

    def get_active_torch_device(self) -> Any:
        raise XpukitError(
            "xpukit's UR driver has no torch device (it runs without PyTorch)",
            "pass device memory as USM allocations, int addresses or xpukit DeviceArrays",
        )

    def get_device_interface(self) -> Any:
        raise XpukitError(
            "xpukit's UR driver has no torch device interface (triton.testing.do_bench needs one)",
            "time with xpukit.runtime.triton.do_bench (UR event profiling)",
        )

    def get_benchmarker(self) -> Callable[..., Any]:
        return do_bench

    def map_python_to_cpp_type(self, ty: str) -> str:  # pragma: no cover - only newer Triton asks
        return ty

    # -- sessions --------------------------------------------------------------------------------
    def _make_active(self, session: Session) -> Active:
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
        return Active(self, session, key, GPUTarget("xpu", props, 32), Stream(session, session.queue), (key, debug))

    @contextlib.contextmanager
    def use(self, session: Session) -> Iterator[URDriver]:
        """Route this context's launches to ``session`` inside the block (Triton's active driver
        is left alone; :func:`activate` also sets it)."""
        token = CURRENT.set(self._make_active(session))
        try:
            yield self
        finally:
            CURRENT.reset(token)
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
    def load_binary(self, name: str, kernel: bytes, shared: int, build_flags: str, device: Any) -> tuple:
        """``utils.load_binary``: Triton's compiled kernel (SPIR-V or a zebin) loaded on the active session."""
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
            function = URFunction(name, code, build_flags or "", form="zebin")
        elif session.device.type == "cpu":
            # Triton's build flags are Intel GPU compiler options; the CPU runtime has none of them.
            function = URFunction(name, spv.patch_for_cpu(code), "")
        else:
            function = URFunction(name, code, build_flags or "")
        function.programs[id(session)] = self.load_program(function, session)  # build errors surface here
        self.stats.variants += 1
        return function, function, 0, 0

    def load_program(self, function: URFunction, session: Session) -> Any:
        """``function``'s program built on ``session`` (through the program cache for SPIR-V)."""
        self.stats.program_loads += 1
        if function.form == "zebin":
            self.stats.last_load = "zebin"
            return session.program_from_binary(function.spirv, function.options)
        if self.cache is not None:
            loaded = self.cache.load(session, function.spirv, options=function.options, spirv_sha256=function.sha256)
            self.stats.last_load = "program-cache" if loaded.hit else "spirv"
            return loaded.program
        self.stats.last_load = "spirv"
        return session.program_from_spirv(function.spirv, function.options)

    # -- benchmarking ----------------------------------------------------------------------------
    def _profiling_queue(self, session: Session) -> Queue:
        with self._lock:
            queue = self._profiling.get(id(session))
            if queue is None or queue.closed or queue.session is not session:
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
        top = self.active()
        session = top.session
        queue = self._profiling_queue(session)
        stream = Stream(session, queue, [])
        self.stats.benchmarks += 1
        saved = top.stream
        top.stream = stream
        try:
            fn()
            session.synchronize()
            est = statistics.median(time_once(fn, stream) for _ in range(5))
            n_warmup = max(1, min(1000, int(warmup / max(est, 1e-6))))
            n_repeat = max(1, min(1000, int(rep / max(est, 1e-6))))
            for _ in range(n_warmup):
                fn()
            queue.finish()
            times = [time_once(fn, stream) for _ in range(n_repeat)]
        finally:
            top.stream = saved
            release_events(stream)
        if quantiles is not None:
            ordered = sorted(times)
            out = [quantile(ordered, q) for q in quantiles]
            return out[0] if len(out) == 1 else out
        if return_mode == "all":
            return times
        summaries: dict[str, Callable[[list[float]], float]] = {
            "min": min,
            "max": max,
            "mean": statistics.fmean,
            "median": statistics.median,
        }
        return summaries[return_mode](times)


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
    """The driver of the calling context's activation, else the default one."""
    act = CURRENT.get()
    return act.driver if act is not None else default_driver()


def current_session() -> Session:
    """The session of the calling thread's innermost ``activate`` block."""
    return _active_driver().active().session


def do_bench(fn: Callable[[], Any], *args: Any, **kwargs: Any) -> Any:
    """UR-event-profiled benchmarker for ``triton.autotune(..., do_bench=do_bench)`` (Triton asks
    the active driver for it at decoration time). Times on the calling thread's session; the
    options and their defaults are :meth:`URDriver.do_bench`'s."""
    return _active_driver().do_bench(fn, *args, **kwargs)


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
