"""A tiled fp16 matrix multiply with ``tl.dot``: the kernel whose code differs most across Intel GPU
families (DPAS and 2D block loads where the hardware has them, FMAs elsewhere).

    invoke compile examples/matmul.py:matmul_kernel --target all --asm
    invoke kernel-report examples/matmul.py:matmul_kernel --target all \\
        --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,num_warps=8 --config BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,num_warps=4
    invoke kernel-report examples/matmul.py:matmul_kernel --launched-by examples/matmul.py --target pvc
    python examples/matmul.py --size 128      # runs it on the CPU device, checked against numpy

The signature declares what a launch on contiguous matrices of sizes divisible by 16 tells Triton
(Triton's AOT hint notation): 16-aligned pointers, sizes and leading strides divisible by 16
(``:16``), unit strides equal to 1 (``:1``). Those hints are what turn the block loads into 2D block
loads; without them the report would show gathers a launch never runs (docs/lines.md).
"""

import sys

import triton
import triton.language as tl

XPUKIT_KERNELS = {
    "matmul_kernel": {
        "signature": "a_ptr:*fp16:16, b_ptr:*fp16:16, c_ptr:*fp32:16, M:i32:16, N:i32:16, K:i32:16, "
        "stride_am:i32:16, stride_ak:i32:1, stride_bk:i32:16, stride_bn:i32:1, stride_cm:i32:16, stride_cn:i32:1",
        "constexprs": {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32},
    },
}


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_block = tl.make_block_ptr(a_ptr, (M, K), (stride_am, stride_ak), (pid_m * BLOCK_M, 0), (BLOCK_M, BLOCK_K), (1, 0))
    b_block = tl.make_block_ptr(b_ptr, (K, N), (stride_bk, stride_bn), (0, pid_n * BLOCK_N), (BLOCK_K, BLOCK_N), (1, 0))
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        a = tl.load(a_block, boundary_check=(0, 1))
        b = tl.load(b_block, boundary_check=(0, 1))
        acc += tl.dot(a, b)
        a_block = tl.advance(a_block, (0, BLOCK_K))
        b_block = tl.advance(b_block, (BLOCK_K, 0))
    c_block = tl.make_block_ptr(c_ptr, (M, N), (stride_cm, stride_cn), (pid_m * BLOCK_M, pid_n * BLOCK_N),
                                (BLOCK_M, BLOCK_N), (1, 0))  # fmt: skip
    tl.store(c_block, acc, boundary_check=(0, 1))


def run(argv: list[str] | None = None) -> int:
    """Multiply two random fp16 matrices on the device and compare with numpy (exit 0 when close)."""
    import argparse

    import numpy as np

    from xpukit.runtime import ur
    from xpukit.runtime.triton import activate, empty, from_numpy

    parser = argparse.ArgumentParser(description="examples/matmul.py on the device, checked against numpy")
    parser.add_argument("--size", type=int, default=128, help="M = N = K (a multiple of 16 gives block loads)")
    parser.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    args = parser.parse_args(argv)
    if args.size <= 0:
        parser.error("--size must be > 0")
    size, block = args.size, 64
    rng = np.random.default_rng(0)
    a_host = rng.random((size, size), dtype=np.float32).astype(np.float16)
    b_host = rng.random((size, size), dtype=np.float32).astype(np.float16)
    with (
        ur.Session(args.device) as session,
        activate(session),
        from_numpy(a_host) as a,
        from_numpy(b_host) as b,
        empty((size, size), np.float32) as c,
    ):
        grid = (triton.cdiv(size, block), triton.cdiv(size, block))
        matmul_kernel[grid](
            a, b, c, size, size, size, size, 1, size, 1, size, 1, BLOCK_M=block, BLOCK_N=block, BLOCK_K=32
        )
        session.synchronize()
        got = c.to_numpy()
    want = a_host.astype(np.float32) @ b_host.astype(np.float32)
    error = float(np.max(np.abs(got - want)))
    print(f"matmul {size}x{size}x{size} on {session.device.name}: max abs error {error:.3g}")
    return 0 if error < 1e-2 * size else 1


if __name__ == "__main__":
    from xpukit.errors import guard

    sys.exit(guard(run, prog=None, any_error=True))
