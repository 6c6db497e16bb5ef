"""A Triton driver backed by Unified Runtime: Triton's ordinary ``kernel[grid](...)`` with no PyTorch.

    import triton
    from xpukit.runtime import ur
    from xpukit.runtime.triton import activate

    with ur.Session("auto") as s, activate(s):
        x = s.from_numpy(host)                       # USM; x.ptr is the raw device address
        y = s.alloc(host.nbytes)
        scale_kernel[grid](x.ptr, y.ptr, 2.0, n, BLOCK_SIZE=1024)   # the blog's call style
        s.synchronize()

Inside ``activate(session)`` Triton's runtime uses :class:`URDriver`: the target comes from the
UR device (``xpukit.runtime.triton.launch.target_for_device``: the ``cpu`` preset on the CPU device, UR
device info on a GPU), device and stream from the session, binaries are loaded through UR (the CPU
SPIR-V patch where needed, the native-binary :class:`~xpukit.runtime.triton.program_cache.ProgramCache`),
and every launch goes through the core layer's checked launcher (``xpukit.runtime.ur.launcher``).

Activation is per thread (and per asyncio task): each ``activate`` block sets the calling
context's session; other threads keep theirs, and a thread with none gets :class:`NoActiveSession`.
What is process-wide is what Triton keeps process-wide: while at least one block is open anywhere,
Triton's active driver is xpukit's, and ``triton.runtime.jit.specialize_impl`` and
``JITFunction.run`` are wrapped; the last block to end restores all three. The Intel backend's
arch parser is replaced for the rest of the process (``xpukit.runtime.triton.tritonc.xpu_backend``).

Arguments: Python ints (raw device addresses or integers), xpukit USM allocations (passed as their
address, like ``.ptr``), :class:`DeviceArray` or anything with ``ptr``/``data_ptr()`` and ``dtype``
(a typed pointer), Python/numpy scalars. Every pointer, and every integer the kernel casts to a
pointer, must lie in live memory of the launching session; anything else (freed, another
session's, host memory, null) is a :class:`KernelArgumentError` before anything is enqueued.

Triton's binder assumes torch tensors (``.dtype`` plus ``.data_ptr()``), so the wrapped
``specialize_impl`` specializes xpukit allocations and numpy scalars the way their values are and
refuses host arrays and unknown objects with a :class:`KernelArgumentError`. The wrapped
``JITFunction.run`` keeps, per kernel, a table of launches it has seen (key: argument types,
alignment, constexprs, options; see ``xpukit.runtime.triton.dispatch.fast_key``): a repeated call skips
Triton's binder and launcher and costs one dictionary lookup plus the compiled launcher
(docs/launch.md).
"""

from __future__ import annotations

from xpukit.runtime.triton.activate import activate
from xpukit.runtime.triton.driver import (
    DriverStats,
    TritonRun,
    URDriver,
    current_session,
    default_driver,
    do_bench,
    empty,
    from_numpy,
)
from xpukit.runtime.triton.state import NoActiveSession, ZebinNeedsGpu
from xpukit.runtime.ur.objects import DeviceArray

__all__ = [
    "DeviceArray",
    "DriverStats",
    "NoActiveSession",
    "TritonRun",
    "URDriver",
    "ZebinNeedsGpu",
    "activate",
    "current_session",
    "default_driver",
    "do_bench",
    "empty",
    "from_numpy",
]
