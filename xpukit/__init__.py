"""xpukit: a reproducible environment kit for Intel's Triton XPU backend."""

__version__ = "0.1.0"
