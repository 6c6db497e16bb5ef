"""Unified Runtime from Python: the ctypes binding (``load``, ``UrLibrary``), the session and the
objects it owns (``Session``, ``USMAllocation``, ``Queue``, ``Program``, ``Kernel``) and each
kernel's checked launcher (:mod:`xpukit.runtime.ur.launcher`).

from xpukit.runtime import ur
with ur.Session("auto") as s:
    buf = s.from_numpy(x)
"""

from __future__ import annotations

from xpukit.runtime.ur._api import SUPPORTED_RELEASES
from xpukit.runtime.ur.core import DeviceInfo, Session
from xpukit.runtime.ur.errors import (
    BadDeviceRequest,
    ClosedError,
    DeviceNotFound,
    KernelArgumentError,
    LoaderNotFound,
    ProgramCacheCorrupt,
    UnsupportedURRelease,
    UrError,
    error_class,
)
from xpukit.runtime.ur.loader import UrLibrary, detect_release, find_loader, load
from xpukit.runtime.ur.objects import Kernel, Program, Queue, USMAllocation

__all__ = [
    "SUPPORTED_RELEASES",
    "BadDeviceRequest",
    "ClosedError",
    "DeviceInfo",
    "DeviceNotFound",
    "Kernel",
    "KernelArgumentError",
    "LoaderNotFound",
    "Program",
    "ProgramCacheCorrupt",
    "Queue",
    "Session",
    "USMAllocation",
    "UnsupportedURRelease",
    "UrError",
    "UrLibrary",
    "detect_release",
    "error_class",
    "find_loader",
    "load",
]
