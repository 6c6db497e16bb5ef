#!/usr/bin/env python3
"""Triton's first tutorial (vector addition), written for xpukit: Triton's own ``kernel[grid](...)``
on Unified Runtime, with xpukit device arrays instead of torch tensors. Runs on the CPU device.

    python examples/tutorial_01_vector_add.py --size 98432 --device cpu [--bench]

Exit code: 0 when the result equals numpy's, 1 on a mismatch, 2 on an error.
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
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # Each program handles one BLOCK_SIZE-wide slice; the mask guards the ragged last slice.
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


def add(x, y):
    """``x + y`` on the device: allocate the output, pick the grid from the block size, launch."""
    from xpukit.runtime.triton import empty

    if x.shape != y.shape or x.dtype != y.dtype:
        raise ValueError(f"shapes/dtypes differ: {x.shape} {x.dtype} vs {y.shape} {y.dtype}")
    output = empty(x.shape, x.dtype)
    n_elements = output.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=1024)
    return output


def run(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=98432)
    p.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    p.add_argument("--bench", action="store_true", help="time add() at a few sizes (UR event profiling)")
    args = p.parse_args(argv)
    if args.size < 0:
        p.error("--size must be >= 0")
    import numpy as np

    from xpukit.runtime import ur
    from xpukit.runtime.triton import activate, do_bench, from_numpy

    with ur.Session(args.device) as s, activate(s):
        print(f"device: {s.device.name} [{s.device.type}, {s.device.backend}]")
        rng = np.random.default_rng(0)
        x_h = rng.random(args.size, dtype=np.float32)
        y_h = rng.random(args.size, dtype=np.float32)
        with from_numpy(x_h) as x, from_numpy(y_h) as y, add(x, y) as out:
            s.synchronize()
            got = out.to_numpy()
        want = x_h + y_h
        diff = float(np.max(np.abs(got - want))) if args.size else 0.0
        print(f"max abs difference vs numpy: {diff}")
        if args.bench:
            for size in (2**12, 2**16, 2**20):
                a, b = rng.random(size, dtype=np.float32), rng.random(size, dtype=np.float32)
                with from_numpy(a) as da, from_numpy(b) as db:
                    outs = []
                    ms = do_bench(lambda: outs.append(add(da, db)), quantiles=[0.5])  # noqa: B023
                    s.synchronize()
                    for o in outs:
                        o.close()
                print(f"size {size:>8}: {ms * 1e3:8.1f} us, {3 * a.nbytes / (ms * 1e-3) / 1e9:6.2f} GB/s")
    if not np.array_equal(got, want):
        print("MISMATCH")
        return 1
    print("OK")
    return 0


def main(argv: list[str] | None = None) -> int:
    # The kit's one error boundary: a device or driver failure is one line naming its type, exit 2.
    return guard(lambda: run(argv), prog=None, any_error=True)


if __name__ == "__main__":
    sys.exit(main())
