"""Activation, the top of Triton on UR: :func:`activate` routes the calling context's Triton
launches to a session and, while any block is open, swaps what Triton keeps process-wide (its
active driver, ``specialize_impl``, ``JITFunction.run`` and ``__getitem__``); the stand-in for
Triton's missing driver is installed at import."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from xpukit.runtime.triton.binder import make_specializer
from xpukit.runtime.triton.driver import URDriver, default_driver
from xpukit.runtime.triton.fast_table import getitem_dispatch, make_fast_run
from xpukit.runtime.ur.core import Session

# Process-wide: Triton's driver and JITFunction.run are global, so they are swapped while at least
# one activate() block is open anywhere and restored when the last one ends.
_GLOBAL_LOCK = threading.Lock()
_GLOBAL_DEPTH = 0
_SAVED: dict[str, Any] = {}


def _enter_global(drv: URDriver) -> None:
    global _GLOBAL_DEPTH
    import triton.runtime.jit as jit
    from triton.runtime.driver import driver as triton_driver

    with _GLOBAL_LOCK:
        if _GLOBAL_DEPTH == 0:
            _SAVED["driver"] = triton_driver.active
            _SAVED["specialize_impl"] = jit.specialize_impl
            _SAVED["run"] = jit.JITFunction.run
            _SAVED["getitem"] = jit.JITFunction.__dict__.get("__getitem__")  # None: inherited (KernelInterface)
            jit.specialize_impl = make_specializer(jit.specialize_impl)
            jit.JITFunction.run = make_fast_run(jit.JITFunction.run)
            jit.JITFunction.__getitem__ = getitem_dispatch
            triton_driver.set_active(drv)
        _GLOBAL_DEPTH += 1


def _leave_global() -> None:
    global _GLOBAL_DEPTH
    import triton.runtime.jit as jit
    from triton.runtime.driver import driver as triton_driver

    with _GLOBAL_LOCK:
        _GLOBAL_DEPTH -= 1
        if _GLOBAL_DEPTH == 0:
            jit.specialize_impl = _SAVED.pop("specialize_impl")
            jit.JITFunction.run = _SAVED.pop("run")
            getitem = _SAVED.pop("getitem")
            if getitem is None:
                del jit.JITFunction.__getitem__
            else:
                jit.JITFunction.__getitem__ = getitem
            previous = _SAVED.pop("driver")
            if previous is triton_driver.default:
                triton_driver.reset_active()
            else:
                triton_driver.set_active(previous)


def _stand_in_for_no_driver() -> None:
    """Make xpukit's driver what Triton's lazily resolved default driver becomes when no Triton
    backend driver is active (no torch XPU device: Triton would raise "0 active drivers").

    Triton code written as its tutorials write it asks for that driver before any session exists:
    ``@triton.autotune`` takes its benchmarker from it at decoration time. With the stand-in the
    decorator gets xpukit's UR benchmarker (it times on whatever session is active when it runs),
    and a launch outside ``activate()`` is the kit's :class:`NoActiveSession`. Where Triton finds
    its own driver (torch with an XPU device) nothing changes. Runs once, at import.
    """
    try:
        from triton.runtime.driver import driver as triton_drivers
    except ImportError:  # host-side use without Triton
        return
    proxy = triton_drivers.default
    # Triton's LazyProxy (``driver.default``) has no public way to change what it resolves to: the
    # kit reads and replaces its two fields, and changes nothing once it has resolved.
    resolved = getattr(proxy, "_obj", True)  # reach-in: Triton's LazyProxy, None until it resolves
    original = getattr(proxy, "_init_fn", None)  # reach-in: what Triton's LazyProxy resolves through
    if resolved is not None or original is None or getattr(original, "xpukit_stand_in", False):
        return  # already resolved (Triton's own driver, or ours), or not Triton's LazyProxy

    def resolve() -> Any:
        try:
            return original()
        except RuntimeError as exc:
            if not str(exc).startswith("0 active drivers"):
                raise
            return default_driver()

    resolve.xpukit_stand_in = True  # type: ignore[attr-defined]
    proxy._init_fn = resolve  # reach-in: Triton's LazyProxy resolves through it on first use


@contextlib.contextmanager
def activate(session: Session, driver: URDriver | None = None) -> Iterator[URDriver]:
    """Make Triton launch through UR on ``session`` inside the block, for the calling thread (or
    asyncio task) only: other threads keep their own sessions, and a thread with none gets
    :class:`NoActiveSession`. While any block is open, Triton's active driver is xpukit's and
    ``JITFunction.run``/``specialize_impl`` are wrapped (see the module docstring); the last block
    to end restores them."""
    drv = driver or default_driver()
    with drv.use(session):
        _enter_global(drv)
        try:
            yield drv
        finally:
            _leave_global()


_stand_in_for_no_driver()
