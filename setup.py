"""The optional compiled launch path: the UR launcher (xpukit/runtime/ur/_launcher.c) and Triton's
dispatch on it (xpukit/runtime/triton/_dispatch.c, which includes ur/_launcher.h); everything else is
in pyproject.toml. Where no C compiler exists the build skips them and xpukit uses their Python twins."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("_xpukit_launcher", ["xpukit/runtime/ur/_launcher.c"], optional=True),
        Extension(
            "_xpukit_dispatch",
            ["xpukit/runtime/triton/_dispatch.c"],
            include_dirs=["xpukit/runtime/ur"],
            depends=["xpukit/runtime/ur/_launcher.h"],
            optional=True,
        ),
    ]
)
