"""Raw Unified Runtime declarations: result codes, enums and per-release C prototypes.

Everything here was read from ``ur_api.h`` of the release it names (intel-sycl-rt wheels
2025.0.5, 2025.1.1, 2025.2.2, 2025.3.3 (``include/ur_api.h``), 2026.0.0, 2026.1.2 and 2026.2.0
(``include/unified-runtime/ur_api.h``)) and from the loaders' exported symbols. Enum values used
here did not change between those releases; the prototypes that did are spelled out per release
in ``RELEASE_ABIS``. Every release reports UR API 0.12 from 2025.2 on and ships
``libur_loader.so.0.12.0``: version numbers cannot tell them apart, exported symbols can.
"""

from __future__ import annotations

import ctypes
import dataclasses
import enum
from ctypes import POINTER, c_bool, c_char_p, c_int32, c_size_t, c_uint32, c_void_p

# --- result codes (ur_result_t) -------------------------------------------------------------
_RESULTS = """
SUCCESS 0
ERROR_INVALID_OPERATION 1
ERROR_INVALID_QUEUE_PROPERTIES 2
ERROR_INVALID_QUEUE 3
ERROR_INVALID_VALUE 4
ERROR_INVALID_CONTEXT 5
ERROR_INVALID_PLATFORM 6
ERROR_INVALID_BINARY 7
ERROR_INVALID_PROGRAM 8
ERROR_INVALID_SAMPLER 9
ERROR_INVALID_BUFFER_SIZE 10
ERROR_INVALID_MEM_OBJECT 11
ERROR_INVALID_EVENT 12
ERROR_INVALID_EVENT_WAIT_LIST 13
ERROR_MISALIGNED_SUB_BUFFER_OFFSET 14
ERROR_INVALID_WORK_GROUP_SIZE 15
ERROR_COMPILER_NOT_AVAILABLE 16
ERROR_PROFILING_INFO_NOT_AVAILABLE 17
ERROR_DEVICE_NOT_FOUND 18
ERROR_INVALID_DEVICE 19
ERROR_DEVICE_LOST 20
ERROR_DEVICE_REQUIRES_RESET 21
ERROR_DEVICE_IN_LOW_POWER_STATE 22
ERROR_DEVICE_PARTITION_FAILED 23
ERROR_INVALID_DEVICE_PARTITION_COUNT 24
ERROR_INVALID_WORK_ITEM_SIZE 25
ERROR_INVALID_WORK_DIMENSION 26
ERROR_INVALID_KERNEL_ARGS 27
ERROR_INVALID_KERNEL 28
ERROR_INVALID_KERNEL_NAME 29
ERROR_INVALID_KERNEL_ARGUMENT_INDEX 30
ERROR_INVALID_KERNEL_ARGUMENT_SIZE 31
ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE 32
ERROR_INVALID_IMAGE_SIZE 33
ERROR_INVALID_IMAGE_FORMAT_DESCRIPTOR 34
ERROR_MEM_OBJECT_ALLOCATION_FAILURE 35
ERROR_INVALID_PROGRAM_EXECUTABLE 36
ERROR_UNINITIALIZED 37
ERROR_OUT_OF_HOST_MEMORY 38
ERROR_OUT_OF_DEVICE_MEMORY 39
ERROR_OUT_OF_RESOURCES 40
ERROR_PROGRAM_BUILD_FAILURE 41
ERROR_PROGRAM_LINK_FAILURE 42
ERROR_UNSUPPORTED_VERSION 43
ERROR_UNSUPPORTED_FEATURE 44
ERROR_INVALID_ARGUMENT 45
ERROR_INVALID_NULL_HANDLE 46
ERROR_HANDLE_OBJECT_IN_USE 47
ERROR_INVALID_NULL_POINTER 48
ERROR_INVALID_SIZE 49
ERROR_UNSUPPORTED_SIZE 50
ERROR_UNSUPPORTED_ALIGNMENT 51
ERROR_INVALID_SYNCHRONIZATION_OBJECT 52
ERROR_INVALID_ENUMERATION 53
ERROR_UNSUPPORTED_ENUMERATION 54
ERROR_UNSUPPORTED_IMAGE_FORMAT 55
ERROR_INVALID_NATIVE_BINARY 56
ERROR_INVALID_GLOBAL_NAME 57
ERROR_FUNCTION_ADDRESS_NOT_AVAILABLE 58
ERROR_INVALID_GROUP_SIZE_DIMENSION 59
ERROR_INVALID_GLOBAL_WIDTH_DIMENSION 60
ERROR_PROGRAM_UNLINKED 61
ERROR_OVERLAPPING_REGIONS 62
ERROR_INVALID_HOST_PTR 63
ERROR_INVALID_USM_SIZE 64
ERROR_OBJECT_ALLOCATION_FAILURE 65
ERROR_ADAPTER_SPECIFIC 66
ERROR_LAYER_NOT_PRESENT 67
ERROR_IN_EVENT_LIST_EXEC_STATUS 68
ERROR_DEVICE_NOT_AVAILABLE 69
ERROR_INVALID_SPEC_ID 70
ERROR_INVALID_COMMAND_BUFFER_EXP 4096
ERROR_INVALID_COMMAND_BUFFER_SYNC_POINT_EXP 4097
ERROR_INVALID_COMMAND_BUFFER_SYNC_POINT_WAIT_LIST_EXP 4098
ERROR_INVALID_COMMAND_BUFFER_COMMAND_HANDLE_EXP 4099
ERROR_UNKNOWN 2147483646
"""
RESULT_NAMES: dict[int, str] = {
    int(code): "UR_RESULT_" + name for name, code in (line.split() for line in _RESULTS.strip().splitlines())
}
RESULT_CODES: dict[str, int] = {name: code for code, name in RESULT_NAMES.items()}

# --- enums (values identical in 2025.0-2025.3) ------------------------------------------------
DEVICE_TYPE_ALL = 2
DEVICE_TYPE_GPU = 3
DEVICE_TYPE_CPU = 4
DEVICE_TYPE_NAMES = {1: "default", 2: "all", 3: "gpu", 4: "cpu", 5: "fpga", 6: "mca", 7: "vpu"}

PLATFORM_INFO_NAME = 1
PLATFORM_INFO_VERSION = 3
PLATFORM_INFO_BACKEND = 6
BACKEND_NAMES = {0: "unknown", 1: "level_zero", 2: "opencl", 3: "cuda", 4: "hip", 5: "native_cpu"}
BACKEND_LEVEL_ZERO = 1
BACKEND_OPENCL = 2

DEVICE_INFO_TYPE = 0
DEVICE_INFO_MAX_COMPUTE_UNITS = 3
DEVICE_INFO_MAX_WORK_GROUP_SIZE = 6
DEVICE_INFO_DOUBLE_FP_CONFIG = 9
DEVICE_INFO_GLOBAL_MEM_SIZE = 46
DEVICE_INFO_LOCAL_MEM_SIZE = 51
DEVICE_INFO_PLATFORM = 63
DEVICE_INFO_IL_VERSION = 65
DEVICE_INFO_NAME = 66
DEVICE_INFO_VENDOR = 67
DEVICE_INFO_DRIVER_VERSION = 68
DEVICE_INFO_VERSION = 70
DEVICE_INFO_EXTENSIONS = 72
DEVICE_INFO_MAX_NUM_SUB_GROUPS = 80
DEVICE_INFO_SUB_GROUP_SIZES_INTEL = 82
DEVICE_INFO_IP_VERSION = 113

PROGRAM_INFO_BINARY_SIZES = 5
PROGRAM_INFO_BINARIES = 6
PROGRAM_INFO_NUM_KERNELS = 7
PROGRAM_INFO_KERNEL_NAMES = 8
PROGRAM_BUILD_INFO_LOG = 2

PROFILING_INFO_COMMAND_START = 2  # ur_profiling_info_t
PROFILING_INFO_COMMAND_END = 3

STRUCTURE_TYPE_QUEUE_PROPERTIES = 14  # ur_structure_type_t
STRUCTURE_TYPE_CONTEXT_NATIVE_PROPERTIES = 16
STRUCTURE_TYPE_QUEUE_NATIVE_PROPERTIES = 18
STRUCTURE_TYPE_DEVICE_NATIVE_PROPERTIES = 22
STRUCTURE_TYPE_QUEUE_NATIVE_DESC = 25
ADAPTER_INFO_BACKEND = 0  # ur_adapter_info_t; the value is a ur_backend_t (BACKEND_NAMES)
QUEUE_INFO_FLAGS = 3  # ur_queue_info_t
QUEUE_FLAG_OUT_OF_ORDER_EXEC_MODE_ENABLE = 0x1
USM_ALLOC_INFO_TYPE = 0  # ur_usm_alloc_info_t
USM_ALLOC_INFO_BASE_PTR = 1
USM_ALLOC_INFO_SIZE = 2
USM_ALLOC_INFO_DEVICE = 3
USM_TYPE_NAMES = {0: "unknown", 1: "host", 2: "device", 3: "shared"}  # ur_usm_type_t
STRUCTURE_TYPE_EXP_KERNEL_ARG_PROPERTIES = 0x5000  # 2026.0+
QUEUE_FLAG_PROFILING_ENABLE = 0x2  # ur_queue_flag_t

# ur_exp_kernel_arg_type_t (2026.0+)
KERNEL_ARG_VALUE = 0  # value points at the argument's bytes (copied at the call)
KERNEL_ARG_POINTER = 1  # value is the USM address itself, size 8
KERNEL_ARG_LOCAL = 3  # size bytes of local memory, no value


class QueueProperties(ctypes.Structure):
    """ur_queue_properties_t."""

    _fields_ = [("stype", c_uint32), ("pNext", c_void_p), ("flags", c_uint32)]


class NativeProperties(ctypes.Structure):
    """ur_{device,context,queue}_native_properties_t: stype, pNext, isNativeHandleOwned."""

    _fields_ = [("stype", c_uint32), ("pNext", c_void_p), ("isNativeHandleOwned", c_bool)]


class QueueNativeDesc(ctypes.Structure):
    """ur_queue_native_desc_t (chained from the queue's native properties): SYCL's native-handle
    descriptor (Level Zero: whether the handle is an immediate command list)."""

    _fields_ = [("stype", c_uint32), ("pNext", c_void_p), ("pNativeData", c_void_p)]


class KernelArgMemObjTuple(ctypes.Structure):
    """ur_exp_kernel_arg_mem_obj_tuple_t."""

    _fields_ = [("hMem", c_void_p), ("flags", c_uint32)]


class KernelArgValue(ctypes.Union):
    """ur_exp_kernel_arg_value_t."""

    _fields_ = [
        ("value", c_void_p),
        ("pointer", c_void_p),
        ("memObjTuple", KernelArgMemObjTuple),
        ("sampler", c_void_p),
    ]


class KernelArgProperties(ctypes.Structure):
    """ur_exp_kernel_arg_properties_t: one argument of urEnqueueKernelLaunchWithArgsExp (48 bytes)."""

    _fields_ = [
        ("stype", c_uint32),
        ("pNext", c_void_p),
        ("type", c_uint32),
        ("index", c_uint32),
        ("size", c_size_t),
        ("value", KernelArgValue),
    ]


assert ctypes.sizeof(KernelArgProperties) == 48, "ur_exp_kernel_arg_properties_t is 48 bytes on x86-64"


# --- handle types -------------------------------------------------------------------------------
handle = c_void_p
handle_p = POINTER(c_void_p)
u32_p = POINTER(c_uint32)
size_p = POINTER(c_size_t)
result_t = c_int32

# Prototypes shared by all supported releases: name -> argtypes. Every function returns ur_result_t.
COMMON_PROTOTYPES: dict[str, list] = {
    "urLoaderInit": [c_uint32, handle],
    "urLoaderTearDown": [],
    "urAdapterGet": [c_uint32, handle_p, u32_p],
    "urAdapterRelease": [handle],
    "urPlatformGetInfo": [handle, c_uint32, c_size_t, c_void_p, size_p],
    "urPlatformGetApiVersion": [handle, u32_p],
    "urDeviceGet": [handle, c_uint32, c_uint32, handle_p, u32_p],
    "urDeviceGetInfo": [handle, c_uint32, c_size_t, c_void_p, size_p],
    "urDeviceRetain": [handle],
    "urDeviceRelease": [handle],
    "urContextCreate": [c_uint32, handle_p, c_void_p, handle_p],
    "urContextRelease": [handle],
    "urQueueCreate": [handle, handle, c_void_p, handle_p],
    "urQueueRelease": [handle],
    "urQueueFinish": [handle],
    "urQueueFlush": [handle],
    "urUSMDeviceAlloc": [handle, handle, c_void_p, handle, c_size_t, handle_p],
    "urUSMSharedAlloc": [handle, handle, c_void_p, handle, c_size_t, handle_p],
    "urUSMHostAlloc": [handle, c_void_p, handle, c_size_t, handle_p],
    "urUSMFree": [handle, c_void_p],
    "urEnqueueUSMMemcpy": [handle, c_bool, c_void_p, c_void_p, c_size_t, c_uint32, handle_p, handle_p],
    "urProgramCreateWithIL": [handle, c_void_p, c_size_t, c_void_p, handle_p],
    "urProgramBuild": [handle, handle, c_char_p],
    "urProgramGetBuildInfo": [handle, handle, c_uint32, c_size_t, c_void_p, size_p],
    "urProgramGetInfo": [handle, c_uint32, c_size_t, c_void_p, size_p],
    "urProgramRelease": [handle],
    "urKernelCreate": [handle, c_char_p, handle_p],
    "urKernelRelease": [handle],
    "urEventWait": [c_uint32, handle_p],
    "urEventRelease": [handle],
    "urEventGetProfilingInfo": [handle, c_uint32, c_size_t, c_void_p, size_p],
    # Sessions over someone else's device (xpukit.runtime.ur.interop): the same in every supported
    # release's ur_api.h (the handle parameter is ur_native_handle_t, a uintptr_t).
    "urAdapterGetInfo": [handle, c_uint32, c_size_t, c_void_p, size_p],
    "urDeviceCreateWithNativeHandle": [c_void_p, handle, c_void_p, handle_p],
    "urContextCreateWithNativeHandle": [c_void_p, handle, c_uint32, handle_p, c_void_p, handle_p],
    "urQueueCreateWithNativeHandle": [c_void_p, handle, handle, c_void_p, handle_p],
    "urQueueGetInfo": [handle, c_uint32, c_size_t, c_void_p, size_p],
    "urUSMGetMemAllocInfo": [handle, c_void_p, c_uint32, c_size_t, c_void_p, size_p],
}

# The argument setters of 2025.0-2026.1 (removed in 2026.2).
SET_ARG_PROTOTYPES: dict[str, list] = {
    # pArgValue is the argument's bytes; pProperties is always NULL here.
    "urKernelSetArgValue": [handle, c_uint32, c_size_t, c_void_p, c_void_p],
    # The last argument is the USM pointer value itself, not its address.
    "urKernelSetArgPointer": [handle, c_uint32, c_void_p, c_void_p],
    "urKernelSetArgLocal": [handle, c_uint32, c_size_t, c_void_p],
}
SET_ARG_SYMBOLS = tuple(SET_ARG_PROTOTYPES)

# urPlatformGet: up to 2025.2 an adapter array, from 2025.3 one adapter.
_PLATFORM_GET_ARRAY = [handle_p, c_uint32, c_uint32, handle_p, u32_p]
_PLATFORM_GET_ONE = [handle, c_uint32, handle_p, u32_p]
# urEnqueueKernelLaunch (q, k, workDim, offset, global, local, ..., numEvents, waitList, phEvent):
#   2025.0-2025.2: nothing in between (9 parameters);
#   2025.3: uint32 numPropsInLaunchPropList, const ur_kernel_launch_property_t *launchPropList (11);
#   2026.0-2026.1: const ur_kernel_launch_ext_properties_t *launchPropList, a pNext chain (10);
#   2026.2: removed. Calling the 10-parameter entry as the 11-parameter one returns success and
#   never writes phEvent, so the prototype is bound from the release, never guessed.
_LAUNCH_HEAD = [handle, handle, c_uint32, size_p, size_p, size_p]
_LAUNCH_TAIL = [c_uint32, handle_p, handle_p]
LAUNCH_PROTOTYPES: dict[int, list] = {
    9: _LAUNCH_HEAD + _LAUNCH_TAIL,
    10: [*_LAUNCH_HEAD, c_void_p, *_LAUNCH_TAIL],
    11: [*_LAUNCH_HEAD, c_uint32, c_void_p, *_LAUNCH_TAIL],
}
# urEnqueueKernelLaunchWithArgsExp (2026.0+): the arguments travel with the launch.
WITH_ARGS_PROTOTYPE = [*_LAUNCH_HEAD, c_uint32, c_void_p, c_void_p, *_LAUNCH_TAIL]
# urProgramCreateWithBinary: 2025.0 takes one device and one binary, later releases arrays.
_BINARY_ONE = [handle, handle, c_size_t, c_void_p, c_void_p, handle_p]
_BINARY_MANY = [handle, c_uint32, handle_p, size_p, POINTER(c_void_p), c_void_p, handle_p]

LAUNCH_SYMBOL = "urEnqueueKernelLaunch"
WITH_ARGS_SYMBOL = "urEnqueueKernelLaunchWithArgsExp"
CUSTOM_LAUNCH_SYMBOL = "urEnqueueKernelLaunchCustomExp"  # exported up to 2025.2, gone in 2025.3
DEVICE_WAIT_SYMBOL = "urDeviceWaitExp"  # 2026.0+


class LaunchForm(enum.IntEnum):
    """How a release launches a kernel (the C launcher and its Python twin speak all three)."""

    SET_ARGS_LAUNCH9 = 0  # urKernelSetArg* then the 9-parameter urEnqueueKernelLaunch (2025.0-2025.2)
    SET_ARGS_LAUNCH11 = 1  # urKernelSetArg* then the 11-parameter urEnqueueKernelLaunch (2025.3)
    WITH_ARGS = 2  # one urEnqueueKernelLaunchWithArgsExp per launch, arguments in an array (2026.0+)

    @property
    def label(self) -> str:
        return {0: "setarg+launch(9)", 1: "setarg+launch(11)", 2: "launch-with-args"}[self.value]


@dataclasses.dataclass(frozen=True)
class ReleaseABI:
    """What differs between UR releases, as far as this binding uses it."""

    release: str  # oneAPI release line, "2025.3"
    api_version: tuple[int, int]  # UR API version reported by the headers
    platform_get_takes_adapter_array: bool
    launch_params: int | None  # parameters of urEnqueueKernelLaunch; None: not exported
    has_set_args: bool  # urKernelSetArgValue/Pointer/Local exported
    has_launch_with_args: bool  # urEnqueueKernelLaunchWithArgsExp exported
    has_custom_launch: bool  # urEnqueueKernelLaunchCustomExp exported (tells 2025.2 from 2025.3)
    binary_takes_device_array: bool
    has_device_wait: bool  # urDeviceWaitExp
    opencl_adapter_linked: bool  # the OpenCL adapter lives inside libur_loader.so (no libur_adapter_opencl.so)

    @property
    def launch_form(self) -> LaunchForm:
        if self.has_launch_with_args:
            return LaunchForm.WITH_ARGS
        return LaunchForm.SET_ARGS_LAUNCH11 if self.launch_params == 11 else LaunchForm.SET_ARGS_LAUNCH9

    def expected_symbols(self) -> dict[str, bool]:
        """Symbol -> whether this release exports it: what tells the releases apart."""
        expected = {s: self.has_set_args for s in SET_ARG_SYMBOLS}
        expected[LAUNCH_SYMBOL] = self.launch_params is not None
        expected[WITH_ARGS_SYMBOL] = self.has_launch_with_args
        expected[CUSTOM_LAUNCH_SYMBOL] = self.has_custom_launch
        expected[DEVICE_WAIT_SYMBOL] = self.has_device_wait
        return expected

    def prototypes(self) -> dict[str, list]:
        protos = dict(COMMON_PROTOTYPES)
        protos["urPlatformGet"] = _PLATFORM_GET_ARRAY if self.platform_get_takes_adapter_array else _PLATFORM_GET_ONE
        protos["urProgramCreateWithBinary"] = _BINARY_MANY if self.binary_takes_device_array else _BINARY_ONE
        if self.has_set_args:
            protos.update(SET_ARG_PROTOTYPES)
        if self.launch_params is not None:
            protos[LAUNCH_SYMBOL] = LAUNCH_PROTOTYPES[self.launch_params]
        if self.has_launch_with_args:
            protos[WITH_ARGS_SYMBOL] = WITH_ARGS_PROTOTYPE
        if self.has_device_wait:
            protos[DEVICE_WAIT_SYMBOL] = [handle]
        return protos


def _abi(line: str, api: tuple[int, int], array: bool, launch: int | None, set_args: bool, with_args: bool,
         custom: bool, binaries: bool, wait: bool, linked: bool = False) -> ReleaseABI:  # fmt: skip
    return ReleaseABI(line, api, array, launch, set_args, with_args, custom, binaries, wait, linked)


RELEASE_ABIS: dict[str, ReleaseABI] = {
    #                        api     adapter[] launch setarg withargs custom binary[] wait  linked-ocl
    "2025.0": _abi("2025.0", (0, 10), True, 9, True, False, True, False, False),
    "2025.1": _abi("2025.1", (0, 11), True, 9, True, False, True, True, False),
    "2025.2": _abi("2025.2", (0, 12), True, 9, True, False, True, True, False),
    "2025.3": _abi("2025.3", (0, 12), False, 11, True, False, False, True, False),
    "2026.0": _abi("2026.0", (0, 12), False, 10, True, True, False, True, True),
    "2026.1": _abi("2026.1", (0, 12), False, 10, True, True, False, True, True),
    "2026.2": _abi("2026.2", (0, 12), False, None, False, True, False, True, True, linked=True),
}
SUPPORTED_RELEASES: tuple[str, ...] = tuple(RELEASE_ABIS)
NEWEST_RELEASE = SUPPORTED_RELEASES[-1]
# The loader's file version (libur_loader.so.0.<minor>.<patch>) -> release lines that ship it.
API_MINOR_TO_RELEASES = {10: ("2025.0",), 11: ("2025.1",), 12: ("2025.2", "2025.3", "2026.0", "2026.1", "2026.2")}


def size_array(values: tuple[int, ...] | list[int]) -> ctypes.Array:
    """A ``size_t[n]`` filled with ``values``."""
    return (c_size_t * len(values))(*values)
