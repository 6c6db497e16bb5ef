"""What the tests share, importable without pytest by CI and benchmarks too: real services on
127.0.0.1 (services), a fake host tree (fakehost), Triton kernels (kernels), subprocess probes, the UR
release prefixes (ur_matrix), and helpers two test folders use."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The checkout (or /workspace in the image)."""


def system_libz() -> Path:
    """The system's zlib (``libz.so.1``), a real shared library that is not a Unified Runtime
    loader: found where the dynamic linker finds it, by loading it and reading this process's maps."""
    import ctypes

    ctypes.CDLL("libz.so.1")
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "/libz.so" in path:
                soname = Path(path).with_name("libz.so.1")  # the name users type, where it exists
                return soname if soname.exists() else Path(path)
    raise FileNotFoundError("libz.so.1 is loaded but not in /proc/self/maps")
