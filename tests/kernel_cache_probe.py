"""Compile and run kernels with an empty local Triton cache and XPUKIT_KERNEL_CACHE set; print the
shared cache's counters and whether every result was exact, as JSON on the last line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.kernels import add_kernel, scale_kernel
from xpukit.runtime import kernel_cache, ur
from xpukit.runtime.triton import URDriver, activate, empty, from_numpy


def main() -> None:
    exact = []
    drv = URDriver()  # the default program cache: shared through XPUKIT_KERNEL_CACHE when set
    with ur.Session("cpu") as s, activate(s, driver=drv):
        x = np.arange(1000, dtype=np.float32)
        with from_numpy(x) as dx, empty(1000, np.float32) as out:
            for block in (64, 128, 256):  # three specializations: three kernels per name
                scale_kernel[(1000 // block + 1,)](dx, out, 3.0, 1000, BLOCK=block)
                s.finish()
                exact.append(bool(np.array_equal(out.to_numpy(), x * 3)))
                add_kernel[(1000 // block + 1,)](dx, dx, out, 1000, BLOCK=block)
                s.finish()
                exact.append(bool(np.array_equal(out.to_numpy(), x + x)))
    st = kernel_cache.stats()
    events = [e for e, _ in drv.cache.events]
    print(
        json.dumps(
            {
                "exact": exact,
                "hits": st.hits,
                "misses": st.misses,
                "stores": st.stores,
                "errors": st.errors,
                "program_shared_hits": events.count("shared-hit"),
                "program_builds": events.count("store"),
                "program_cache": type(drv.cache).__name__,
            }
        )
    )


if __name__ == "__main__":
    main()
