#!/usr/bin/env python3
"""Triton's second tutorial (fused softmax), written for xpukit: one pass over each row in
on-chip memory, a persistent grid sized from the UR device, launched with Triton's own
``kernel[grid](...)`` through xpukit's UR driver. Runs on the CPU device.

    python examples/tutorial_02_fused_softmax.py --rows 1823 --cols 781 --device cpu

Exit code: 0 when the result matches numpy (rtol 1e-5), 1 on a mismatch, 2 on an error.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import triton
import triton.language as tl

from xpukit.errors import guard


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols, BLOCK_SIZE: tl.constexpr):
    # Persistent programs: program p handles rows p, p + P, p + 2P, ...
    first = tl.program_id(0)
    step = tl.num_programs(0)
    for row in range(first, n_rows, step):
        cols = tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        # -inf padding keeps the max exact; exp(-inf) = 0 keeps the padding out of the sum.
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x):
    """Row-wise softmax of a 2-D DeviceArray; returns a new DeviceArray."""
    from triton.runtime.driver import driver

    from xpukit.runtime.triton import empty

    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)  # a whole row per program, in registers/local memory
    num_warps = 4 if block <= 2048 else 8 if block <= 4096 else 16
    y = empty(x.shape, x.dtype)
    # Enough programs to fill the device a few times over, never more than there are rows.
    props = driver.active.utils.get_device_properties(driver.active.get_current_device())
    programs = max(1, min(n_rows, 4 * max(1, props["multiprocessor_count"])))
    softmax_kernel[(programs,)](y, x, x.stride(0), y.stride(0), n_rows, n_cols, BLOCK_SIZE=block, num_warps=num_warps)
    return y


def run(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1823)
    p.add_argument("--cols", type=int, default=781)
    p.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    args = p.parse_args(argv)
    if args.rows < 1 or args.cols < 1:
        p.error("--rows and --cols must be >= 1")
    import numpy as np

    from xpukit.runtime import ur
    from xpukit.runtime.triton import activate, from_numpy

    with ur.Session(args.device) as s, activate(s):
        print(f"device: {s.device.name} [{s.device.type}, {s.device.backend}]")
        x_h = np.random.default_rng(0).standard_normal((args.rows, args.cols), dtype=np.float32)
        with from_numpy(x_h) as x, softmax(x) as y:
            s.synchronize()
            got = y.to_numpy()
    e = np.exp(x_h - x_h.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    diff = float(np.max(np.abs(got - want)))
    print(f"max abs difference vs numpy: {diff:.3g}; rows sum to 1 within {float(np.max(np.abs(got.sum(1) - 1))):.3g}")
    if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        print("MISMATCH")
        return 1
    print("OK")
    return 0


def main(argv: list[str] | None = None) -> int:
    # The kit's one error boundary: a device or driver failure is one line naming its type, exit 2.
    return guard(lambda: run(argv), prog=None, any_error=True)


if __name__ == "__main__":
    sys.exit(main())
