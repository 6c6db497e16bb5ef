"""Example Triton kernels for ``invoke compile``.

``XPUKIT_KERNELS`` declares each kernel's signature (Triton types of the runtime arguments) and
constexpr values, so ``invoke compile examples/kernels.py:scale_kernel --target pvc --out build``
needs no other flags. Flags given on the command line override these.
"""

import triton
import triton.language as tl

XPUKIT_KERNELS = {
    "scale_kernel": {
        "signature": "x_ptr:*fp32, y_ptr:*fp32, a:fp32, n:i32",
        "constexprs": {"BLOCK": 1024},
    },
    "add_kernel": {
        "signature": "x_ptr:*fp32, y_ptr:*fp32, out_ptr:*fp32, n:i32",
        "constexprs": {"BLOCK": 512},
    },
    "strided_copy_kernel": {
        "signature": "src_ptr:*fp32, dst_ptr:*fp32, n:i64, stride:i64",
        "constexprs": {"BLOCK": 256},
    },
    "axpy_fp16_kernel": {
        "signature": "x_ptr:*fp16, y_ptr:*fp16, alpha:fp32, n:i32",
        "constexprs": {"BLOCK": 1024},
    },
    "row_sum_kernel": {
        "signature": "x_ptr:*fp32, out_ptr:*fp32, n_cols:i32, row_stride:i32",
        "constexprs": {"BLOCK": 256},
    },
}


@triton.jit
def scale_kernel(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * a, mask=mask)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def strided_copy_kernel(src_ptr, dst_ptr, n, stride, BLOCK: tl.constexpr):
    # 64-bit element count and stride: indices that do not fit in 32 bits.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs * stride, mask=mask), mask=mask)


@triton.jit
def axpy_fp16_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (alpha * x + y).to(tl.float16), mask=mask)


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))
