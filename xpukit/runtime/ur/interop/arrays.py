"""Foreign arrays as kernel arguments: what a dpnp/dpctl array's
``__sycl_usm_array_interface__`` or a DLPack producer's capsule (device type kDLOneAPI) says
(:func:`view_of`), the checked pointer a launch passes in its place (:class:`ForeignPointer`), and
what UR says about the memory (:func:`alloc_info`, ``urUSMGetMemAllocInfo``: type, base, size,
device). What a session holds and how its launches are ordered is
:mod:`xpukit.runtime.ur.interop.state` (docs/ur.md, "dpnp and foreign memory").
"""

from __future__ import annotations

import ctypes
import dataclasses
from ctypes import (
    POINTER,
    Structure,
    byref,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any

from xpukit.runtime.ur import _api
from xpukit.runtime.ur.errors import KernelArgumentError

KDL_ONEAPI = 14  # DLPack's device type for SYCL/oneAPI USM

# --- foreign arrays --------------------------------------------------------------------------------


class ForeignPointer:
    """A checked view of foreign device memory as a kernel argument: ``ptr``/``data_ptr()`` the
    first element's address, ``dtype`` its element type (a numpy dtype, "bfloat16" as a string)."""

    __slots__ = ("base", "dtype", "producer", "ptr", "queue", "size")

    def __init__(self, ptr: int, dtype: Any, producer: Any, queue: Any, base: int, size: int) -> None:
        self.ptr = ptr
        self.dtype = dtype
        self.producer = producer  # held while a launch uses the memory
        self.queue = queue  # the producer's SYCL queue (None: unknown, e.g. a bare DLPack capsule)
        self.base = base
        self.size = size

    def data_ptr(self) -> int:
        return self.ptr

    def __repr__(self) -> str:
        return f"<ForeignPointer {self.ptr:#x} {self.dtype} of {type(self.producer).__name__}>"


@dataclasses.dataclass(frozen=True)
class ArrayView:
    """What an array protocol says: first element, element type, extent, the producer's queue."""

    data: int  # address of the first element
    dtype: Any
    itemsize: int
    low: int  # lowest byte touched, relative to data (negative strides)
    high: int  # one past the highest byte touched, relative to data
    queue: Any
    keep: Any  # what must stay alive while the memory is used (the producer, a DLPack capsule)


def _extent(shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int) -> tuple[int, int]:
    """(lowest, one past highest) byte of a strided array relative to its first element."""
    if any(d == 0 for d in shape):
        return 0, 0
    if strides is None:  # C-contiguous
        n = 1
        for d in shape:
            n *= d
        return 0, n * itemsize
    low = high = 0
    for d, s in zip(shape, strides, strict=True):
        span = (d - 1) * s * itemsize
        if span < 0:
            low += span
        else:
            high += span
    return low, high + itemsize


def bad_argument(obj: Any, why: str, fix: str) -> KernelArgumentError:
    return KernelArgumentError(f"a {type(obj).__name__} kernel argument: {why}", fix)


def view_of(obj: Any, stream: Any = None) -> ArrayView:
    """Read ``obj``'s array protocol: ``__sycl_usm_array_interface__`` first, else DLPack (kDLOneAPI;
    ``stream``, a SYCL queue, is offered to the producer as the queue the data must be ready on)."""
    import numpy as np

    suai = getattr(obj, "__sycl_usm_array_interface__", None)
    if suai is not None:
        try:
            data = int(suai["data"][0])
            dtype = np.dtype(suai["typestr"])
            shape = tuple(int(d) for d in suai["shape"])
            strides = suai.get("strides")
            strides = tuple(int(s) for s in strides) if strides is not None else None
            offset = int(suai.get("offset", 0) or 0)  # in elements, like the strides
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise bad_argument(
                obj, f"its __sycl_usm_array_interface__ is malformed ({exc})", "pass a dpnp/dpctl array"
            ) from None
        low, high = _extent(shape, strides, dtype.itemsize)
        queue = suai.get("syclobj")
        return ArrayView(data + offset * dtype.itemsize, dtype, dtype.itemsize, low, high, queue, obj)
    return _dlpack_view(obj, stream)


# DLPack (dlpack.h): DLTensor and DLManagedTensor, the legacy ("dltensor") capsule every producer offers.
class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    pass


DLDeleter = ctypes.CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", DLDeleter)]

_DL_CODES = {0: "int", 1: "uint", 2: "float", 6: "bool"}
BF16 = "bfloat16"

CAPI = ctypes.pythonapi
CAPI.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
CAPI.PyCapsule_IsValid.restype = c_int
CAPI.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
CAPI.PyCapsule_GetPointer.restype = c_void_p
CAPSULE_NAME = b"dltensor"


def _dl_dtype(obj: Any, dt: DLDataType) -> tuple[Any, int]:
    import numpy as np

    if dt.lanes != 1:
        raise bad_argument(obj, f"vector elements ({dt.lanes} lanes) are not supported", "pass scalar elements")
    if dt.code == 4 and dt.bits == 16:
        return BF16, 2
    kind = _DL_CODES.get(dt.code)
    if kind is None or dt.bits % 8:
        raise bad_argument(
            obj, f"DLPack dtype code {dt.code} with {dt.bits} bits is not supported", "pass int, float or bool"
        )
    return np.dtype(f"{kind}{dt.bits}" if kind != "bool" else "bool"), dt.bits // 8


def _dlpack_view(obj: Any, stream: Any) -> ArrayView:
    try:
        device = obj.__dlpack_device__()
    except Exception as exc:
        raise bad_argument(
            obj, f"__dlpack_device__ failed ({exc})", "pass a dpnp/dpctl array or a DLPack producer"
        ) from None
    if int(device[0]) != KDL_ONEAPI:
        raise bad_argument(
            obj,
            f"its DLPack device type is {int(device[0])}, not kDLOneAPI ({KDL_ONEAPI}): not SYCL device memory",
            "copy it to a dpnp array or the session first (dpnp.asarray / session.from_numpy)",
        )
    try:
        try:
            capsule = obj.__dlpack__(stream=stream) if stream is not None else obj.__dlpack__()
        except TypeError:  # a producer without the stream keyword
            capsule = obj.__dlpack__()
    except Exception as exc:
        raise bad_argument(
            obj, f"__dlpack__() failed ({exc})", "pass a dpnp/dpctl array or a DLPack producer"
        ) from None
    if not CAPI.PyCapsule_IsValid(capsule, CAPSULE_NAME):
        raise bad_argument(obj, "__dlpack__() did not return an unused 'dltensor' capsule", "pass a DLPack producer")
    managed = DLManagedTensor.from_address(CAPI.PyCapsule_GetPointer(capsule, CAPSULE_NAME))
    t = managed.dl_tensor
    dtype, itemsize = _dl_dtype(obj, t.dtype)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    low, high = _extent(shape, strides, itemsize)
    # The capsule stays unconsumed: dropping it (after the launch) calls the producer's deleter.
    return ArrayView((t.data or 0) + t.byte_offset, dtype, itemsize, low, high, None, (obj, capsule))


# --- ownership through UR ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AllocInfo:
    kind: str  # "host" | "device" | "shared" | "unknown"
    base: int
    size: int
    device: int  # UR device handle (0 for host USM)


def alloc_info(lib: Any, context: Any, address: int) -> AllocInfo:
    """``urUSMGetMemAllocInfo`` on ``address``: unknown to the context -> kind "unknown"."""
    raw = lib.raw
    kind = c_uint32(0)
    code = raw.urUSMGetMemAllocInfo(context, c_void_p(address), _api.USM_ALLOC_INFO_TYPE, 4, byref(kind), None)
    if code or kind.value not in _api.USM_TYPE_NAMES or kind.value == 0:
        return AllocInfo("unknown", 0, 0, 0)
    base, size, dev = c_void_p(), c_size_t(), c_void_p()
    if raw.urUSMGetMemAllocInfo(context, c_void_p(address), _api.USM_ALLOC_INFO_BASE_PTR, 8, byref(base), None):
        return AllocInfo("unknown", 0, 0, 0)
    if raw.urUSMGetMemAllocInfo(context, c_void_p(address), _api.USM_ALLOC_INFO_SIZE, 8, byref(size), None):
        return AllocInfo("unknown", 0, 0, 0)
    raw.urUSMGetMemAllocInfo(context, c_void_p(address), _api.USM_ALLOC_INFO_DEVICE, 8, byref(dev), None)
    return AllocInfo(_api.USM_TYPE_NAMES[kind.value], base.value or 0, size.value, dev.value or 0)


__all__ = [
    "KDL_ONEAPI",
    "AllocInfo",
    "ArrayView",
    "ForeignPointer",
    "alloc_info",
    "bad_argument",
    "view_of",
]
