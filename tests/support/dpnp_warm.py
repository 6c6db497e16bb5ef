"""dpnp's first array operations in a process, made in the calling thread before a test starts
threads (tests/image/test_dpnp.py, tests/image/test_dpnp_kernels.py): four threads making their
first ``dpnp.full`` at once can hang inside dpnp itself, with the kit's code in none of their frames
(seen with dpnp 0.20 on the CPU device in 1 of 5 processes that imported no kit code, and in 2 of 3
runs of a thread test alone; never once dpnp has made its first arrays in one thread)."""

from __future__ import annotations

from typing import Any


def warm_dpnp(queue: Any) -> None:
    """Make, fill and copy a few small dpnp arrays on ``queue`` (a ``dpctl.SyclQueue``)."""
    import dpnp

    x = dpnp.full(4, 0.0, dtype=dpnp.float32, sycl_queue=queue)
    x.fill(1)
    dpnp.asnumpy(dpnp.zeros_like(x) + x)
