"""Triton's launch path in C and its switch: ``_xpukit_dispatch`` (``_dispatch.c`` and its parts
``_dispatch_*.c`` beside this file), built on the UR launcher (``_xpukit_launcher``,
:mod:`xpukit.runtime.ur.launcher`) and used only with it, or the Python twins where it is absent or
``XPUKIT_PURE_PYTHON=1``. Loading it binds it to :mod:`xpukit.runtime.triton.seam` (every attribute
name and ``Hit`` field position the C reads).

* ``fast_key``: a key at least as fine as Triton's specialization (the compiled-launch table's key);
  ``py_fast_key`` is its twin.
* ``Dispatch``: ``kernel[grid](...)`` for a call seen before (twin: ``fast_table.PyDispatch``).
* ``Direct``: ``BoundKernel.launch`` for a tuple grid and no keywords (twin: the Python method).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Protocol

from xpukit.runtime.triton import seam
from xpukit.runtime.ur import launcher as ur_launcher

# The compiled module's interface version (its ABI constant); a stale build is ignored, never half-used.
ABI = 3

# The interface both implementations have (the compiled one's is its stub, stubs/_xpukit_dispatch.pyi):
# the switch at the end of this module is typed with these, so mypy checks each side against them and
# every caller against the interface. The compiled parts take only each other's objects (fast_key the
# compiled AllocTable, Direct the compiled Launcher), which the switch pairs; those parameters are Any.
FastKey = Callable[[tuple[Any, ...], dict[str, Any] | None, bytes, Any], tuple[Any, ...] | None]


class KernelDispatch(Protocol):
    """``kernel[grid]`` for one kernel: ``Dispatch`` (compiled) or ``fast_table.PyDispatch``."""

    def __getitem__(self, grid: Any, /) -> Callable[..., Any]: ...
    def forget(self) -> None: ...


class DispatchFactory(Protocol):
    def __call__(
        self, fn: Any, hits: dict[Any, Any], modes: bytes, current: ContextVar[Any], compiled_kernel: Any, /
    ) -> KernelDispatch: ...


class DirectFactory(Protocol):
    """``Direct(launcher, queue, fallback)``: a BoundKernel's launch door (``launcher`` the compiled one)."""

    def __call__(self, launcher: Any, queue: Any, fallback: Callable[..., Any], /) -> Callable[..., Any]: ...


class _Compiled(Protocol):
    """What the switch takes from ``_xpukit_dispatch`` (mypy checks the module's stub against it)."""

    ABI: int

    @property
    def Dispatch(self) -> DispatchFactory: ...  # the module's names
    @property
    def Direct(self) -> DirectFactory: ...
    @property
    def fast_key(self) -> FastKey: ...
    def bind(self, reads: dict[str, str | int], /) -> None: ...


def py_fast_key(
    args: tuple[Any, ...], kwargs: dict[str, Any] | None, modes: bytes, table: ur_launcher.AllocationTable
) -> tuple[Any, ...] | None:
    """The pure-Python twin of ``_xpukit_dispatch.fast_key``: a key at least as fine as Triton's
    specialization of these arguments (equal keys: Triton would pick the same compiled kernel)."""
    if len(args) > len(modes):
        return None
    key: list[Any] = []
    for i, o in enumerate(args):
        mode = chr(modes[i])
        t = type(o)
        if mode == "c":
            try:
                hash(o)
            except TypeError:
                return None
            key.append((t, o))
        elif t is int:
            if o > 2**63 - 1:
                code = 3 if o > 2**64 - 1 else 2 | ((o % 16 == 0) << 3)
            elif o < -(2**63):
                code = 3
            else:
                usm_small = 0 < o < 2**31 and table.find(o) is not None
                code = 0 if -(2**31) <= o <= 2**31 - 1 and not usm_small else 1
                code |= (o == 1) << 2
                code |= (o % 16 == 0) << 3
            if mode == "v":
                code &= 3
            elif mode == "a":
                code &= 7
            key.append(code)
        elif t is float:
            key.append(16)
        elif t is bool:
            key.append(17)
        elif o is None:
            key.append(18)
        else:
            try:
                addr = o.ptr
            except Exception:
                return None
            if not isinstance(addr, int) or not 0 <= addr < 2**64:
                return None
            div16 = int(mode == "s" and addr % 16 == 0)
            dtype = getattr(o, "dtype", None)
            if dtype is None:
                key.append(32 | ((addr >= 2**63) << 1) | (div16 << 3))
            else:
                try:
                    hash(dtype)
                except TypeError:
                    return None
                key.append((t, dtype, 64 | (div16 << 3)))
    for name, value in (kwargs or {}).items():
        try:
            hash(value)
        except TypeError:
            return None
        key.extend((name, type(value), value))
    return tuple(key)


def _load_extension() -> _Compiled | None:
    if not ur_launcher.COMPILED:  # it launches through the compiled Launcher, never the twin
        return None
    try:
        import _xpukit_dispatch
    except ImportError:
        return None
    if ur_launcher.stale_extension(_xpukit_dispatch, ABI):
        return None
    # The seam: every attribute name (and Hit field position) the C reads, declared in triton/seam.py.
    _xpukit_dispatch.bind(seam.table())
    return _xpukit_dispatch


_EXT = _load_extension()
COMPILED = _EXT is not None
fast_key: FastKey = _EXT.fast_key if _EXT else py_fast_key
# kernel[grid] in C (xpukit.runtime.triton.fast_table.PyDispatch is its twin); None without the extension.
Dispatch: DispatchFactory | None = _EXT.Dispatch if _EXT else None
# BoundKernel.launch in C for a tuple grid and no keywords (the Python method is its twin); None without it.
Direct: DirectFactory | None = _EXT.Direct if _EXT else None

__all__ = [
    "ABI",
    "COMPILED",
    "Direct",
    "DirectFactory",
    "Dispatch",
    "DispatchFactory",
    "FastKey",
    "KernelDispatch",
    "fast_key",
    "py_fast_key",
]
