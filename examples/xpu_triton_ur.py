#!/usr/bin/env python3
"""Triton on Unified Runtime without PyTorch: the "UR demo", done right.

Pick a device (GPU through Level Zero, else the CPU device), allocate with USM, copy in, launch
a Triton kernel that receives raw 64-bit addresses and casts them to typed pointers (and the
typed-pointer variant), wait for the device, copy out, compare with numpy, release all.

By default the launch is the blog's own call style through xpukit's UR-backed Triton driver:
``triton_scale_kernel[grid](dA_ptr, dB_ptr, scale, n, BLOCK_SIZE=1024)`` with raw addresses, then
``session.synchronize()`` (no sleep). ``--launch explicit`` uses xpukit's explicit launch API
(``TritonKernel`` with a declared signature) instead.

    python examples/xpu_triton_ur.py --n 1048576 --scale 2.5 --device auto --iters 10
"""

from __future__ import annotations

import gc
import os
import sys

# The demo does no BLAS: one OpenBLAS thread, so importing numpy starts no thread pool (on 2 busy
# cores that pool was most of numpy's import). A value you set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

# Run from a checkout without installing: the repository root is this file's parent's parent.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from xpukit.errors import guard, interrupted  # the kit's one error boundary (standard library only)

# Ctrl-C while Python starts up (the standard library, numpy, Triton) is one line, not a traceback:
# on a loaded machine even the standard library's imports take long enough to be interrupted.
try:
    import argparse
    import contextlib
    import math
    import time
    from collections.abc import Iterator
    from typing import Any

    from xpukit.runtime.interrupts import deferred_sigint

    with deferred_sigint():  # a Ctrl-C inside an extension's init would be lost (see the module)
        import numpy  # noqa: F401  (loaded here, where Ctrl-C is held; the functions import it by name)
        import triton
        import triton.language as tl
except KeyboardInterrupt:
    sys.exit(interrupted(prog=None))


@triton.jit
def triton_scale_kernel(in_addr, out_addr, scale, n_elements, BLOCK_SIZE: tl.constexpr):
    """The blog's style: the pointers arrive as int64 addresses and are cast in the kernel."""
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    in_ptr = in_addr.to(tl.pointer_type(tl.float32))
    out_ptr = out_addr.to(tl.pointer_type(tl.float32))
    x = tl.load(in_ptr + offsets, mask=mask, other=0)
    tl.store(out_ptr + offsets, x * scale, mask=mask)


@triton.jit
def scale_typed_kernel(in_ptr, out_ptr, scale, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(in_ptr + offsets, mask=mask, other=0)
    tl.store(out_ptr + offsets, x * scale, mask=mask)


MAX_N = 2**31 - 1  # n_elements is an i32 and the kernels' offsets are 32-bit
# float32 input, expected, result copy (host) plus input and output allocations (device; host
# memory on the CPU device)
BYTES_PER_ELEMENT = 5 * 4


def physical_memory() -> int:
    """Bytes of physical memory, or 0 where the system does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 0


RAW_SIGNATURE = "in_addr:i64,out_addr:i64,scale:fp32,n_elements:i32"
TYPED_SIGNATURE = "in_ptr:*fp32,out_ptr:*fp32,scale:fp32,n_elements:i32"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1 << 20, help="number of float32 elements (default 1M)")
    p.add_argument("--scale", type=float, default=2.5, help="scale factor (default 2.5)")
    p.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto", help="UR device (default auto)")
    p.add_argument("--iters", type=int, default=1, help="timed launches per variant (default 1)")
    p.add_argument("--block", type=int, default=1024, help="BLOCK_SIZE constexpr (default 1024)")
    p.add_argument(
        "--launch",
        choices=("triton", "explicit"),
        default="triton",
        help="triton: kernel[grid](...) through xpukit's UR driver (default); explicit: launch.TritonKernel",
    )
    p.add_argument(
        "--native",
        choices=("auto", "on", "off"),
        default="auto",
        help="load Triton's zebin (native code, no driver JIT): auto = on a GPU device (default)",
    )
    p.add_argument("--debug", action="store_true", help="full tracebacks and UR details")
    args = p.parse_args(argv)
    if args.n < 1 or args.iters < 1 or args.block < 1 or args.block & (args.block - 1):
        p.error("--n and --iters must be >= 1, --block a power of two")
    if args.n > MAX_N:
        p.error(f"--n {args.n} is over {MAX_N}: the kernels index with 32-bit offsets; pass a smaller --n")
    need, have = args.n * BYTES_PER_ELEMENT, physical_memory()
    if have and need > have:
        p.error(
            f"--n {args.n} needs about {need / 2**30:.1f} GiB of memory and this machine has "
            f"{have / 2**30:.1f} GiB; pass a smaller --n"
        )
    if not math.isfinite(args.scale):
        # x * nan is nan everywhere: the comparison with numpy would pass whatever the kernel did.
        p.error(f"--scale must be a finite number, not {args.scale}: a non-finite scale makes the check meaningless")
    return args


LOAD_FORMS = {
    "zebin": "Triton's zebin via urProgramCreateWithBinary (driver JIT skipped)",
    "program-cache": "xpukit's native-binary cache via urProgramCreateWithBinary",
    "spirv": "SPIR-V via urProgramCreateWithIL (JIT by the driver)",
}


@contextlib.contextmanager
def drained(session: Any) -> Iterator[None]:
    """Wait for the device on the way out, also on Ctrl-C: a kernel still in flight must finish
    before the buffers it uses are freed (freeing them under it crashes or hangs the runtime)."""
    try:
        yield
    finally:
        session.queue.finish()


def verify(label: str, got: Any, expected: Any, timings: str) -> bool:
    """Compare with numpy and print one line: the max abs error, exact or MISMATCH, the timings.
    NaN where numpy has NaN and equal infinities (a finite scale overflowing) count as exact."""
    import numpy as np

    same = (got == expected) | (np.isnan(got) & np.isnan(expected))
    with np.errstate(invalid="ignore"):
        err = float(np.max(np.where(same, 0.0, np.abs(got - expected)))) if got.size else 0.0
    match = bool(same.all())
    print(f"{label:>20}: max abs error {err:.3g} ({'exact' if match else 'MISMATCH'}), {timings}")
    return match


def run_triton_style(args: argparse.Namespace) -> int:
    """The blog's call style: ``kernel[grid](addresses..., BLOCK_SIZE=...)`` through the UR driver."""
    import numpy as np

    from xpukit.runtime import ur
    from xpukit.runtime.triton import DeviceArray, activate

    n, block = args.n, args.block
    rng = np.random.default_rng(0)
    host_in = rng.standard_normal(n, dtype=np.float32)
    expected = host_in * np.float32(args.scale)
    ok = True
    t0 = time.perf_counter()
    with ur.Session(args.device) as s, activate(s) as drv:
        d = s.device
        print(f"device: {d.name} [{d.type}, {d.backend}] driver {d.driver_version}")
        print(f"versions: UR {d.ur_release}, Triton {triton.__version__}, numpy {np.__version__}")
        # A GPU loads Triton's zebin with urProgramCreateWithBinary (no JIT); the CPU device takes SPIR-V.
        native = args.native == "on" or (args.native == "auto" and d.type == "gpu")
        if native:  # Triton's own switch for its zebin stage; the launch line stays the blog's
            os.environ["TRITON_XPU_GEN_NATIVE_CODE"] = "1"
        with s.from_numpy(host_in) as d_in, s.alloc(host_in.nbytes) as d_out, drained(s):
            grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731 - the blog's form
            variants = (
                # Raw int64 addresses, cast to typed pointers inside the kernel (the blog's demo).
                ("raw int64 addresses", triton_scale_kernel, d_in.ptr, d_out.ptr),
                # Typed pointers: a DeviceArray has data_ptr() and a dtype, as Triton expects.
                ("typed pointers", scale_typed_kernel, DeviceArray(d_in, np.float32), DeviceArray(d_out, np.float32)),
            )
            for label, kernel, a_in, a_out in variants:
                loads = drv.stats.variants
                tb = time.perf_counter()
                kernel[grid](a_in, a_out, args.scale, n, BLOCK_SIZE=block)  # compiles, loads, launches
                s.synchronize()
                t_first = time.perf_counter() - tb
                print(f"{label:>20}: program loaded from {LOAD_FORMS.get(drv.stats.last_load, drv.stats.last_load)}")
                times = []
                for _ in range(args.iters):
                    tl0 = time.perf_counter()
                    kernel[grid](a_in, a_out, args.scale, n, BLOCK_SIZE=block)
                    s.synchronize()  # a real device-wide wait, never a sleep
                    times.append(time.perf_counter() - tl0)
                ok &= verify(
                    label,
                    d_out.to_numpy(np.float32, n),
                    expected,
                    f"first call (compile+load+launch) {t_first * 1e3:.1f} ms, "
                    f"kernel[grid]+synchronize best {min(times) * 1e6:.0f} us over {args.iters}, "
                    f"{drv.stats.variants - loads} new variant(s)",
                )
                d_out.copy_from(np.zeros(n, dtype=np.float32))  # so the next variant proves itself
    print(f"total {time.perf_counter() - t0:.2f} s; {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


def run(args: argparse.Namespace) -> int:
    if args.launch == "triton":
        return run_triton_style(args)
    return run_explicit(args)


def run_explicit(args: argparse.Namespace) -> int:
    """xpukit's explicit launch API: TritonKernel with a declared signature, bound to the session."""
    import numpy as np

    from xpukit.runtime import ur
    from xpukit.runtime.triton.launch import TritonKernel

    n, block = args.n, args.block
    grid = (triton.cdiv(n, block),)
    rng = np.random.default_rng(0)
    host_in = rng.standard_normal(n, dtype=np.float32)
    expected = host_in * np.float32(args.scale)
    ok = True
    t0 = time.perf_counter()
    with ur.Session(args.device) as s:
        d = s.device
        print(f"device: {d.name} [{d.type}, {d.backend}] driver {d.driver_version}")
        print(f"versions: UR {d.ur_release}, Triton {triton.__version__}, numpy {np.__version__}")
        with s.from_numpy(host_in) as d_in, s.alloc(host_in.nbytes) as d_out, drained(s):
            for label, fn, sig in (
                ("raw int64 addresses", triton_scale_kernel, RAW_SIGNATURE),
                ("typed pointers", scale_typed_kernel, TYPED_SIGNATURE),
            ):
                kernel = TritonKernel(fn, sig, {"BLOCK_SIZE": block})
                tb = time.perf_counter()
                bound = kernel.bind(s)  # compile (Triton cache) + load (program cache)
                t_load = time.perf_counter() - tb
                # Raw-address kernels get the integers; typed ones the allocations themselves.
                a_in, a_out = (d_in.ptr, d_out.ptr) if fn is triton_scale_kernel else (d_in, d_out)
                times = []
                for _ in range(args.iters):
                    tl0 = time.perf_counter()
                    bound[grid](a_in, a_out, np.float32(args.scale), n)
                    s.queue.finish()  # urQueueFinish: a real wait, never a sleep
                    times.append(time.perf_counter() - tl0)
                ok &= verify(
                    label,
                    d_out.to_numpy(np.float32, n),
                    expected,
                    f"compile+load {t_load * 1e3:.1f} ms, "
                    f"launch+finish best {min(times) * 1e6:.0f} us over {args.iters}",
                )
                d_out.copy_from(np.zeros(n, dtype=np.float32))  # so the next variant proves itself
                bound.close()
    print(f"total {time.perf_counter() - t0:.2f} s; {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # A device or driver failure is one line naming its type, like the kit's own errors.
    return guard(lambda: run(args), debug=args.debug, prog=None, any_error=True)


if __name__ == "__main__":
    code = main()
    # Everything the demo made is released by now (buffers freed, session closed). The interpreter's
    # last garbage collection would walk every object numpy and Triton made at import, to free none
    # of them: gc.freeze() leaves them out (about 30 ms of the demo's exit on 2 cores).
    gc.freeze()
    sys.exit(code)
