"""The per-launch path of the core layer: checked arguments, then one enqueue in the release's form.

Three launch forms (``_api.LaunchForm``): 2025.0-2025.2 and 2025.3 set the changed arguments
(urKernelSetArg*) and call the 9- or 11-parameter urEnqueueKernelLaunch; 2026.0+ make one
urEnqueueKernelLaunchWithArgsExp call whose argument array the launcher keeps filled.

Two implementations with one interface and one behaviour:

* ``_xpukit_launcher`` (``_launcher.c`` and its parts ``_launcher_*.c`` beside this file), compiled
  in the image and by ``pip install`` where a C compiler exists; the attribute names it reads come
  from :mod:`xpukit.runtime.ur.seam` through ``bind``, which the core calls once. It runs the whole
  launch under the GIL, so setting arguments and enqueueing never interleave between threads, and
  costs about 1 us.
* the pure-Python twin below, used when the extension is absent or ``XPUKIT_PURE_PYTHON=1``;
  a lock per launcher gives the same atomicity.

``AllocTable`` holds a session's live USM ranges; every pointer argument is looked up there before
anything is set, so a freed, foreign, host or null address is an error, never a crash.
Triton's dispatch built on this (its key, ``kernel[grid]`` in C) is
:mod:`xpukit.runtime.triton.dispatch`. Error codes reach Python through ``on_arg_error(index, code, value)``.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import math
import os
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from xpukit.runtime.ur import _api

# Argument error codes (same values in _launcher.c).
ARG_TYPE, ARG_RANGE, ARG_NULL, ARG_NOT_LIVE, ARG_COUNT, ARG_GRID, ARG_CLOSED = range(1, 8)

# One letter per kernel parameter kind.
KINDS = "PAqQiIhHbB?fdeE"
INT_KINDS = {
    "i1": "?",
    "i8": "b",
    "i16": "h",
    "i32": "i",
    "i64": "q",
    "u1": "?",
    "u8": "B",
    "u16": "H",
    "u32": "I",
    "u64": "Q",
}
FLOAT_KINDS = {"fp32": "f", "f32": "f", "fp64": "d", "fp16": "e", "bf16": "E"}
_RANGES = {
    "q": (-(2**63), 2**63 - 1),
    "Q": (0, 2**64 - 1),
    "i": (-(2**31), 2**31 - 1),
    "I": (0, 2**32 - 1),
    "h": (-(2**15), 2**15 - 1),
    "H": (0, 2**16 - 1),
    "b": (-(2**7), 2**7 - 1),
    "B": (0, 2**8 - 1),
    "?": (0, 1),
}
_SIZES = {"q": 8, "Q": 8, "i": 4, "I": 4, "h": 2, "H": 2, "b": 1, "B": 1, "?": 1, "f": 4, "d": 8, "e": 2, "E": 2}


def kind_of(triton_type: str, address: bool = False) -> str:
    """The launcher kind of a Triton parameter type (``address``: a 64-bit int used as a pointer)."""
    if triton_type.startswith("*"):
        return "P"
    if triton_type in INT_KINDS:
        kind = INT_KINDS[triton_type]
        return "A" if address and kind in "qQ" else kind
    if triton_type in FLOAT_KINDS:
        return FLOAT_KINDS[triton_type]
    raise ValueError(f"unsupported Triton argument type {triton_type!r}")


# The interface both implementations have (the compiled one's is its stub, stubs/_xpukit_launcher.pyi):
# the switch at the end of this module is typed with these, so mypy checks each side against them
# and every caller against the interface.
class AllocationTable(Protocol):
    """A session's live USM ranges: ``AllocTable()`` makes one (``_xpukit_launcher.AllocTable``, or
    ``PyAllocTable``); each ``remove`` bumps ``generation``."""

    @property
    def generation(self) -> int: ...
    def add(self, start: int, size: int, /) -> None: ...
    def remove(self, start: int, /) -> bool: ...
    def find(self, addr: Any, /) -> tuple[int, int] | None: ...
    def __len__(self) -> int: ...


class ArgumentLauncher(Protocol):
    """One kernel's checked launch path: ``Launcher(...)`` makes one (``_xpukit_launcher.Launcher``,
    or ``PyLauncher``)."""

    def launch(self, queue: int, gx: Any, gy: Any, gz: Any, args: Sequence[Any], want_event: bool = ..., /) -> Any: ...
    def close(self) -> None: ...
    def grow_with(self, callback: Callable[[int], None], /) -> None: ...
    def forget(self) -> None: ...
    def hidden(self, entries: Sequence[tuple[str, int]], /) -> None: ...


class LauncherFactory(Protocol):
    """``Launcher``'s constructor. ``table`` is the same implementation's table (the compiled launcher
    takes only the compiled AllocTable, which ``AllocTable`` then makes), so it is not narrowed here."""

    def __call__(
        self,
        kernel: int,
        form: int,
        fns: tuple[int, int, int, int],
        kinds: str,
        local: tuple[int, int, int],
        table: Any,
        on_arg_error: Callable[[int, int, Any], None],
        on_ur_error: Callable[[int, str], None],
        /,
    ) -> ArgumentLauncher: ...


class PyAllocTable:
    """Live allocations of one session as sorted [start, end) ranges (bisect)."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self.generation = 0
        # Allocations come and go from any thread; launchers hold it from their last pointer check
        # to the enqueue, so nothing is freed in between (the compiled launcher has the GIL).
        self.lock = threading.RLock()

    def add(self, start: int, size: int) -> None:
        if size <= 0 or start < 0 or start + size > 2**64:
            raise ValueError("bad allocation range")
        with self.lock:
            i = bisect.bisect_left(self._starts, start)
            self._starts.insert(i, start)
            self._ends.insert(i, start + size)

    def remove(self, start: int) -> bool:
        with self.lock:
            self.generation += 1
            i = bisect.bisect_left(self._starts, start)
            if i < len(self._starts) and self._starts[i] == start:
                del self._starts[i], self._ends[i]
                return True
            return False

    def find(self, addr: Any) -> tuple[int, int] | None:
        if type(addr) is not int:
            return None
        with self.lock:
            i = bisect.bisect_right(self._starts, addr) - 1
            if i >= 0 and addr < self._ends[i]:
                return self._starts[i], self._ends[i] - self._starts[i]
            return None

    def __len__(self) -> int:
        return len(self._starts)


def _address(v: Any) -> tuple[int, int]:
    """(error code or 0, address) of an int or an object with an int ``.ptr``."""
    if v is None:
        return ARG_NULL, 0
    if isinstance(v, int) and not isinstance(v, bool):
        return (0, v) if 0 <= v < 2**64 else (ARG_RANGE, 0)
    try:
        p = v.ptr
    except AttributeError:
        i = None if isinstance(v, float | bool) else _index(v)  # numpy integers
        if i is None:
            return ARG_TYPE, 0
        return (0, i) if 0 <= i < 2**64 else (ARG_RANGE, 0)
    except Exception:  # a closed allocation: the error callback says so
        return ARG_TYPE, 0
    if not isinstance(p, int) or not 0 <= p < 2**64:
        return ARG_TYPE, 0
    return 0, p


def _index(v: Any) -> int | None:
    try:
        return v.__index__()
    except (AttributeError, TypeError):
        return None


def _double(v: Any) -> float | None:
    if isinstance(v, str | bytes) or v is None:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _bf16(f: float) -> int:
    bits = struct.unpack("<I", struct.pack("<f", f))[0]
    if math.isnan(f):
        return (bits >> 16) | 0x0040
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


class PyLauncher:
    """The pure-Python twin of ``_xpukit_launcher.Launcher`` (see the module docstring)."""

    def __init__(
        self,
        kernel: int,
        form: int,
        fns: tuple[int, int, int, int],
        kinds: str,
        local: tuple[int, int, int],
        table: AllocationTable,
        on_arg_error: Callable[[int, int, Any], None],
        on_ur_error: Callable[[int, str], None],
    ) -> None:
        if any(k not in KINDS for k in kinds):
            raise ValueError(f"unknown argument kind in {kinds!r}")
        if form not in tuple(_api.LaunchForm):
            raise ValueError(f"unknown launch form {form}")
        set_value, set_pointer, set_local, launch = fns
        with_args = form == _api.LaunchForm.WITH_ARGS
        if not kernel or not launch or (not with_args and not (set_value and set_pointer and set_local)):
            raise ValueError("null kernel handle or UR function pointer")
        vp, u32, sz = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t
        res = ctypes.c_int32
        szp = ctypes.POINTER(sz)
        self._form = form
        if with_args:
            self._launch = ctypes.CFUNCTYPE(res, vp, vp, u32, szp, szp, szp, u32, vp, vp, u32, vp, vp)(launch)
        else:
            self._set_value = ctypes.CFUNCTYPE(res, vp, u32, sz, vp, vp)(set_value)
            self._set_pointer = ctypes.CFUNCTYPE(res, vp, u32, vp, vp)(set_pointer)
            self._set_local = ctypes.CFUNCTYPE(res, vp, u32, sz, vp)(set_local)
            if form == _api.LaunchForm.SET_ARGS_LAUNCH11:
                self._launch = ctypes.CFUNCTYPE(res, vp, vp, u32, szp, szp, szp, u32, vp, u32, vp, vp)(launch)
            else:
                self._launch = ctypes.CFUNCTYPE(res, vp, vp, u32, szp, szp, szp, u32, vp, vp)(launch)
        self._kernel: int | None = kernel
        self._kinds = kinds
        self._local = (ctypes.c_size_t * 3)(*local)
        self._global = (ctypes.c_size_t * 3)()
        self._table = table
        self._seen_generation = table.generation
        self._last: list[Any] = [None] * len(kinds)
        self._hidden: list[tuple[str, int]] = []
        self._hidden_dirty = False
        # 2026.0+: the argument array, filled once; each launch writes only the values.
        self._store = (ctypes.c_uint64 * max(len(kinds), 1))()
        self._args = self._arg_array(len(kinds))
        self._on_arg = on_arg_error
        self._on_ur = on_ur_error
        self._on_grow: Callable[[int], None] | None = None
        self._grown = 0
        self._lock = threading.Lock()

    def _arg_array(self, extra: int) -> ctypes.Array:
        n = len(self._kinds)
        args = (_api.KernelArgProperties * (n + extra))()
        base = ctypes.addressof(self._store)
        for i, kind in enumerate(self._kinds):
            a = args[i]
            a.stype, a.index = _api.STRUCTURE_TYPE_EXP_KERNEL_ARG_PROPERTIES, i
            if kind == "P":
                a.type, a.size = _api.KERNEL_ARG_POINTER, 8
            else:
                a.type, a.value.value = _api.KERNEL_ARG_VALUE, base + 8 * i
        return args

    def grow_with(self, callback: Callable[[int], None]) -> None:
        """``callback(programs)`` before a launch of more programs than any before (Triton's scratch)."""
        if not callable(callback):
            raise TypeError("grow_with(callback): a callable")
        self._on_grow, self._grown = callback, 0

    def hidden(self, entries: Sequence[tuple[str, int]]) -> None:
        """The arguments after the user's: ``("P", address)`` (0 = null) or ``("L", local bytes)``."""
        items = [(str(k), int(v)) for k, v in entries]
        if len(items) > 8 or any(k not in ("P", "L") or not 0 <= v < 2**64 for k, v in items):
            raise ValueError("hidden arguments are ('P', address) or ('L', bytes), at most 8")
        with self._lock:
            args = self._arg_array(len(items))
            n = len(self._kinds)
            for j, (kind, value) in enumerate(items):
                a = args[n + j]
                a.stype, a.index = _api.STRUCTURE_TYPE_EXP_KERNEL_ARG_PROPERTIES, n + j
                if kind == "P":
                    a.type, a.size, a.value.pointer = _api.KERNEL_ARG_POINTER, 8, value or None
                else:
                    a.type, a.size = _api.KERNEL_ARG_LOCAL, value
            self._args = args
            self._hidden = items
            self._hidden_dirty = True

    def _convert(self, kind: str, v: Any) -> tuple[int, Any]:
        if kind in "PA" or (kind in "qQ" and not isinstance(v, int | float) and hasattr(v, "ptr")):
            code, addr = _address(v)
            if code:
                return code, None
            if addr == 0:
                return ARG_NULL, None
            return (ARG_NOT_LIVE, None) if self._table.find(addr) is None else (0, addr)
        if kind in _RANGES:
            i = _index(v)
            if i is None:
                return ARG_TYPE, None
            lo, hi = _RANGES[kind]
            return (0, i) if lo <= i <= hi else (ARG_RANGE, None)
        d = _double(v)
        if d is None:
            return ARG_TYPE, None
        if kind == "f":
            return 0, struct.unpack("<I", bytes(ctypes.c_float(d)))[0]  # as C's (float) cast: no OverflowError
        if kind == "d":
            return 0, struct.unpack("<Q", struct.pack("<d", d))[0]
        if kind == "e":
            try:
                return 0, struct.unpack("<H", struct.pack("<e", d))[0]
            except OverflowError:
                return ARG_RANGE, None
        return 0, _bf16(ctypes.c_float(d).value)

    def launch(self, queue: int, gx: Any, gy: Any, gz: Any, args: Sequence[Any], want_event: bool = False) -> Any:
        if self._kernel is None:
            self._on_arg(-1, ARG_CLOSED, None)
        grid: list[Any] = []  # _on_arg raises for a bad size
        for g in (gx, gy, gz):
            i = _index(g)
            if i is None or not 0 <= i <= 0x7FFFFFFF:
                self._on_arg(-1, ARG_GRID, g)
            grid.append(i)
        if self._on_grow is not None and grid[0] * grid[1] * grid[2] > self._grown:
            programs = grid[0] * grid[1] * grid[2]
            self._on_grow(programs)
            self._grown = max(self._grown, programs)
        if len(args) != len(self._kinds):
            self._on_arg(len(args), ARG_COUNT, None)
        checked_generation = self._table.generation
        values, addresses = [], []
        for i, (kind, v) in enumerate(zip(self._kinds, args, strict=True)):
            code, bits = self._convert(kind, v)
            if code:
                self._on_arg(i, code, v)
            values.append(bits)
            if kind in "PA" or (kind in "qQ" and not isinstance(v, int | float)):
                addresses.append(i)
        if 0 in grid:
            return None
        # The twin's table lock keeps frees out until the enqueue; a compiled table (only mixed in
        # the parity tests) has none, and the generation re-check below still applies.
        with self._lock, getattr(self._table, "lock", None) or contextlib.nullcontext():
            if self._kernel is None:
                self._on_arg(-1, ARG_CLOSED, None)
            if self._table.generation != checked_generation:  # memory was freed meanwhile: check again
                for i in addresses:
                    if self._table.find(values[i]) is None:
                        self._on_arg(i, ARG_NOT_LIVE, args[i])
            k = ctypes.c_void_p(self._kernel)
            gs, loc = self._global, self._local
            gs[0], gs[1], gs[2] = grid[0] * loc[0], grid[1] * loc[1], grid[2] * loc[2]
            event = ctypes.c_void_p()
            ev = ctypes.byref(event) if want_event else None
            q = ctypes.c_void_p(queue)
            if self._form == _api.LaunchForm.WITH_ARGS:
                arr, store = self._args, self._store
                for i, (kind, bits) in enumerate(zip(self._kinds, values, strict=True)):
                    if kind == "P":
                        arr[i].value.pointer = bits
                    else:
                        store[i] = bits & (2**64 - 1)
                        arr[i].size = _SIZES.get(kind, 8)
                n = len(self._kinds) + len(self._hidden)
                code = self._launch(q, k, 3, None, gs, loc, n, arr, None, 0, None, ev)
                if code:
                    self._on_ur(code, "urEnqueueKernelLaunchWithArgsExp")
                return event.value if want_event else None
            last = self._last
            if self._seen_generation != self._table.generation:
                last[:] = [None] * len(last)
                self._seen_generation = self._table.generation
                self._hidden_dirty = True
            for i, (kind, bits) in enumerate(zip(self._kinds, values, strict=True)):
                if last[i] == bits:
                    continue
                if kind == "P":
                    code = self._set_pointer(k, i, None, ctypes.c_void_p(bits))
                else:
                    size = _SIZES.get(kind, 8)
                    buf = ctypes.c_uint64(bits & (2**64 - 1))
                    code = self._set_value(k, i, size, None, ctypes.byref(buf))
                if code:
                    last[i] = None
                    self._on_ur(code, "urKernelSetArgPointer" if kind == "P" else "urKernelSetArgValue")
                last[i] = bits
            if self._hidden_dirty:
                for j, (kind, value) in enumerate(self._hidden, start=len(self._kinds)):
                    if kind == "P":
                        code = self._set_pointer(k, j, None, ctypes.c_void_p(value or None))
                    else:
                        code = self._set_local(k, j, value, None)
                    if code:
                        self._on_ur(code, "urKernelSetArgPointer" if kind == "P" else "urKernelSetArgLocal")
                self._hidden_dirty = False
            if self._form == _api.LaunchForm.SET_ARGS_LAUNCH11:
                code = self._launch(q, k, 3, None, gs, loc, 0, None, 0, None, ev)
            else:
                code = self._launch(q, k, 3, None, gs, loc, 0, None, ev)
            if code:
                self._on_ur(code, "urEnqueueKernelLaunch")
        return event.value if want_event else None

    def close(self) -> None:
        with self._lock:
            self._kernel = None

    def forget(self) -> None:
        with self._lock:
            self._last = [None] * len(self._kinds)
            self._hidden_dirty = True


# The compiled module's interface version (its ABI constant); a stale build is ignored, never half-used.
ABI = 6


def stale_extension(module: Any, wanted: int) -> bool:
    """Whether a compiled module is of another interface version than this source wants (an image
    built from another commit under a mounted checkout). Says so once, on stderr: the launch path
    then runs its pure-Python twin, correct but several times slower, never silently."""
    found = getattr(module, "ABI", 0)
    if found == wanted:
        return False
    print(
        f"xpukit: warning: {module.__name__} is ABI {found}, this checkout needs {wanted}: launching through "
        "the pure-Python twin (slower) (fix: rebuild the image with `invoke build`)",
        file=sys.stderr,
    )
    return True


class _Compiled(Protocol):
    """What the switch takes from ``_xpukit_launcher`` (mypy checks the module's stub against it)."""

    ABI: int

    @property
    def AllocTable(self) -> Callable[[], AllocationTable]: ...  # the module's names
    @property
    def Launcher(self) -> LauncherFactory: ...
    def bind(self, reads: dict[str, str], allocation_type: type, array_type: type, /) -> None: ...


def _load_extension() -> _Compiled | None:
    if os.environ.get("XPUKIT_PURE_PYTHON") == "1":
        return None
    try:
        import _xpukit_launcher
    except ImportError:
        return None
    return None if stale_extension(_xpukit_launcher, ABI) else _xpukit_launcher


def _bind_nothing(_reads: dict[str, str], *_types: type) -> None:
    """The Python twin reads the attributes by their Python names."""


_EXT = _load_extension()
COMPILED = _EXT is not None
AllocTable: Callable[[], AllocationTable] = _EXT.AllocTable if _EXT else PyAllocTable
Launcher: LauncherFactory = _EXT.Launcher if _EXT else PyLauncher
# The seam (xpukit.runtime.ur.seam): bind(reads, USMAllocation, DeviceArray), called once by the core.
bind: Callable[[dict[str, str], type, type], None] = _EXT.bind if _EXT else _bind_nothing
IMPLEMENTATION = "compiled (_xpukit_launcher)" if COMPILED else "pure Python"

__all__ = [
    "ARG_CLOSED",
    "ARG_COUNT",
    "ARG_GRID",
    "ARG_NOT_LIVE",
    "ARG_NULL",
    "ARG_RANGE",
    "ARG_TYPE",
    "COMPILED",
    "IMPLEMENTATION",
    "AllocTable",
    "AllocationTable",
    "ArgumentLauncher",
    "Launcher",
    "LauncherFactory",
    "PyAllocTable",
    "PyLauncher",
    "bind",
    "kind_of",
]
