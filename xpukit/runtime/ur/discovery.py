"""Device discovery: UR's adapters, platforms and devices, the device a request picks, what the
device reports (:class:`DeviceInfo`), and the context a session opens on it; also the same for
another runtime's native handles (``Session.from_native``/``from_sycl``). Nothing here owns what it
creates: the session (:mod:`xpukit.runtime.ur.core`) takes every handle over and releases it.
"""

from __future__ import annotations

import ctypes
import dataclasses
from ctypes import byref, c_size_t, c_uint32, c_void_p
from typing import Any

from xpukit.runtime.ur import _api
from xpukit.runtime.ur.errors import BadDeviceRequest, DeviceNotFound, UrError, error_class
from xpukit.runtime.ur.interop.sycl import NativeHandles, release_opencl
from xpukit.runtime.ur.loader import UrLibrary, icd_filenames_without

DEVICE_CHOICES = ("auto", "gpu", "cpu")


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    name: str
    type: str  # "gpu" | "cpu"
    backend: str  # "level_zero" | "opencl" | ...
    driver_version: str
    ur_release: str
    vendor: str
    platform: str
    max_work_group_size: int
    max_num_sub_groups: int
    sub_group_sizes: tuple[int, ...]
    has_fp64: bool
    compute_units: int
    global_mem_size: int
    local_mem_size: int
    ip_version: int  # 0 where the adapter does not report it (OpenCL CPU)
    extensions: tuple[str, ...]

    def cache_key(self) -> str:
        """What a native binary depends on: device, driver, backend."""
        return f"{self.backend}|{self.name}|{self.driver_version}|{self.ip_version:#x}"


@dataclasses.dataclass(frozen=True)
class OpenedDevice:
    """What a session opens: the UR device and context handles, what the device reports, and a note
    for the user (the CPU fallback of ``"auto"``)."""

    device: int
    context: int
    info: DeviceInfo
    note: str = ""


def get_info(lib: UrLibrary, fn: str, handle: Any, prop: int) -> bytes:
    """The raw bytes of one ``ur*GetInfo`` property (size query, then the value)."""
    size = c_size_t()
    getattr(lib, fn)(handle, prop, 0, None, byref(size))
    buf = ctypes.create_string_buffer(size.value or 1)
    getattr(lib, fn)(handle, prop, size.value, buf, None)
    return buf.raw[: size.value]


def _str(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode(errors="replace")


def as_uint(raw: bytes) -> int:
    """A little-endian integer property (0 when the adapter returned nothing)."""
    return int.from_bytes(raw[:8], "little") if raw else 0


def device_info(lib: UrLibrary, dev: Any, backend: str, platform: str) -> DeviceInfo:
    def info(prop: int) -> bytes:
        return get_info(lib, "urDeviceGetInfo", dev, prop)

    def optional(prop: int, default: bytes = b"") -> bytes:
        try:
            return info(prop)
        except UrError:
            return default

    sg_raw = optional(_api.DEVICE_INFO_SUB_GROUP_SIZES_INTEL)
    sub_groups = tuple(int.from_bytes(sg_raw[i : i + 4], "little") for i in range(0, len(sg_raw), 4))
    return DeviceInfo(
        name=_str(info(_api.DEVICE_INFO_NAME)),
        type=_api.DEVICE_TYPE_NAMES.get(as_uint(info(_api.DEVICE_INFO_TYPE)), "unknown"),
        backend=backend,
        driver_version=_str(info(_api.DEVICE_INFO_DRIVER_VERSION)),
        ur_release=lib.release.version,
        vendor=_str(optional(_api.DEVICE_INFO_VENDOR)),
        platform=platform,
        max_work_group_size=as_uint(info(_api.DEVICE_INFO_MAX_WORK_GROUP_SIZE)),
        max_num_sub_groups=as_uint(optional(_api.DEVICE_INFO_MAX_NUM_SUB_GROUPS)),
        sub_group_sizes=sub_groups,
        has_fp64=as_uint(optional(_api.DEVICE_INFO_DOUBLE_FP_CONFIG)) != 0,
        compute_units=as_uint(optional(_api.DEVICE_INFO_MAX_COMPUTE_UNITS)),
        global_mem_size=as_uint(optional(_api.DEVICE_INFO_GLOBAL_MEM_SIZE)),
        local_mem_size=as_uint(optional(_api.DEVICE_INFO_LOCAL_MEM_SIZE)),
        ip_version=as_uint(optional(_api.DEVICE_INFO_IP_VERSION)),
        extensions=tuple(_str(optional(_api.DEVICE_INFO_EXTENSIONS)).split()),
    )


def adapters(lib: UrLibrary) -> list[int]:
    """Every adapter the loader found (each holds a reference: ``urAdapterRelease`` it)."""
    n = c_uint32()
    lib.urAdapterGet(0, None, byref(n))
    found = (c_void_p * n.value)()
    lib.urAdapterGet(n.value, found, None)
    return [a for a in found if a]


def platforms(lib: UrLibrary, adapter_handles: list[int]) -> list[tuple[Any, str, str]]:
    """(platform handle, backend name, platform name) for every platform of the adapters."""
    found: list[Any] = []
    groups = [[a] for a in adapter_handles]
    if lib.abi.platform_get_takes_adapter_array:
        groups = [adapter_handles] if adapter_handles else []
    for group in groups:
        count = c_uint32()
        if lib.abi.platform_get_takes_adapter_array:
            arr = (c_void_p * len(group))(*group)
            lib.urPlatformGet(arr, len(group), 0, None, byref(count))
            plats = (c_void_p * count.value)()
            if count.value:
                lib.urPlatformGet(arr, len(group), count.value, plats, None)
        else:
            lib.urPlatformGet(group[0], 0, None, byref(count))
            plats = (c_void_p * count.value)()
            if count.value:
                lib.urPlatformGet(group[0], count.value, plats, None)
        found.extend(p for p in plats if p)
    out = []
    for p in found:
        backend = _api.BACKEND_NAMES.get(
            as_uint(get_info(lib, "urPlatformGetInfo", p, _api.PLATFORM_INFO_BACKEND)), "unknown"
        )
        name = _str(get_info(lib, "urPlatformGetInfo", p, _api.PLATFORM_INFO_NAME))
        out.append((p, backend, name))
    return out


def devices(lib: UrLibrary, platform: Any, dtype: int) -> list[Any]:
    """The platform's devices of type ``dtype`` (none is an empty list, not an error)."""
    n = c_uint32()
    code = lib.raw.urDeviceGet(platform, dtype, 0, None, byref(n))
    if code == _api.RESULT_CODES["UR_RESULT_ERROR_DEVICE_NOT_FOUND"] or (code == 0 and n.value == 0):
        return []
    if code:
        raise error_class(code)("urDeviceGet")
    devs = (c_void_p * n.value)()
    lib.urDeviceGet(platform, dtype, n.value, devs, None)
    return [d for d in devs if d]


def _first(lib: UrLibrary, plats: list[tuple[Any, str, str]], dtype: int) -> tuple[Any, str, str] | None:
    for p, backend, pname in plats:
        devs = devices(lib, p, dtype)
        if devs:
            return devs[0], backend, pname
    return None


def _listed(plats: list[tuple[Any, str, str]]) -> str:
    return ", ".join(f"{n} [{b}]" for _, b, n in plats) or "none"


def open_device(lib: UrLibrary, request: str, adapter_handles: list[int]) -> OpenedDevice:
    """The device ``request`` picks (``"auto"``: a GPU through Level Zero first, else the CPU device)
    and a new context on it."""
    plats = platforms(lib, adapter_handles)
    chosen = None
    note = ""
    if request in ("auto", "gpu"):
        # Level Zero first: Triton's Intel GPU path targets it; OpenCL GPUs are a last resort.
        chosen = _first(lib, sorted(plats, key=lambda p: p[1] != "level_zero"), _api.DEVICE_TYPE_GPU)
        if chosen is None and request == "gpu":
            raise DeviceNotFound(
                f"no GPU device found through UR (platforms: {_listed(plats)})",
                "check /dev/dri is visible (docker: --device /dev/dri) and the Level Zero "
                "driver is installed, or use --device cpu",
            )
    if chosen is None:
        chosen = _first(lib, plats, _api.DEVICE_TYPE_CPU)
        if chosen is None:
            fix = (
                "pip install intel-opencl-rt (Intel's CPU OpenCL runtime) and set "
                "OCL_ICD_FILENAMES=<prefix>/lib/libintelocl.so"
            )
            if icd_filenames_without(lib.cpu_runtime):  # the user's value, which the kit kept
                fix = f"your OCL_ICD_FILENAMES leaves out Intel's CPU runtime: add {lib.cpu_runtime} to it, or unset it"
            raise DeviceNotFound(f"no CPU device found through UR (platforms: {_listed(plats)})", fix)
        if request == "auto":
            note = "no GPU found through Level Zero; using the CPU device"
    dev, backend, pname = chosen
    info = device_info(lib, dev, backend, pname)
    one_device = (c_void_p * 1)(dev)
    ctx = c_void_p()
    lib.urContextCreate(1, one_device, None, byref(ctx))
    return OpenedDevice(dev, ctx.value or 0, info, note)


def open_native(lib: UrLibrary, handles: NativeHandles, adapter_handles: list[int]) -> tuple[OpenedDevice, int]:
    """UR's device, context and (when ``handles`` has one) queue over another runtime's native
    ones, the queue in-order; with ``owned`` UR's objects take the native references over. On an
    error nothing is left behind: what UR made is released, and so are the native references no
    UR object took over."""
    taken = {"context": False, "queue": False}
    opened, queue = None, 0
    try:
        opened = _native_device(lib, handles, adapter_handles)
        taken["context"] = True
        if handles.queue:
            queue = _native_queue(lib, handles, opened.context, opened.device)
            taken["queue"] = True
            _check_in_order(lib, queue)
        return opened, queue
    except BaseException:
        if queue:
            lib.urQueueRelease(c_void_p(queue))
        if opened is not None:
            lib.urContextRelease(c_void_p(opened.context))
        raise
    finally:
        if handles.owned and not all(taken.values()):
            release_opencl(
                NativeHandles(
                    handles.backend,
                    0 if taken["context"] else handles.context,
                    0,
                    0 if taken["queue"] else handles.queue,
                    owned=True,
                )
            )


def _native_device(lib: UrLibrary, handles: NativeHandles, adapter_handles: list[int]) -> OpenedDevice:
    want = {"opencl": _api.BACKEND_OPENCL, "level_zero": _api.BACKEND_LEVEL_ZERO}.get(handles.backend)
    if want is None:
        raise BadDeviceRequest(f"unknown native backend {handles.backend!r}", "use 'opencl' or 'level_zero'")
    if not handles.context or not handles.device:
        raise BadDeviceRequest("a null native context or device handle", "pass the runtime's live handles")
    adapter = next(
        (
            a
            for a in adapter_handles
            if as_uint(get_info(lib, "urAdapterGetInfo", c_void_p(a), _api.ADAPTER_INFO_BACKEND)) == want
        ),
        None,
    )
    if adapter is None:
        raise DeviceNotFound(
            f"this UR loader has no {handles.backend} adapter", "install the runtime the handles come from"
        )
    dev = c_void_p()
    props = _api.NativeProperties(_api.STRUCTURE_TYPE_DEVICE_NATIVE_PROPERTIES, None, False)
    lib.urDeviceCreateWithNativeHandle(c_void_p(handles.device), c_void_p(adapter), byref(props), byref(dev))
    platform = get_info(lib, "urDeviceGetInfo", dev, _api.DEVICE_INFO_PLATFORM)
    pname = _str(get_info(lib, "urPlatformGetInfo", c_void_p(as_uint(platform)), _api.PLATFORM_INFO_NAME))
    info = device_info(lib, dev, handles.backend, pname)
    devs = (c_void_p * 1)(dev.value)
    ctx = c_void_p()
    props = _api.NativeProperties(_api.STRUCTURE_TYPE_CONTEXT_NATIVE_PROPERTIES, None, handles.owned)
    lib.urContextCreateWithNativeHandle(c_void_p(handles.context), c_void_p(adapter), 1, devs, byref(props), byref(ctx))
    return OpenedDevice(dev.value or 0, ctx.value or 0, info)


def _native_queue(lib: UrLibrary, handles: NativeHandles, context: int, device: int) -> int:
    native_data = ctypes.c_int(handles.queue_desc)
    desc = _api.QueueNativeDesc(_api.STRUCTURE_TYPE_QUEUE_NATIVE_DESC, None, ctypes.addressof(native_data))
    qprops = _api.NativeProperties(_api.STRUCTURE_TYPE_QUEUE_NATIVE_PROPERTIES, None, handles.owned)
    if handles.backend == "level_zero":
        qprops.pNext = ctypes.addressof(desc)
    out = c_void_p()
    lib.urQueueCreateWithNativeHandle(c_void_p(handles.queue), c_void_p(context), c_void_p(device), byref(qprops),
                                      byref(out))  # fmt: skip
    return out.value or 0


def _check_in_order(lib: UrLibrary, queue: int) -> None:
    """Refuse an out-of-order queue: kernels on it could overtake the commands they depend on."""
    flags = as_uint(get_info(lib, "urQueueGetInfo", c_void_p(queue), _api.QUEUE_INFO_FLAGS))
    if flags & _api.QUEUE_FLAG_OUT_OF_ORDER_EXEC_MODE_ENABLE:
        raise BadDeviceRequest(
            "the native queue is out-of-order: kernels on it could run before the commands they depend on",
            "pass an in-order queue, none (the session makes its own), or use Session.from_sycl(queue)",
        )


__all__ = [
    "DEVICE_CHOICES",
    "DeviceInfo",
    "OpenedDevice",
    "adapters",
    "device_info",
    "devices",
    "get_info",
    "open_device",
    "open_native",
    "platforms",
]
