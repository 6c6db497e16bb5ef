"""Pure logic of xpukit's UR driver: argument specialization in front of Triton's binder, quantiles."""

from __future__ import annotations

import numpy as np
import pytest

from xpukit.runtime.triton.bench import quantile as _quantile
from xpukit.runtime.triton.binder import make_specializer as _make_specializer
from xpukit.runtime.ur.errors import KernelArgumentError

pytestmark = pytest.mark.unit


def original(arg, specialize_extra, is_const=False, specialize_value=True, align=True):
    """Stands in for Triton's specialize_impl: records what reached it."""
    if isinstance(arg, bool):
        return ("i1", None)
    if isinstance(arg, int):
        return ("i32" if abs(arg) < 2**31 else "i64", specialize_extra(arg, "int", align=align))
    if isinstance(arg, float):
        return ("fp32", None)
    return ("*" + str(arg.dtype), specialize_extra(arg, "tensor", align=align))


def extra(arg, ty, align=True):
    v = arg if ty == "int" else arg.data_ptr()
    return "D" if align and v % 16 == 0 else ""


spec = _make_specializer(original)


class Untyped:
    def data_ptr(self) -> int:
        return 0x7F00_0000_0010


class Typed(Untyped):
    dtype = np.dtype(np.float32)


def test_untyped_device_memory_is_a_64_bit_address():
    assert spec(Untyped(), extra) == ("i64", "D")
    assert spec(Untyped(), extra, False, False) == ("i64", None)


def test_typed_device_memory_goes_to_triton_unchanged():
    assert spec(Typed(), extra) == ("*float32", "D")


def test_numpy_scalars_are_specialized_as_their_values():
    assert spec(np.float32(2.5), extra) == ("fp32", None)
    assert spec(np.int64(32), extra) == ("i32", "D")
    assert spec(np.bool_(True), extra) == ("i1", None)


def test_host_array_is_refused_with_a_fix():
    with pytest.raises(KernelArgumentError, match=r"host numpy array \(float32, shape \(3,\)\)") as ei:
        spec(np.zeros(3, np.float32), extra)
    assert "from_numpy" in ei.value.fix


def test_unknown_objects_get_a_clear_error():
    with pytest.raises(KernelArgumentError, match="a str cannot be a Triton kernel argument"):
        spec("x", extra)


def test_plain_values_pass_through():
    assert spec(7, extra) == ("i32", "")
    assert spec(1.5, extra) == ("fp32", None)
    assert spec(True, extra) == ("i1", None)


def test_quantile_interpolates():
    assert _quantile([1.0], 0.5) == 1.0
    assert _quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert _quantile([1.0, 2.0, 3.0], 0.0) == 1.0 and _quantile([1.0, 2.0, 3.0], 1.0) == 3.0
