"""Devices and memory the kit did not create: native handles of a SYCL queue (dpctl, dpnp), foreign
arrays as kernel arguments (dpnp/dpctl arrays, ``__sycl_usm_array_interface__`` objects, DLPack
producers of device type kDLOneAPI), and DLPack export of the kit's own memory.

A session opened over SYCL's context (:meth:`xpukit.runtime.ur.Session.from_sycl`) knows SYCL's USM
pointers through UR itself (``urUSMGetMemAllocInfo``): every foreign pointer is checked there (type,
base, size, device) before a launch, and its allocation is lent to the session's table; what a
session holds and how its launches are ordered is :mod:`xpukit.runtime.ur.foreign_state`
(docs/ur.md, "dpnp and foreign memory").
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import threading
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
from xpukit.runtime.ur.errors import BadDeviceRequest, KernelArgumentError

KDL_ONEAPI = 14  # DLPack's device type for SYCL/oneAPI USM

# --- native handles of a SYCL object, through libsycl (dpctl exposes only sycl::X*) ---------------
_SYCL_GET_NATIVE = {
    "context": "_ZNK4sycl3_V17context9getNativeEv",
    "device": "_ZNK4sycl3_V16device9getNativeEv",
    "queue": "_ZNK4sycl3_V15queue9getNativeERi",
}


def _loaded_library(fragment: str) -> str | None:
    """Path of a shared library already mapped into this process whose file name contains ``fragment``."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) >= 6 and fragment in parts[-1].rsplit("/", 1)[-1]:
                return parts[-1]
    return None


_SYCL: Any = None
_SYCL_LOCK = threading.Lock()


def _libsycl() -> Any:
    global _SYCL
    with _SYCL_LOCK:
        if _SYCL is None:
            path = _loaded_library("libsycl.so")
            if path is None:
                raise BadDeviceRequest(
                    "no SYCL runtime (libsycl.so) is loaded in this process",
                    "import dpctl (or dpnp) and pass one of its queues",
                )
            lib = ctypes.CDLL(path)
            for name in _SYCL_GET_NATIVE.values():
                fn = getattr(lib, name)
                fn.restype = c_void_p
            lib._ZNK4sycl3_V17context9getNativeEv.argtypes = [c_void_p]
            lib._ZNK4sycl3_V16device9getNativeEv.argtypes = [c_void_p]
            lib._ZNK4sycl3_V15queue9getNativeERi.argtypes = [c_void_p, POINTER(c_int)]
            lib._ZNK4sycl3_V15queue16ext_oneapi_emptyEv.restype = ctypes.c_bool
            lib._ZNK4sycl3_V15queue16ext_oneapi_emptyEv.argtypes = [c_void_p]
            _SYCL = lib
        return _SYCL


@dataclasses.dataclass(frozen=True)
class NativeHandles:
    """What ``Session.from_native`` opens over: a backend's context, device and optionally queue."""

    backend: str  # "opencl" | "level_zero"
    context: int
    device: int
    queue: int = 0
    queue_desc: int = 0  # SYCL's native-handle descriptor of the queue (Level Zero: immediate command list or not)
    owned: bool = False  # the handles carry a reference for the session to take over (OpenCL's get_native)


def sycl_queue_of(obj: Any) -> Any:
    """A ``dpctl.SyclQueue`` from a queue, or from anything that carries one (a dpnp/dpctl array)."""
    try:
        import dpctl
    except ImportError:
        raise BadDeviceRequest("dpctl is not installed", "pip install dpctl (or dpnp), or use Session()") from None
    if isinstance(obj, dpctl.SyclQueue):
        return obj
    queue = getattr(obj, "sycl_queue", None)
    if isinstance(queue, dpctl.SyclQueue):
        return queue
    raise BadDeviceRequest(
        f"a {type(obj).__name__} is not a SYCL queue and carries none",
        "pass a dpctl.SyclQueue, or a dpnp/dpctl array (its .sycl_queue is used)",
    )


def sycl_queue_empty() -> Any:
    """``sycl::queue::ext_oneapi_empty`` (every command submitted to the queue has completed, host
    tasks too), called on dpctl's ``addressof_ref()``: ``empty(queue.addressof_ref()) -> bool``."""
    return _libsycl()._ZNK4sycl3_V15queue16ext_oneapi_emptyEv


@functools.cache
def dpctl_submit_functions() -> tuple[int, int]:
    """Addresses of dpctl's ``DPCTLQueue_SubmitNDRange`` and ``DPCTLEvent_Delete`` (its C API,
    libDPCTLSyclInterface, loaded with dpctl): what a launcher submits to SYCL with."""
    path = _loaded_library("libDPCTLSyclInterface")
    if path is None:
        raise BadDeviceRequest("dpctl's C library (libDPCTLSyclInterface) is not loaded", "import dpctl")
    lib = ctypes.CDLL(path)
    return (
        ctypes.cast(lib.DPCTLQueue_SubmitNDRange, c_void_p).value or 0,
        ctypes.cast(lib.DPCTLEvent_Delete, c_void_p).value or 0,
    )


def sycl_native_handles(queue: Any) -> NativeHandles:
    """The native context, device and queue of a ``dpctl.SyclQueue`` (what ``sycl::get_native``
    returns: on OpenCL the context and queue come retained, and the session takes them over)."""
    import dpctl

    backend = {dpctl.backend_type.opencl: "opencl", dpctl.backend_type.level_zero: "level_zero"}.get(
        queue.sycl_device.backend
    )
    if backend is None:
        raise BadDeviceRequest(
            f"SYCL queue on backend {queue.sycl_device.backend} is not supported",
            "use a queue on the OpenCL or Level Zero backend",
        )
    lib = _libsycl()
    ctx = lib._ZNK4sycl3_V17context9getNativeEv(queue.sycl_context.addressof_ref()) or 0
    dev = lib._ZNK4sycl3_V16device9getNativeEv(queue.sycl_device.addressof_ref()) or 0
    desc = c_int(0)
    q = lib._ZNK4sycl3_V15queue9getNativeERi(queue.addressof_ref(), byref(desc)) or 0
    return NativeHandles(backend, ctx, dev, q, desc.value, owned=backend == "opencl")


def release_opencl(handles: NativeHandles, lib_path: str | None = None) -> None:
    """Give back the references ``sycl_native_handles`` took (when no UR object took them over)."""
    path = lib_path or _loaded_library("libOpenCL.so")
    if not handles.owned or path is None:
        return
    ocl = ctypes.CDLL(path)
    if handles.queue:
        ocl.clReleaseCommandQueue(c_void_p(handles.queue))
    if handles.context:
        ocl.clReleaseContext(c_void_p(handles.context))


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


def is_foreign_array(t: type) -> bool:
    """Whether objects of type ``t`` speak a foreign-array protocol (SUAI, or DLPack's two methods)."""
    return hasattr(t, "__sycl_usm_array_interface__") or (hasattr(t, "__dlpack__") and hasattr(t, "__dlpack_device__"))


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


def _bad(obj: Any, why: str, fix: str) -> KernelArgumentError:
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
            raise _bad(
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
_BF16 = "bfloat16"

_capi = ctypes.pythonapi
_capi.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capi.PyCapsule_IsValid.restype = c_int
_capi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capi.PyCapsule_GetPointer.restype = c_void_p
_CAPSULE_NAME = b"dltensor"


def _dl_dtype(obj: Any, dt: DLDataType) -> tuple[Any, int]:
    import numpy as np

    if dt.lanes != 1:
        raise _bad(obj, f"vector elements ({dt.lanes} lanes) are not supported", "pass scalar elements")
    if dt.code == 4 and dt.bits == 16:
        return _BF16, 2
    kind = _DL_CODES.get(dt.code)
    if kind is None or dt.bits % 8:
        raise _bad(obj, f"DLPack dtype code {dt.code} with {dt.bits} bits is not supported", "pass int, float or bool")
    return np.dtype(f"{kind}{dt.bits}" if kind != "bool" else "bool"), dt.bits // 8


def _dlpack_view(obj: Any, stream: Any) -> ArrayView:
    try:
        device = obj.__dlpack_device__()
    except Exception as exc:
        raise _bad(obj, f"__dlpack_device__ failed ({exc})", "pass a dpnp/dpctl array or a DLPack producer") from None
    if int(device[0]) != KDL_ONEAPI:
        raise _bad(
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
        raise _bad(obj, f"__dlpack__() failed ({exc})", "pass a dpnp/dpctl array or a DLPack producer") from None
    if not _capi.PyCapsule_IsValid(capsule, _CAPSULE_NAME):
        raise _bad(obj, "__dlpack__() did not return an unused 'dltensor' capsule", "pass a DLPack producer")
    managed = DLManagedTensor.from_address(_capi.PyCapsule_GetPointer(capsule, _CAPSULE_NAME))
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


# --- DLPack export of the kit's memory ---------------------------------------------------------------

_EXPORTS: dict[int, tuple[Any, ...]] = {}  # manager_ctx -> (managed tensor, shape+strides, owner)
_EXPORTS_LOCK = threading.Lock()
_SERIAL = iter(range(1, 2**62))


@DLDeleter
def _dl_deleter(managed: Any) -> None:
    with _EXPORTS_LOCK:
        entry = _EXPORTS.pop(managed.contents.manager_ctx or 0, None)
    if entry is not None:
        entry[2]._export_released()


_capi.PyCapsule_New.argtypes = [c_void_p, c_void_p, c_void_p]
_capi.PyCapsule_New.restype = ctypes.py_object
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, c_void_p)
_capi_raw = ctypes.PyDLL(None)  # the same C API, with raw PyObject* arguments (in a destructor)
_capi_raw.PyCapsule_IsValid.argtypes = [c_void_p, ctypes.c_char_p]
_capi_raw.PyCapsule_IsValid.restype = c_int
_capi_raw.PyCapsule_GetPointer.argtypes = [c_void_p, ctypes.c_char_p]
_capi_raw.PyCapsule_GetPointer.restype = c_void_p
_NAME_BUF = ctypes.create_string_buffer(_CAPSULE_NAME)  # the capsule keeps this char*: module lifetime


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule: int) -> None:
    # A capsule nobody consumed (still named "dltensor") owns its tensor: call the deleter (DLPack rule).
    if _capi_raw.PyCapsule_IsValid(capsule, _CAPSULE_NAME):
        ptr = _capi_raw.PyCapsule_GetPointer(capsule, _CAPSULE_NAME)
        managed = DLManagedTensor.from_address(ptr)
        managed.deleter(ctypes.pointer(managed))


def _dl_dtype_of(dtype: Any) -> DLDataType:
    import numpy as np

    if str(dtype) == _BF16:
        return DLDataType(4, 16, 1)
    dt = np.dtype(dtype)
    code = {"i": 0, "u": 1, "f": 2, "b": 6}.get(dt.kind)
    if code is None:
        raise BufferError(f"dtype {dt} has no DLPack code")
    return DLDataType(code, dt.itemsize * 8, 1)


def export_dlpack(owner: Any, address: int, dtype: Any, shape: tuple[int, ...], device_id: int) -> Any:
    """A legacy DLPack capsule over ``address`` (C-contiguous ``shape`` of ``dtype``) on kDLOneAPI
    device ``device_id``. ``owner._export_taken()`` now, ``owner._export_released()`` when the
    consumer (or the unconsumed capsule) lets go."""
    ndim = len(shape)
    strides = [1] * ndim
    for i in range(ndim - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    # shape, then strides (in elements, given explicitly: some consumers do not accept NULL)
    dims = (c_int64 * max(2 * ndim, 1))(*shape, *strides)
    managed = DLManagedTensor()
    managed.dl_tensor = DLTensor(address, DLDevice(KDL_ONEAPI, device_id), ndim, _dl_dtype_of(dtype),
                                 ctypes.cast(dims, POINTER(c_int64)),
                                 ctypes.cast(ctypes.addressof(dims) + 8 * ndim, POINTER(c_int64)), 0)  # fmt: skip
    key = next(_SERIAL)
    managed.manager_ctx = key
    managed.deleter = _dl_deleter
    owner._export_taken()
    with _EXPORTS_LOCK:
        _EXPORTS[key] = (managed, dims, owner)
    try:
        return _capi.PyCapsule_New(ctypes.addressof(managed), ctypes.addressof(_NAME_BUF),
                                   ctypes.cast(_capsule_destructor, c_void_p).value)  # fmt: skip
    except BaseException:
        with _EXPORTS_LOCK:
            _EXPORTS.pop(key, None)
        owner._export_released()
        raise


__all__ = [
    "KDL_ONEAPI",
    "AllocInfo",
    "ArrayView",
    "ForeignPointer",
    "NativeHandles",
    "alloc_info",
    "export_dlpack",
    "is_foreign_array",
    "release_opencl",
    "sycl_native_handles",
    "sycl_queue_empty",
    "sycl_queue_of",
    "view_of",
]
