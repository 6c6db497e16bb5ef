"""Triton's binder on xpukit memory: the wrapped ``specialize_impl`` specializes xpukit
allocations and numpy scalars the way their values are, and refuses host arrays and unknown
objects with a :class:`KernelArgumentError`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from xpukit.runtime.triton.state import CURRENT
from xpukit.runtime.ur.errors import ClosedError, KernelArgumentError
from xpukit.runtime.ur.objects import USMAllocation


def _untyped_address(arg: Any) -> int | None:
    """The address of device memory that has no element type (passed like an int address)."""
    if isinstance(arg, USMAllocation):
        return arg.ptr
    data_ptr = getattr(arg, "data_ptr", None)
    if callable(data_ptr) and not hasattr(arg, "dtype"):
        return int(data_ptr())
    return None


def _host_array_error(arg: Any) -> KernelArgumentError:
    return KernelArgumentError(
        f"a host numpy array ({arg.dtype}, shape {arg.shape}) was passed as a Triton kernel argument; "
        "kernels run on the UR device and need device memory",
        "copy it to the device first: session.from_numpy(a) (pass it or its .ptr) or "
        "xpukit.runtime.triton.from_numpy(a) (a typed pointer)",
    )


def _scalar_spec(arg: Any, specialize_extra: Any, specialize_value: bool, align: bool) -> tuple:
    """Triton's specialization of a Python int or float, without its per-call import and frames
    (the launch path's hottest Python). Used only when :func:`_scalar_spec_agrees` with Triton."""
    if type(arg) is float:
        return ("fp32", None)
    key = specialize_extra(arg, "int", align=align) if specialize_value else None
    if specialize_value and arg == 1:
        return ("constexpr", 1)
    if -(2**31) <= arg < 2**31:
        return ("i32", key)
    if 2**63 <= arg < 2**64:
        return ("u64", key)
    return ("i64", key)


_Probes = tuple[float, ...]  # ints, then floats
_SCALAR_PROBES: _Probes = (0, 1, 2, 8, 16, 17, 32, -1, -16, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32, 2**40)
_SCALAR_PROBES += (2**63 - 1, 2**63, 2**64 - 16, 2**64 - 1, 0.0, 1.0, 1.5, -2.0)


def _scalar_spec_agrees(original: Callable[..., Any]) -> bool:
    """Does :func:`_scalar_spec` give exactly what this Triton gives for ints and floats?"""

    def extra(arg: Any, ty: str, align: bool = True) -> str:
        return "D" if align and arg % 16 == 0 else ""

    try:
        for v in _SCALAR_PROBES:
            for value in (True, False):
                for align in (True, False):
                    if _scalar_spec(v, extra, value, align) != tuple(original(v, extra, False, value, align)):
                        return False
    except Exception:  # a Triton whose specialize_impl has another shape: always use its own
        return False
    return True


def make_specializer(original: Callable[..., Any]) -> Callable[..., Any]:
    fast = _scalar_spec_agrees(original)

    def specialize_impl(
        arg: Any, specialize_extra: Any, is_const: bool = False, specialize_value: bool = True, align: bool = True
    ) -> Any:
        t = type(arg)
        if t is int and 0 < arg < 2**31 and _is_current_usm_address(arg):
            # A raw address that happens to be small is still an address: 64-bit, like a GPU's.
            return ("i64", specialize_extra(arg, "int", align=align) if specialize_value else None)
        if (t is int or t is float) and fast:
            return _scalar_spec(arg, specialize_extra, specialize_value, align)
        if t is int or t is float or t is bool or arg is None:
            return original(arg, specialize_extra, is_const, specialize_value, align)
        try:
            addr = _untyped_address(arg)
        except ClosedError:
            raise KernelArgumentError(
                f"a {type(arg).__name__} whose memory was freed (closed) was passed as a kernel argument",
                "pass live device memory of the launching session",
            ) from None
        if addr is not None:
            # Untyped device memory is an address: always a 64-bit integer, like the blog's ints.
            key = specialize_extra(addr, "int", align=align) if specialize_value else None
            return ("u64" if addr >= 2**63 else "i64", key)
        np = sys.modules.get("numpy")
        if np is not None:
            if isinstance(arg, np.ndarray):
                raise _host_array_error(arg)
            if isinstance(arg, np.generic):  # numpy scalars carry .dtype: Triton would take them for tensors
                arg = arg.item()
                if not isinstance(arg, int | float | bool):
                    raise KernelArgumentError(
                        f"numpy scalar of type {type(arg).__name__} cannot be a kernel argument",
                        "pass an integer, float or bool",
                    )
        try:
            return original(arg, specialize_extra, is_const, specialize_value, align)
        except ClosedError:
            raise KernelArgumentError(
                f"a {type(arg).__name__} whose memory was freed (closed) was passed as a kernel argument",
                "pass live device memory of the launching session",
            ) from None
        except (AttributeError, KeyError, TypeError) as exc:
            raise KernelArgumentError(
                f"a {type(arg).__name__} cannot be a Triton kernel argument here ({exc})",
                "pass an int address, a USM allocation, a DeviceArray (or anything with data_ptr() and "
                "dtype), or a Python/numpy scalar",
            ) from None

    specialize_impl._xpukit_original = original  # type: ignore[attr-defined]
    return specialize_impl


def _is_current_usm_address(value: int) -> bool:
    act = CURRENT.get()
    return act is not None and act.session.is_usm_address(value)
