"""The optional compiled launch path (xpukit/runtime/ur/_launcher.c); everything else is in
pyproject.toml. Where no C compiler exists the build skips it and xpukit uses its Python twin."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("_xpukit_launcher", ["xpukit/runtime/ur/_launcher.c"], optional=True)])
