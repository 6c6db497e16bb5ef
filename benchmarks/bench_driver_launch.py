#!/usr/bin/env python3
"""Host overhead per launch: Triton's ``kernel[grid](...)`` through xpukit's UR driver, against the
direct launch of xpukit.runtime.launch (``BoundKernel``) and pyopencl's enqueue. Same device (the CPU
device), same patched SPIR-V, same kernel (the blog's scale kernel with raw int64 addresses), one
process, interleaved rounds, medians.

Measured per call (enqueue only: the queue is finished between rounds, outside the timing):
  * driver:        kernel[grid](a.ptr, b.ptr, scale, n, BLOCK_SIZE=1024), grid a tuple
  * driver+lambda: the same with the blog's grid lambda
  * driver varying: the scale alternates, so every call converts and sets its arguments again
                   (an identical call re-enqueues with the arguments the UR kernel still holds)
  * direct:        BoundKernel launch (argument checks + changed arguments + urEnqueueKernelLaunch)
  * pyopencl:      knl(queue, global, local, *args) (sets every argument, enqueues); its kernel is the
                   typed-pointer twin (cl_mem buffers are handles, not int64 addresses)
  * pyopencl set:  enqueue_nd_range_kernel with the arguments set once
plus launch + finish at the same size for each of driver, direct and pyopencl.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_driver_launch.py [--n 1024] [--rounds 7] [--reps 300] [--json F]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # BLAS threads spinning on 2 cores skew timings

import argparse
import contextlib
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from xpukit.runtime import ur  # noqa: E402
from xpukit.runtime.launch import ProgramCache, TritonKernel  # noqa: E402
from xpukit.runtime.triton_driver import URDriver, activate  # noqa: E402

BLOCK = 1024


@triton.jit
def triton_scale_kernel(in_addr, out_addr, scale, n_elements, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    src = in_addr.to(tl.pointer_type(tl.float32))
    dst = out_addr.to(tl.pointer_type(tl.float32))
    tl.store(dst + offs, tl.load(src + offs, mask=mask, other=0) * scale, mask=mask)


@triton.jit
def scale_typed(x_ptr, y_ptr, scale, n_elements, BLOCK_SIZE: tl.constexpr):
    # pyopencl's twin: cl_mem buffers are handles, not addresses, so they need typed pointers.
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=0) * scale, mask=mask)


def _per_call_us(fn, reps: int) -> float:
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps * 1e6


def _pyopencl(runtime: Path, tmp: Path):
    vendors = tmp / "vendors"
    vendors.mkdir()
    (vendors / "intel-cpu.icd").write_text(str(runtime) + "\n")
    os.environ["OCL_ICD_VENDORS"] = str(vendors)  # pyopencl's bundled ICD loader reads this, not OCL_ICD_FILENAMES
    import pyopencl as cl

    plats = [p for p in cl.get_platforms() if p.get_devices(device_type=cl.device_type.CPU)]
    ctx = cl.Context([plats[0].get_devices(device_type=cl.device_type.CPU)[0]])
    return cl, ctx, cl.CommandQueue(ctx)


def machine() -> dict:
    cpu = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    import pyopencl

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "triton": triton.__version__,
        "pyopencl": pyopencl.VERSION_TEXT,
        "numpy": np.__version__,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024, help="floats per launch (default 1024: overhead dominates)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    n = args.n
    x = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    scale = 1.5
    want = x * np.float32(scale)
    with tempfile.TemporaryDirectory() as td, ur.Session("cpu") as s:
        tmp = Path(td)
        drv = URDriver(cache=ProgramCache(tmp / "driver"))
        direct = TritonKernel(
            triton_scale_kernel,
            "in_addr:i64,out_addr:i64,scale:fp32,n_elements:i32",
            {"BLOCK_SIZE": BLOCK},
            cache=ProgramCache(tmp / "direct"),
        ).bind(s)
        cl, ctx, q = _pyopencl(s.lib.cpu_runtime, tmp)
        twin = TritonKernel(
            scale_typed, "x_ptr:*fp32,y_ptr:*fp32,scale:fp32,n_elements:i32", {"BLOCK_SIZE": BLOCK}, cache=False
        ).compile(s.device)
        knl = cl.Kernel(cl.Program(ctx, twin.spirv).build(), twin.name)
        (gx, gy, gz), local = direct.abi.nd_range((triton.cdiv(n, BLOCK),))
        with activate(s, driver=drv), s.from_numpy(x) as dx, s.alloc(x.nbytes) as dy, s.alloc(x.nbytes) as dz:
            bx = cl.Buffer(ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
            by = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, x.nbytes)
            a, b, c = dx.ptr, dy.ptr, dz.ptr
            grid = (triton.cdiv(n, BLOCK),)
            grid_fn = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
            sc, nn = np.float32(scale), np.int32(n)

            def driver_call():
                triton_scale_kernel[grid](a, b, scale, n, BLOCK_SIZE=BLOCK)

            def driver_lambda():
                triton_scale_kernel[grid_fn](a, b, scale, n, BLOCK_SIZE=BLOCK)

            flip = [1.5, 2.5]

            def driver_varying():  # a changed scalar each call: full argument conversion and setting
                flip.reverse()
                triton_scale_kernel[grid](a, b, flip[0], n, BLOCK_SIZE=BLOCK)

            def direct_call():
                direct[grid](a, c, scale, n)

            flip_direct = [1.5, 2.5]

            def direct_varying():  # the same changed scalar, for a like-for-like varying ratio
                flip_direct.reverse()
                direct[grid](a, c, flip_direct[0], n)

            def cl_call():
                knl(q, (gx, gy, gz), local, bx, by, sc, nn)

            def cl_set():
                cl.enqueue_nd_range_kernel(q, knl, (gx, gy, gz), local)

            enqueue = {
                "driver": driver_call,
                "driver_lambda": driver_lambda,
                "driver_varying": driver_varying,
                "direct": direct_call,
                "direct_varying": direct_varying,
                "pyopencl": cl_call,
                "pyopencl_set": cl_set,
            }
            finish = {
                "driver": (driver_call, s.queue.finish),
                "direct": (direct_call, s.queue.finish),
                "pyopencl": (cl_call, q.finish),
            }
            knl.set_args(bx, by, sc, nn)
            for f in enqueue.values():  # warm: compile, load, first argument set
                for _ in range(20):
                    f()
            s.synchronize()
            q.finish()
            res: dict[str, list[float]] = {k: [] for k in enqueue}
            res.update({f"{k}_finish": [] for k in finish})
            for _ in range(args.rounds):  # interleaved: every variant sees the same machine state
                for k, f in enqueue.items():
                    res[k].append(_per_call_us(f, args.reps))
                    s.synchronize()
                    q.finish()
                for k, (f, fin) in finish.items():
                    res[f"{k}_finish"].append(_per_call_us(lambda f=f, fin=fin: (f(), fin()), args.reps))
            med = {k: statistics.median(v) for k, v in res.items()}
            driver_call()  # driver_varying left another scale in b
            s.synchronize()
            got_driver, got_direct = dy.to_numpy(np.float32, n), dz.to_numpy(np.float32, n)
            got_cl = np.empty_like(x)
            cl.enqueue_copy(q, got_cl, by)
            assert np.array_equal(got_driver, want) and np.array_equal(got_direct, want)
            assert np.array_equal(got_cl, want)
            variants = drv.stats.variants
        direct.close()
    result = {
        "machine": machine(),
        "device": f"{s.device.name} [{s.device.backend}] driver {s.device.driver_version}",
        "ur_release": s.device.ur_release,
        "command": " ".join(["OPENBLAS_NUM_THREADS=1", "python", *sys.argv]),
        "n": n,
        "rounds": args.rounds,
        "reps": args.reps,
        "driver_variants_compiled": variants,
        "enqueue_us": {k: round(med[k], 2) for k in enqueue},
        "launch_finish_us": {k: round(med[f"{k}_finish"], 2) for k in finish},
        "ratios": {
            "driver/direct (target <= 1.5)": round(med["driver"] / med["direct"], 3),
            "driver_lambda/direct": round(med["driver_lambda"] / med["direct"], 3),
            "driver_varying/direct": round(med["driver_varying"] / med["direct"], 3),
            "driver_varying/direct_varying": round(med["driver_varying"] / med["direct_varying"], 3),
            "driver/pyopencl": round(med["driver"] / med["pyopencl"], 3),
            "direct/pyopencl": round(med["direct"] / med["pyopencl"], 3),
            "driver/pyopencl_set": round(med["driver"] / med["pyopencl_set"], 3),
            "launch+finish driver/direct": round(med["driver_finish"] / med["direct_finish"], 3),
            "launch+finish driver/pyopencl": round(med["driver_finish"] / med["pyopencl_finish"], 3),
        },
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
