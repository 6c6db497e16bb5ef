"""Compile and run kernels with an empty local Triton cache and XPUKIT_KERNEL_CACHE set; print the
shared cache's counters, whether every result was exact, which Triton entry and program-cache
entry each launch used, and the SHA-256 of every SPIR-V module and native binary handed to the
device, as JSON on the last line."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.kernels import add_kernel, scale_kernel
from xpukit.runtime import ur
from xpukit.runtime.triton import URDriver, activate, from_numpy, kernel_cache

BLOCKS = (64, 128, 256)  # three specializations: three Triton entries per kernel


def record_loads() -> dict[str, list[str]]:
    """What reaches the device, by hash: a forged entry must never show up here."""
    loaded: dict[str, list[str]] = {"spirv": [], "binary": []}
    from_spirv, from_binary = ur.Session.program_from_spirv, ur.Session.program_from_binary

    def program_from_spirv(self, spirv, options=""):
        loaded["spirv"].append(hashlib.sha256(spirv).hexdigest())
        return from_spirv(self, spirv, options)

    def program_from_binary(self, binary, options=""):
        loaded["binary"].append(hashlib.sha256(binary).hexdigest())
        return from_binary(self, binary, options)

    ur.Session.program_from_spirv = program_from_spirv
    ur.Session.program_from_binary = program_from_binary
    return loaded


def main() -> None:
    loaded = record_loads()
    exact, triton_keys, program_keys = {}, {}, {}
    drv = URDriver()  # the default program cache: shared through XPUKIT_KERNEL_CACHE when set
    with ur.Session("cpu") as s, activate(s, driver=drv):
        x = np.arange(1000, dtype=np.float32)
        with from_numpy(x) as dx:
            for block in BLOCKS:
                for name, kernel, expected in (("scale", scale_kernel, x * 3), ("add", add_kernel, x + x)):
                    label, before = f"{name}/{block}", len(drv.cache.events)
                    # A fresh output each time: a kernel that writes only part of it cannot look right.
                    with from_numpy(np.full(1000, -1, np.float32)) as out:
                        args = (dx, out, 3.0, 1000) if name == "scale" else (dx, dx, out, 1000)
                        triton_keys[label] = kernel[(1000 // block + 1,)](*args, BLOCK=block).hash
                        s.finish()
                        exact[label] = bool(np.array_equal(out.to_numpy(), expected))
                    program_keys[label] = drv.cache.events[before][1] if len(drv.cache.events) > before else ""
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
                "rejected": st.rejected,
                "program_shared_hits": events.count("shared-hit"),
                "program_builds": events.count("store"),
                "program_corrupt": events.count("corrupt"),
                "program_cache": type(drv.cache).__name__,
                "triton_keys": triton_keys,
                "program_keys": program_keys,
                "loaded": loaded,
            }
        )
    )


if __name__ == "__main__":
    main()
