"""Error types of the UR binding.

Every failing UR call raises an instance of a class named after its result code
(``UR_RESULT_ERROR_INVALID_KERNEL_NAME``, ...), all subclasses of :class:`UrError`, itself an
:class:`~xpukit.errors.XpukitError`. Look the classes up with :func:`error_class` or as attributes
of this module.
"""

from __future__ import annotations

from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime.ur._api import RESULT_CODES, RESULT_NAMES


class UrError(XpukitError):
    """A UR call returned something other than UR_RESULT_SUCCESS."""

    code: int = -1
    result_name: str = "UR_RESULT_ERROR_UNKNOWN"

    def __init__(self, function: str, detail: str = "", fix: str = "", build_log: str = "") -> None:
        self.function = function
        self.detail = detail
        self.build_log = build_log
        message = f"{function} failed with {self.result_name}"
        if detail:
            message += f": {detail}"
        if build_log:
            message += f"\nbuild log:\n{build_log.strip()}"
        super().__init__(message, fix or _FIXES.get(self.result_name, "run with --debug and check the UR call"))


_FIXES = {
    "UR_RESULT_ERROR_INVALID_KERNEL_NAME": "use the kernel's entry-point name (Triton: the @triton.jit function name)",
    "UR_RESULT_ERROR_PROGRAM_BUILD_FAILURE": "read the build log above; for the CPU device apply "
    "xpukit.runtime.offline.spirv.patch_for_cpu to Triton's SPIR-V",
    "UR_RESULT_ERROR_INVALID_BINARY": "rebuild from SPIR-V; the native binary is for another device or driver",
    "UR_RESULT_ERROR_ADAPTER_SPECIFIC": "check the kernel arguments (a missing local-memory argument "
    "gives this) and the adapter's log (UR_LOG_OPENCL/UR_LOG_LEVEL_ZERO)",
    "UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY": "allocate less, or close allocations you no longer use",
    "UR_RESULT_ERROR_INVALID_WORK_GROUP_SIZE": "use a work-group size the device accepts (num_warps*threads_per_warp)",
    "UR_RESULT_ERROR_UNINITIALIZED": "load the UR loader with xpukit.runtime.ur.load() first",
}

_CLASSES: dict[str, type[UrError]] = {}
for _code, _name in RESULT_NAMES.items():
    if _code == 0:
        continue
    _CLASSES[_name] = type(_name, (UrError,), {"code": _code, "result_name": _name, "__module__": __name__})
globals().update(_CLASSES)


def error_class(name_or_code: str | int) -> type[UrError]:
    """The exception class for a result name (``"UR_RESULT_ERROR_INVALID_VALUE"``) or code."""
    name = RESULT_NAMES.get(name_or_code) if isinstance(name_or_code, int) else name_or_code
    if name is None or name not in _CLASSES:
        if isinstance(name_or_code, int):
            return _unknown_class(name_or_code)
        raise KeyError(name_or_code)
    return _CLASSES[name]


def _unknown_class(code: int) -> type[UrError]:
    name = f"UR_RESULT_{code:#x}"
    if name not in _CLASSES:
        _CLASSES[name] = type(name, (UrError,), {"code": code, "result_name": name, "__module__": __name__})
    return _CLASSES[name]


def raise_result(code: int, function: str, detail: str = "", **kwargs: Any) -> None:
    """Raise the exception for a failed UR call."""
    raise error_class(int(code))(function, detail, **kwargs)


def __getattr__(name: str) -> Any:  # module attribute access for result-named classes
    if name in _CLASSES:
        return _CLASSES[name]
    raise AttributeError(name)


class LoaderNotFound(XpukitError):
    """No libur_loader.so where we looked."""


class UnsupportedURRelease(XpukitError):
    """The UR loader is a release whose prototypes this binding does not know."""


class DeviceNotFound(XpukitError):
    """The requested device (gpu/cpu) is not present."""


class BadDeviceRequest(XpukitError):
    """The device request is not one of auto, gpu, cpu."""


class ClosedError(XpukitError):
    """A handle was used after close()."""


class KernelArgumentError(XpukitError):
    """Wrong number or type of kernel arguments; raised before anything is enqueued."""


class ProgramCacheCorrupt(XpukitError):
    """A program-cache entry failed its checks; the caller rebuilds it from SPIR-V."""


__all__ = [
    "RESULT_CODES",
    "BadDeviceRequest",
    "ClosedError",
    "DeviceNotFound",
    "KernelArgumentError",
    "LoaderNotFound",
    "ProgramCacheCorrupt",
    "UnsupportedURRelease",
    "UrError",
    "error_class",
    "raise_result",
]
