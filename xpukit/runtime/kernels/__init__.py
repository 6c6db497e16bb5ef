"""The kernel-file front ends, on Triton as the kit configures it: ``compile`` (``invoke compile`` and
``invoke zebin-info``: a ``path.py:function`` kernel to SPIR-V and zebin per target, the zebin reader's
view of a file) and ``kernel_report`` (``invoke kernel-report``: target x config, one table of ISA
counts). They sit above ``xpukit.runtime.triton`` (its compiler entry point, ``tritonc``) and
``xpukit.runtime.offline`` (ocloc, the zebin and ISA readers, the report's text)."""
