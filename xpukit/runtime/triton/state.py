"""The bottom of Triton on UR: what the calling thread (or asyncio task) launches on, and the
errors of that state. Imports nothing above it."""

from __future__ import annotations

import contextvars
import dataclasses
from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime.ur.core import Session


class ZebinNeedsGpu(XpukitError):
    """A native Intel GPU binary was handed to a device that cannot run it."""


class NoActiveSession(XpukitError):
    """A Triton launch reached xpukit's driver with no open session to run on."""


# What this thread (or asyncio task) launches on: set by activate(), never shared between threads.
CURRENT: contextvars.ContextVar[Active | None] = contextvars.ContextVar("xpukit_ur_active", default=None)


@dataclasses.dataclass
class Active:
    """One activation: the driver above (a URDriver; typed loosely so this module imports nothing
    of the package), the session, the device key and target Triton compiles for, the stream."""

    driver: Any
    session: Session
    device_key: str
    target: Any
    stream: Any  # driver.Stream
    table_key: tuple[str, bool]  # fast-path table: device key and TRITON_DEBUG as read at activate()
