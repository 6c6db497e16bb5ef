"""Tools that need no device and no Triton: ocloc (``ocloc``), the zebin reader (``zebin``), SPIR-V
scanning and the CPU patch (``spirv``), Xe ISA from ocloc's disassembler (``isa``), the compiler's
identity (``compiler_id``) and the kernel report's text (``report_format``). What compiles a kernel
file through Triton is in ``xpukit.runtime.kernels``, above ``xpukit.runtime.triton``."""
