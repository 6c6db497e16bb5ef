"""DLPack export of the kit's own memory (``USMAllocation.__dlpack__``, ``DeviceArray.__dlpack__``):
consumers such as ``dpnp.from_dlpack`` take it without a copy, on sessions over a SYCL context.
"""

from __future__ import annotations

import ctypes
import threading
from ctypes import POINTER, c_int, c_int64, c_void_p
from typing import Any, Protocol

from xpukit.runtime.ur.interop.arrays import (
    BF16,
    CAPI,
    CAPSULE_NAME,
    KDL_ONEAPI,
    DLDataType,
    DLDeleter,
    DLDevice,
    DLManagedTensor,
    DLTensor,
)

# --- DLPack export of the kit's memory ---------------------------------------------------------------

_EXPORTS: dict[int, tuple[Any, ...]] = {}  # manager_ctx -> (managed tensor, shape+strides, owner)
_EXPORTS_LOCK = threading.Lock()
_SERIAL = iter(range(1, 2**62))


class DlpackOwner(Protocol):
    """The memory a capsule lends (a USMAllocation): told when a consumer takes it and lets it go."""

    def dlpack_taken(self) -> None: ...
    def dlpack_released(self) -> None: ...


class ExportingSession(Protocol):
    """What an export uses of the memory's session (:class:`xpukit.runtime.ur.core.Session`)."""

    @property
    def sycl_queue(self) -> Any: ...  # a dpctl.SyclQueue, or None for a session over its own context
    def synchronize(self) -> None: ...


@DLDeleter
def _dl_deleter(managed: Any) -> None:
    with _EXPORTS_LOCK:
        entry = _EXPORTS.pop(managed.contents.manager_ctx or 0, None)
    if entry is not None:
        entry[2].dlpack_released()


CAPI.PyCapsule_New.argtypes = [c_void_p, c_void_p, c_void_p]
CAPI.PyCapsule_New.restype = ctypes.py_object
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, c_void_p)
_capi_raw = ctypes.PyDLL(None)  # the same C API, with raw PyObject* arguments (in a destructor)
_capi_raw.PyCapsule_IsValid.argtypes = [c_void_p, ctypes.c_char_p]
_capi_raw.PyCapsule_IsValid.restype = c_int
_capi_raw.PyCapsule_GetPointer.argtypes = [c_void_p, ctypes.c_char_p]
_capi_raw.PyCapsule_GetPointer.restype = c_void_p
_NAME_BUF = ctypes.create_string_buffer(CAPSULE_NAME)  # the capsule keeps this char*: module lifetime


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule: int) -> None:
    # A capsule nobody consumed (still named "dltensor") owns its tensor: call the deleter (DLPack rule).
    if _capi_raw.PyCapsule_IsValid(capsule, CAPSULE_NAME):
        ptr = _capi_raw.PyCapsule_GetPointer(capsule, CAPSULE_NAME)
        managed = DLManagedTensor.from_address(ptr)
        managed.deleter(ctypes.pointer(managed))


def _dl_dtype_of(dtype: Any) -> DLDataType:
    import numpy as np

    if str(dtype) == BF16:
        return DLDataType(4, 16, 1)
    dt = np.dtype(dtype)
    code = {"i": 0, "u": 1, "f": 2, "b": 6}.get(dt.kind)
    if code is None:
        raise BufferError(f"dtype {dt} has no DLPack code")
    return DLDataType(code, dt.itemsize * 8, 1)


def export_dlpack(owner: DlpackOwner, address: int, dtype: Any, shape: tuple[int, ...], device_id: int) -> Any:
    """A legacy DLPack capsule over ``address`` (C-contiguous ``shape`` of ``dtype``) on kDLOneAPI
    device ``device_id``. ``owner.dlpack_taken()`` now, ``owner.dlpack_released()`` when the
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
    owner.dlpack_taken()
    with _EXPORTS_LOCK:
        _EXPORTS[key] = (managed, dims, owner)
    try:
        return CAPI.PyCapsule_New(ctypes.addressof(managed), ctypes.addressof(_NAME_BUF),
                                   ctypes.cast(_capsule_destructor, c_void_p).value)  # fmt: skip
    except BaseException:
        with _EXPORTS_LOCK:
            _EXPORTS.pop(key, None)
        owner.dlpack_released()
        raise


def dlpack_device(session: ExportingSession) -> tuple[int, int]:
    """The DLPack device of ``session``'s memory: kDLOneAPI and its SYCL device's id."""
    if session.sycl_queue is None:
        raise BufferError(
            "DLPack export needs a session over a SYCL context (its consumers find memory through "
            "SYCL): this session made its own context"
        )
    return KDL_ONEAPI, int(session.sycl_queue.sycl_device.get_device_id())


def export(
    session: ExportingSession,
    owner: DlpackOwner,
    address: int,
    dtype: Any,
    shape: tuple[int, ...],
    dl_device: Any,
    copy: Any,
) -> Any:
    """``__dlpack__`` of ``owner`` (a USMAllocation of ``session``): ``shape`` of ``dtype`` at ``address``."""
    device = dlpack_device(session)
    if copy:
        raise BufferError("xpukit exports its memory without a copy only (copy=True asked for one)")
    if dl_device is not None and tuple(int(x) for x in dl_device) != device:
        raise BufferError(f"xpukit memory lives on DLPack device {device}, not {tuple(dl_device)}")
    # The consumer may read on any queue: everything this session queued is finished first.
    session.synchronize()
    return export_dlpack(owner, address, dtype, tuple(int(d) for d in shape), device[1])


__all__ = ["dlpack_device", "export", "export_dlpack"]
