"""The optional compiled launch path: the UR launcher (xpukit/runtime/ur/_launcher.c and its parts
_launcher_*.c) and Triton's dispatch on it (xpukit/runtime/triton/_dispatch.c and _dispatch_*.c, which
include ur/_launcher.h); everything else is in pyproject.toml. Where no C compiler exists the build
skips them and xpukit uses their Python twins. -flto as in scripts/build-launcher.sh: a module's parts
are compiled as one program, so the calls between them cost what they did in one file."""

from glob import glob

from setuptools import Extension, setup

LTO = {"extra_compile_args": ["-flto", "-fvisibility=hidden"], "extra_link_args": ["-flto"]}
UR = "xpukit/runtime/ur"
TRITON = "xpukit/runtime/triton"

setup(
    ext_modules=[
        Extension(
            "_xpukit_launcher",
            [f"{UR}/_launcher.c", *sorted(glob(f"{UR}/_launcher_*.c"))],
            depends=sorted(glob(f"{UR}/_launcher*.h")),
            optional=True,
            **LTO,
        ),
        Extension(
            "_xpukit_dispatch",
            [f"{TRITON}/_dispatch.c", *sorted(glob(f"{TRITON}/_dispatch_*.c"))],
            include_dirs=[UR],
            depends=[f"{UR}/_launcher.h", f"{TRITON}/_dispatch.h"],
            optional=True,
            **LTO,
        ),
    ]
)
