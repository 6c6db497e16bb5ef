#!/usr/bin/env python3
"""xpukit's UR launch path against pyopencl, same device, same SPIR-V, one process.

Measures (medians over interleaved rounds, so both sides see the same machine state):
  * launch + finish latency, and enqueue-only latency, at 1K and 1M floats; the ratio xpukit/pyopencl
  * program load: warm native-binary cache vs cold SPIR-V build
  * the demo (examples/xpu_triton_ur.py) end to end with a cold and a warm Triton cache

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_ur_launch.py [--rounds 7] [--reps 200] [--json out.json]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # BLAS threads spinning on 2 cores skew timings

import argparse
import ctypes
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from benchmarks.common import machine, per_call_us, pyopencl_on, report  # noqa: E402
from xpukit.runtime import ur  # noqa: E402
from xpukit.runtime.triton.launch import ProgramCache, TritonKernel  # noqa: E402
from xpukit.runtime.ur import _api  # noqa: E402

BLOCK = 1024


@triton.jit
def scale_typed(x_ptr, y_ptr, scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=0) * scale, mask=mask)


def bench_launch(args, s, bound, spirv: bytes, tmp: Path) -> list[dict]:
    cl, ctx, q, _dev = pyopencl_on(s.lib.cpu_runtime, tmp)
    prog = cl.Program(ctx, spirv).build()
    knl = cl.Kernel(prog, bound.artifact.name)
    return [_one_size(args, s, bound, cl, ctx, q, knl, n) for n in (1 << 10, 1 << 20)]


def _one_size(args, s, bound, cl, ctx, q, knl, n: int) -> dict:
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    grid = (triton.cdiv(n, BLOCK),)
    (gx, gy, gz), local = bound.abi.nd_range(grid)
    # xpukit side
    dx, dy = s.from_numpy(x), s.alloc(x.nbytes)
    # pyopencl side
    mf = cl.mem_flags
    bx = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    by = cl.Buffer(ctx, mf.WRITE_ONLY, x.nbytes)
    scale, nn = np.float32(1.5), np.int32(n)

    def ur_launch_finish():
        bound[grid](dx, dy, scale, n)
        s.queue.finish()

    def cl_launch_finish():
        knl(q, (gx, gy, gz), local, bx, by, scale, nn)
        q.finish()

    def ur_enqueue():
        bound[grid](dx, dy, scale, n)

    knl.set_args(bx, by, scale, nn)

    def cl_enqueue():
        cl.enqueue_nd_range_kernel(q, knl, (gx, gy, gz), local)

    # The 1:1 binding alone: arguments already set (2025.x) or packed once (2026.0+), one launch call each.
    kh, qh = bound.kernel.handle, s.queue.handle
    gs, ls = (ctypes.c_size_t * 3)(gx, gy, gz), (ctypes.c_size_t * 3)(*local)
    form = s.lib.launch_form
    if form == _api.LaunchForm.WITH_ARGS:
        raw = s.lib.raw.urEnqueueKernelLaunchWithArgsExp
        for i, v in enumerate((dx.ptr, dy.ptr)):
            bound.kernel.set_arg_pointer(i, v)
        bound.kernel.set_arg_value(2, ctypes.c_float(float(scale)))
        bound.kernel.set_arg_value(3, ctypes.c_int32(n))
        packed, _keep_alive = bound.kernel.argument_properties()  # the value bytes packed points into

        def ur_raw_enqueue():
            raw(qh, kh, 3, None, gs, ls, len(packed), packed, None, 0, None, None)

    else:
        raw = s.lib.raw.urEnqueueKernelLaunch

        def ur_raw_enqueue():
            if form == _api.LaunchForm.SET_ARGS_LAUNCH11:
                raw(qh, kh, 3, None, gs, ls, 0, None, 0, None, None)
            else:
                raw(qh, kh, 3, None, gs, ls, 0, None, None)

    res = {k: [] for k in ("ur_lf", "cl_lf", "ur_enq", "ur_raw", "cl_enq")}
    for f in (ur_launch_finish, cl_launch_finish):
        for _ in range(20):
            f()
    for _ in range(args.rounds):  # interleaved rounds
        res["ur_lf"].append(per_call_us(ur_launch_finish, args.reps))
        res["cl_lf"].append(per_call_us(cl_launch_finish, args.reps))
        res["ur_enq"].append(per_call_us(ur_enqueue, args.reps))
        s.queue.finish()
        res["ur_raw"].append(per_call_us(ur_raw_enqueue, args.reps))
        s.queue.finish()
        res["cl_enq"].append(per_call_us(cl_enqueue, args.reps))
        q.finish()
    med = {k: statistics.median(v) for k, v in res.items()}
    got = dy.to_numpy(np.float32, n)
    ref = np.empty_like(x)
    cl.enqueue_copy(q, ref, by)
    assert np.array_equal(got, x * scale) and np.array_equal(ref, x * scale)
    row = {
        "n": n,
        "xpukit_launch_finish_us": round(med["ur_lf"], 1),
        "pyopencl_launch_finish_us": round(med["cl_lf"], 1),
        "ratio_launch_finish": round(med["ur_lf"] / med["cl_lf"], 3),
        "xpukit_enqueue_us": round(med["ur_enq"], 2),
        "xpukit_raw_enqueue_us": round(med["ur_raw"], 2),
        "pyopencl_enqueue_us": round(med["cl_enq"], 2),
        "ratio_enqueue": round(med["ur_enq"] / med["cl_enq"], 3),
        "ratio_raw_enqueue": round(med["ur_raw"] / med["cl_enq"], 3),
    }
    dx.close()
    dy.close()
    return row


def bench_program_load(args, s, spirv: bytes, tmp: Path) -> dict:
    cold, warm = [], []
    cache = ProgramCache(tmp / "programs")
    cache.load(s, spirv).program.close()  # populate
    for _ in range(args.rounds):
        t = time.perf_counter()
        s.program_from_spirv(spirv).close()
        cold.append(time.perf_counter() - t)
        t = time.perf_counter()
        p = cache.load(s, spirv).program
        warm.append(time.perf_counter() - t)
        assert p.source_kind == "binary"
        p.close()
    c, w = statistics.median(cold), statistics.median(warm)
    return {
        "cold_spirv_build_ms": round(c * 1e3, 2),
        "warm_binary_load_ms": round(w * 1e3, 2),
        "ratio": round(w / c, 4),
    }


def bench_demo(tmp: Path) -> dict:
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp / "triton"), XPUKIT_CACHE_DIR=str(tmp / "xpukit"))
    cmd = [sys.executable, str(REPO / "examples" / "xpu_triton_ur.py"), "--n", str(1 << 20), "--device", "cpu"]
    out = {}
    for label in ("cold", "warm"):
        t = time.perf_counter()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        out[f"demo_{label}_s"] = round(time.perf_counter() - t, 2)
        if p.returncode != 0:
            raise SystemExit(f"demo failed: {p.stderr.strip().splitlines()[-1:]}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--skip-demo", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as td, ur.Session("cpu") as s:
        tmp = Path(td)
        k = TritonKernel(
            scale_typed, "x_ptr:*fp32,y_ptr:*fp32,scale:fp32,n:i32", {"BLOCK": BLOCK}, cache=ProgramCache(tmp / "k")
        )
        bound = k.bind(s)
        spirv = bound.artifact.spirv
        result = {
            "machine": machine(),
            "device": f"{s.device.name} [{s.device.backend}] driver {s.device.driver_version}",
            "ur_release": s.device.ur_release,
            "command": " ".join(["OPENBLAS_NUM_THREADS=1", "python", *sys.argv]),
            "launch": bench_launch(args, s, bound, spirv, tmp),
            "program_load": bench_program_load(args, s, spirv, tmp),
        }
        bound.close()
    if not args.skip_demo:
        with tempfile.TemporaryDirectory() as td:
            result["demo"] = bench_demo(Path(td))
    report(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
