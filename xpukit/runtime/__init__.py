"""The runtime library that runs in the image: Unified Runtime bindings (``ur``), kernel launch
(``launch``), the Triton driver on UR (``triton``), compilation and zebin tooling.

It needs Triton, numpy, PyYAML and pyelftools, never invoke or the docker SDK, and never imports
``xpukit.host``.
"""
