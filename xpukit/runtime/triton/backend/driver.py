"""Triton backend folder ``xpukit`` (installed by ``python -m xpukit.runtime.triton.backend install``):
the driver Triton's own discovery picks when no other backend's driver is active (no torch XPU
device). It stands for xpukit's UR driver (``xpukit.runtime.triton.default_driver()``): launches run
on the session of the calling thread's ``activate`` block. Where another driver is active, Triton's
choice stands. Imports xpukit only when asked, so a stale folder without xpukit stays inactive."""

from typing import Any, NoReturn

from triton.backends.driver import DriverBase as _Base


def _others_active() -> bool:
    from triton.backends import backends

    for name, backend in backends.items():
        if name == "xpukit" or backend.driver.__name__ == XpukitDriver.__name__:
            continue  # this folder (or another copy of it)
        try:
            if backend.driver.is_active():
                return True
        except Exception:  # a broken backend is not an active one
            continue
    return False


class XpukitDriver(_Base):
    @staticmethod
    def is_active() -> bool:
        try:
            import xpukit.runtime.triton  # noqa: F401
        except Exception:
            return False
        return not _others_active()

    def __new__(cls) -> Any:  # xpukit's URDriver, not an instance of this class
        from xpukit.runtime.triton import default_driver

        return default_driver()

    def get_current_target(self) -> NoReturn:  # pragma: no cover - __new__ returns xpukit's URDriver
        raise NotImplementedError

    def get_active_torch_device(self) -> NoReturn:  # pragma: no cover
        raise NotImplementedError

    def get_benchmarker(self) -> NoReturn:  # pragma: no cover
        raise NotImplementedError
