"""Tools that need no device: Triton -> SPIR-V -> zebin with ocloc (``compile``, ``ocloc``), the
zebin reader (``zebin``), SPIR-V scanning and the CPU patch (``spirv``), Xe ISA from ocloc's
disassembler (``isa``) and the kernel report (``kernel_report``)."""
