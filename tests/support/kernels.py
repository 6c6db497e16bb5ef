"""Triton kernels the image tests share (scale, vector add, reductions, dot...): import them, never copy."""

from __future__ import annotations

import pytest

# A module importing these kernels is skipped where Triton is missing (a bare host).
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402


def fresh(kernel: triton.JITFunction) -> triton.JITFunction:
    """A new JITFunction of ``kernel``'s function: its own compiled variants and dispatch, so a
    module counting compiles or loads counts its own (the shared object carries every module's)."""
    return triton.jit(kernel.fn)


@triton.jit
def scale_raw(in_addr, out_addr, scale, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    src = in_addr.to(tl.pointer_type(tl.float32))
    dst = out_addr.to(tl.pointer_type(tl.float32))
    tl.store(dst + offs, tl.load(src + offs, mask=mask, other=0) * scale, mask=mask)


@triton.jit
def scale_typed(x_ptr, y_ptr, scale, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=0) * scale, mask=mask)


@triton.jit
def vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def grid_2d(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    idx = rows[:, None] * N + cols[None, :]
    x = tl.load(x_ptr + idx, mask=mask)
    tl.store(out_ptr + idx, x * 2.0 + rows[:, None].to(tl.float32), mask=mask)


@triton.jit
def row_sum(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


@triton.jit
def k_loop_sum(x_ptr, out_ptr, K, BK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BK], dtype=tl.float32)
    for k in range(0, K, BK):
        cols = k + tl.arange(0, BK)
        acc += tl.load(x_ptr + row * K + cols, mask=cols < K, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@triton.jit
def fp16_to_fp32(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(tl.float32), mask=mask)


@triton.jit
def int32_ops(x_ptr, y_ptr, out_ptr, n, k, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, (x * k + y) ^ (x >> 2), mask=mask)


@triton.jit
def softmax_rows(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * N + cols, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def matmul_small(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def atomic_hist(x_ptr, hist_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(hist_ptr + x, 1, mask=mask)


@triton.jit
def where_max(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(x > y, x, tl.maximum(y, 0.0)), mask=mask)


@triton.jit
def cumsum_rows(x_ptr, out_ptr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * BLOCK + cols)
    tl.store(out_ptr + row * BLOCK + cols, tl.cumsum(x, axis=0))


@triton.jit
def argmax_rows(x_ptr, out_ptr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * BLOCK + cols)
    tl.store(out_ptr + row, tl.argmax(x, axis=0))


@triton.jit
def bf16_roundtrip(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x.to(tl.bfloat16).to(tl.float32), mask=mask)


@triton.jit
def fp64_axpy(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def math_fns(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.sqrt(x) + tl.sin(x) + tl.log(x + 1.0), mask=mask)
