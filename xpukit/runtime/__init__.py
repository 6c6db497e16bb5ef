"""The runtime library that runs in the image: Unified Runtime bindings and their checked launch path
(``ur``), the Triton driver on UR (``triton``), ocloc and zebin tooling that needs no device and no
Triton (``offline``), the kernel-file front ends that compile through Triton (``kernels``), what the
image knows about itself (``image``), and the ground they share (``scratch``, ``cache_auth``,
``interrupts``).

It needs Triton, numpy, PyYAML and pyelftools, never invoke or the docker SDK, and never imports
``xpukit.host``.
"""
