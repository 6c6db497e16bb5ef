"""A tiled fp16 matrix multiply with ``tl.dot``: the kernel whose code differs most across Intel GPU
families (DPAS and 2D block loads where the hardware has them, FMAs elsewhere).

    invoke compile examples/matmul.py:matmul_kernel --target all --asm
    invoke kernel-report examples/matmul.py:matmul_kernel --target all \\
        --config BLOCK_M=128,BLOCK_N=128,BLOCK_K=32,num_warps=8 --config BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,num_warps=4
"""

import triton
import triton.language as tl

XPUKIT_KERNELS = {
    "matmul_kernel": {
        "signature": "a_ptr:*fp16, b_ptr:*fp16, c_ptr:*fp32, M:i32, N:i32, K:i32, "
        "stride_am:i32, stride_ak:i32, stride_bk:i32, stride_bn:i32, stride_cm:i32, stride_cn:i32",
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
