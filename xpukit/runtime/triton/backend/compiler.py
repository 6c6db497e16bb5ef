"""Triton backend folder ``xpukit`` (installed by ``python -m xpukit.runtime.triton.backend install``):
its compiler targets nothing. Kernels for Intel devices are still compiled by Triton's Intel
backend; this folder exists for its driver (driver.py)."""

from triton.backends.compiler import BaseBackend as _Base


class XpukitNoCompiler(_Base):
    @staticmethod
    def supports_target(target):
        return False

    def __init__(self, target):  # never constructed: supports_target is always False
        raise RuntimeError("xpukit's Triton backend compiles nothing; Triton's Intel backend does")

    def hash(self):
        return "xpukit-none"

    def parse_options(self, options):
        raise RuntimeError("xpukit's Triton backend compiles nothing")

    def add_stages(self, stages, options):
        raise RuntimeError("xpukit's Triton backend compiles nothing")

    def load_dialects(self, context):
        pass

    def get_module_map(self):
        return {}
