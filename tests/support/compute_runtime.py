"""compute-runtime's rules the occupancy tests port (intel/compute-runtime, read 2026-08 and at
e37c60bf2a): one copy for every test that checks the kit's figures against the driver's."""

from __future__ import annotations

import math


def max_work_group_size(simd: int, grf: int, xe3: bool, cri: bool = False) -> int:
    """calculateMaxWorkGroupSize: 1024 work-items, halved for SIMD != 32 at 256 GRF; on Xe3 and Xe3P
    the threads per work-group are capped by the GRF count (cri: adjustMaxThreadsPerThreadGroup)."""
    size = 512 if simd != 32 and grf == 256 else 1024
    if not xe3:
        return size
    cap = 64
    if grf == 512:
        cap = 16
    elif grf == 256 or simd == 32:
        cap = 32
    elif grf == 192:
        cap = 40
    elif grf == 160:
        cap = 48
    if cri:
        if grf == 512:
            cap = 32
        elif simd == 16 and grf in (160, 192):
            cap = 64
    return min(min(math.ceil(size / simd), cap) * simd, 1024)
