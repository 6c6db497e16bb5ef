"""SYCL's side of a session over someone else's device: the native handles of a SYCL queue
(through libsycl: dpctl exposes only ``sycl::X*``), whether a SYCL queue has run everything
submitted to it, and what a session opened over native OpenCL handles gives back when no UR object
took them over.
"""

from __future__ import annotations

import ctypes
import dataclasses
import threading
from ctypes import POINTER, byref, c_int, c_void_p
from typing import Any

from xpukit.runtime.ur.errors import BadDeviceRequest

# --- native handles of a SYCL object, through libsycl (dpctl exposes only sycl::X*) ---------------
_SYCL_GET_NATIVE = {
    "context": "_ZNK4sycl3_V17context9getNativeEv",
    "device": "_ZNK4sycl3_V16device9getNativeEv",
    "queue": "_ZNK4sycl3_V15queue9getNativeERi",
}


def loaded_library(fragment: str) -> str | None:
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
            path = loaded_library("libsycl.so")
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


def in_order_queue(queue: Any) -> Any:
    """``queue`` itself when it is in-order, else a new in-order ``dpctl.SyclQueue`` on its context
    and device (kernels a session launches must follow the commands before them)."""
    import dpctl

    if queue.is_in_order:
        return queue
    return dpctl.SyclQueue(queue.sycl_context, queue.sycl_device, property="in_order")


def sycl_queue_empty() -> Any:
    """``sycl::queue::ext_oneapi_empty`` (every command submitted to the queue has completed, host
    tasks too), called on dpctl's ``addressof_ref()``: ``empty(queue.addressof_ref()) -> bool``."""
    return _libsycl()._ZNK4sycl3_V15queue16ext_oneapi_emptyEv


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
    path = lib_path or loaded_library("libOpenCL.so")
    if not handles.owned or path is None:
        return
    ocl = ctypes.CDLL(path)
    if handles.queue:
        ocl.clReleaseCommandQueue(c_void_p(handles.queue))
    if handles.context:
        ocl.clReleaseContext(c_void_p(handles.context))


__all__ = [
    "NativeHandles",
    "in_order_queue",
    "loaded_library",
    "release_opencl",
    "sycl_native_handles",
    "sycl_queue_empty",
    "sycl_queue_of",
]
