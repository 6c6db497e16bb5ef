"""Triton backend folder ``xpukit`` (installed by ``python -m xpukit.runtime.triton.backend install``):
its compiler targets nothing. Kernels for Intel devices are still compiled by Triton's Intel
backend; this folder exists for its driver (driver.py)."""

from typing import Any, NoReturn

from triton.backends.compiler import BaseBackend as _Base


class XpukitNoCompiler(_Base):
    @staticmethod
    def supports_target(target: Any) -> bool:
        return False

    def __init__(self, target: Any) -> None:  # never constructed: supports_target is always False
        raise RuntimeError("xpukit's Triton backend compiles nothing; Triton's Intel backend does")

    def hash(self) -> str:
        return "xpukit-none"

    def parse_options(self, options: Any) -> NoReturn:
        raise RuntimeError("xpukit's Triton backend compiles nothing")

    def add_stages(self, stages: Any, options: Any) -> NoReturn:
        raise RuntimeError("xpukit's Triton backend compiles nothing")

    def load_dialects(self, context: Any) -> None:
        pass

    def get_module_map(self) -> dict[str, Any]:
        return {}
