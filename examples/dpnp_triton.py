#!/usr/bin/env python3
"""dpnp and a Triton kernel in one computation, no PyTorch: attention-style pooling on SYCL arrays.

dpnp (NumPy on SYCL devices) computes the scores ``q @ k.T / sqrt(d)``, a Triton kernel takes the
dpnp array as it is and writes a fused row softmax into another dpnp array, and dpnp finishes with
``p @ v``. Everything stays on the device; the session is opened over dpnp's own queue
(``ur.Session.from_sycl``), so the kernel's arguments are dpnp's pointers, checked through UR.
The result is compared with numpy.

    python examples/dpnp_triton.py --rows 512 --keys 300 --dim 64

Needs dpnp: the dpnp image variant, ``invoke build --with dpnp`` then ``invoke demo-ur --with dpnp --example dpnp``.
Exit code: 0 when the result matches numpy, 1 on a mismatch, 2 on an error.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import triton
import triton.language as tl

from xpukit.errors import XpukitError, guard


@triton.jit
def softmax_rows(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols, BLOCK: tl.constexpr):
    first = tl.program_id(0)
    step = tl.num_programs(0)
    for row in range(first, n_rows, step):
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(scores, dpnp):
    """Row softmax of a 2-D float32 dpnp array by the Triton kernel; a new dpnp array on its queue."""
    n_rows, n_cols = scores.shape
    out = dpnp.empty_like(scores)
    itemsize = scores.itemsize
    block = triton.next_power_of_2(n_cols)
    programs = max(1, min(n_rows, 64))
    softmax_rows[(programs,)](out, scores, scores.strides[0] // itemsize, out.strides[0] // itemsize, n_rows, n_cols,
                              BLOCK=block, num_warps=4 if block <= 2048 else 8)  # fmt: skip
    return out


def run(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=512, help="queries (default 512)")
    p.add_argument("--keys", type=int, default=300, help="keys and values (default 300)")
    p.add_argument("--dim", type=int, default=64, help="feature size (default 64)")
    p.add_argument("--debug", action="store_true", help="full tracebacks")
    args = p.parse_args(argv)
    if min(args.rows, args.keys, args.dim) < 1:
        p.error("--rows, --keys and --dim must be >= 1")
    try:
        import dpctl
        import dpnp
    except ImportError as exc:
        raise XpukitError(
            f"dpnp is not installed here ({exc})",
            "run it in the dpnp image variant (invoke demo-ur --with dpnp --example dpnp), "
            "or pip install -r env/lock/cpu-dpnp.txt",
        ) from None
    import numpy as np

    from xpukit.runtime import ur
    from xpukit.runtime.triton import activate

    rng = np.random.default_rng(0)
    q_h, k_h, v_h = (rng.standard_normal((n, args.dim), dtype=np.float32) for n in (args.rows, args.keys, args.keys))
    queue = dpctl.SyclQueue()  # dpnp's usual queue: out-of-order; the session shares an in-order one
    with ur.Session.from_sycl(queue) as s, activate(s):
        print(f"device: {s.device.name} [{s.device.type}, {s.device.backend}] over dpnp's SYCL context")
        on = s.sycl_queue  # arrays on the session's queue: the kernel needs no waits around it
        q, k, v = (dpnp.asarray(a, sycl_queue=on) for a in (q_h, k_h, v_h))
        scores = (q @ k.T) / np.float32(np.sqrt(args.dim))  # dpnp
        weights = softmax(scores, dpnp)  # Triton, on dpnp's memory
        pooled = weights @ v  # dpnp again, reading what the kernel wrote
        got = dpnp.asnumpy(pooled)
        row_sums = dpnp.asnumpy(weights.sum(axis=1))
    s_h = (q_h @ k_h.T) / np.float32(np.sqrt(args.dim))
    e = np.exp(s_h - s_h.max(axis=1, keepdims=True))
    want = (e / e.sum(axis=1, keepdims=True)) @ v_h
    diff = float(np.max(np.abs(got - want)))
    print(f"pooled {got.shape}: max abs difference vs numpy {diff:.3g}; softmax rows sum to 1 within "
          f"{float(np.max(np.abs(row_sums - 1))):.3g}")  # fmt: skip
    if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
        print("MISMATCH against numpy")
        return 1
    print("exact within float32 tolerance")
    return 0


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    return guard(lambda: run(argv), debug=debug, prog=None, any_error=True)


if __name__ == "__main__":
    sys.exit(main())
