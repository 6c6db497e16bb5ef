#!/usr/bin/env python3
"""Instructions per launch (callgrind): xpukit's kernel[grid] against pyopencl's, noise-free.

Each case runs in a child process under ``valgrind --tool=callgrind --separate-threads=yes``
twice, with N1 and N2 calls after a warm-up; the main thread's instruction count difference over
N2 - N1 is the cost of one call as the benchmark's loop makes it (the call site included: the
argument tuple, for kernel[grid] also the keyword dict; the queue is drained every 200 calls on
both sides). The empty call (``none``) is the loop's own cost. Per call, the instructions are also
split by the shared object that executed them (Python, the compiled launcher, UR's loader, the
OpenCL runtime, pyopencl's extension, libc...), so the floor (what UR and the runtime execute) and
what remains are apart. Other processes on the machine do not change these counts.
Cases (the kernels and arguments of bench_launch.py):
  many            many_args[(4,)](*ptrs, *ints, *floats, **consts): 5 pointers + 9 scalars + 5 constexprs
  many_launcher   the same kernel's launcher called directly (no xpukit Python frame): the floor
  cl_many         pyopencl's fast path on the same SPIR-V: knl(queue, G, L, *args)
  scale, cl_scale kernel[grid](x, y, 2.0, n, BLOCK=1024) and pyopencl's call
  scale_varying, cl_scale_varying  the same with n alternating between 1000 and 1001 (one
                  specialization: bench_launch.py's scale_varying)
  scale_varying_keys, cl_scale_varying_keys  n alternating between 1000 and 1008 (n % 16 == 0 is
                  another specialization: each call's key differs from the last one's)
  none            an empty call: the loop

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_launch_instructions.py [--valgrind valgrind] [--json F]

Valgrind is not in the image: run it from a container with the host's valgrind mounted
(docs/benchmarks/launch.md), or install it there with apt for the measurement.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import gc
import glob
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.common import callgrind_calls  # noqa: E402

CASES = (
    "none",
    "many",
    "many_launcher",
    "cl_many",
    "scale",
    "cl_scale",
    "scale_varying",
    "cl_scale_varying",
    "scale_varying_keys",
    "cl_scale_varying_keys",
)
PAIRS = (
    ("many", "cl_many"),
    ("many_launcher", "cl_many"),
    ("scale", "cl_scale"),
    ("scale_varying", "cl_scale_varying"),
    ("scale_varying_keys", "cl_scale_varying_keys"),
)


def child(case: str, calls: int) -> None:
    """Run one case `calls` times after a warm-up (the process valgrind measures)."""
    import numpy as np

    from benchmarks.bench_launch import BLOCK, many_args
    from benchmarks.common import pyopencl_on
    from examples.kernels import scale_kernel as scale
    from xpukit.runtime import ur
    from xpukit.runtime.triton import URDriver, activate
    from xpukit.runtime.triton.launch import TritonKernel
    from xpukit.runtime.ur.objects import DeviceArray

    n = 1000
    x = np.ones(n + 16, dtype=np.float32)  # room for the varying cases' n + 8
    with tempfile.TemporaryDirectory() as td, ur.Session("cpu") as s:
        cl, ctx, q, _ = pyopencl_on(s.lib.cpu_runtime, Path(td))
        sig = "x_ptr:*fp32,y_ptr:*fp32,a:fp32,n:i32"
        many_sig = ",".join([f"p{i}:*fp32" for i in range(5)] + [f"i{i}:i32" for i in range(5)])
        many_sig += "," + ",".join(f"f{i}:fp32" for i in range(4))
        consts = {f"C{i}": i + 2 for i in range(5)}
        grid = (1,)
        # the varying cases: n alternates, in one specialization or between two (1008 % 16 == 0)
        flip = [n, n + 8] if case.endswith("_keys") else [n, n + 1]
        with (
            activate(s, driver=URDriver()),
            s.from_numpy(x) as ax,
            s.alloc(x.nbytes) as ay,
            s.alloc(x.nbytes) as az,
        ):
            dx, dy, dz = DeviceArray(ax, np.float32), DeviceArray(ay, np.float32), DeviceArray(az, np.float32)
            ptrs = [dz] * 5
            ints, floats = [1 + 2 * i for i in range(5)], [0.5 * i for i in range(4)]
            by = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, x.nbytes)
            bx = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, x.nbytes)
            if case in ("many_launcher", "cl_many"):
                bound = TritonKernel(many_args, many_sig, consts).bind(s)
                if case == "many_launcher":
                    launch, qh, largs = bound.launcher.launch, s.queue.handle, (*ptrs, *ints, *floats)

                    def f():
                        launch(qh, 4, 1, 1, largs)
                else:
                    knl = cl.Kernel(cl.Program(ctx, bound.artifact.spirv).build(), bound.artifact.name)
                    knl.set_scalar_arg_dtypes([None] * 5 + [np.int32] * 5 + [np.float32] * 4)
                    (gx, gy, gz), local = bound.abi.nd_range((4,))
                    cl_ptrs = [by] * 5

                    def f():
                        knl(q, (gx, gy, gz), local, *cl_ptrs, *ints, *floats)
            elif case.startswith("cl_scale"):
                bound = TritonKernel(scale, sig, {"BLOCK": BLOCK}).bind(s)
                knl = cl.Kernel(cl.Program(ctx, bound.artifact.spirv).build(), bound.artifact.name)
                knl.set_scalar_arg_dtypes([None, None, np.float32, np.int32])
                (gx, gy, gz), local = bound.abi.nd_range(grid)
                if case == "cl_scale":

                    def f():
                        knl(q, (gx, gy, gz), local, bx, by, 2.0, n)
                else:

                    def f():
                        flip.reverse()
                        knl(q, (gx, gy, gz), local, bx, by, 2.0, flip[0])
            elif case == "many":

                def f():
                    many_args[(4,)](*ptrs, *ints, *floats, **consts)
            elif case == "scale":

                def f():
                    scale[grid](dx, dy, 2.0, n, BLOCK=BLOCK)
            elif case in ("scale_varying", "scale_varying_keys"):

                def f():
                    flip.reverse()
                    scale[grid](dx, dy, 2.0, flip[0], BLOCK=BLOCK)
            else:

                def f():
                    return None

            for _ in range(50):
                f()
            s.finish()
            q.finish()
            gc.collect()  # a collection due from the set-up must not fall into the window
            os.getppid()  # callgrind zeroes its counters here (--zero-before=getppid)
            for _ in range(calls):
                f()
                s.finish()
                q.finish()
            os.getpgrp()  # and dumps them here (--dump-before=getpgrp): the loop alone
            s.finish()
            q.finish()


FINISH = re.compile(r"(^|::)(urQueueFinish|clFinish)\b")
# The runtime's part of a launch: UR's launch entry (the adapter sets the OpenCL arguments inside
# it), or the OpenCL calls pyopencl makes; inclusive, counted from callers outside them.
RUNTIME = re.compile(r"(^|::)(urEnqueueKernelLaunch\w*|clEnqueueNDRangeKernel|clSetKernelArg\w*)\b")


def parse(path: str) -> tuple[int, int]:
    """(Ir, Ir in the runtime's launch calls) of one callgrind dump, both without what the queue
    drains cost: the calls of urQueueFinish and clFinish, inclusive (the main thread may run
    queued kernels' bookkeeping there, as much as the worker threads left, which varies)."""
    total, calls = callgrind_calls(path)
    drained = runtime = 0
    for fn, cfn, cost in calls:
        if FINISH.search(cfn) and not FINISH.search(fn):
            drained += cost
        elif RUNTIME.search(cfn) and not RUNTIME.search(fn):
            runtime += cost
    return total - drained, runtime


def measure(case: str, calls: int, valgrind: str, out: Path) -> tuple[int, int]:
    base = out / f"cg.{case}"
    cmd = [valgrind, "--tool=callgrind", "--separate-threads=yes", "--zero-before=getppid", "--dump-before=getpgrp"]
    cmd += [f"--callgrind-out-file={base}.%p", sys.executable, str(Path(__file__).resolve()), "--child", case]
    r = subprocess.run([*cmd, str(calls)], capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    if r.returncode:
        sys.exit(f"bench_launch_instructions: {case} under callgrind failed: {r.stderr.strip().splitlines()[-1:]}")
    files = glob.glob(f"{base}.*.1-01")  # the dump at getpgrp, thread 1 (the main thread, where the calls are)
    if len(files) != 1:
        sys.exit(f"bench_launch_instructions: no callgrind dump of the loop for {case} in {out}")
    return parse(files[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--valgrind", default="valgrind")
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as td:
        for case in args.cases:
            # once without valgrind first: the measured run finds warm caches (Triton's, xpukit's)
            warm = [sys.executable, str(Path(__file__).resolve()), "--child", case, "1"]
            subprocess.run(warm, check=True, capture_output=True)
            total, runtime = measure(case, args.calls, args.valgrind, Path(td))
            rows[case] = {
                "instructions_per_call": round(total / args.calls),
                "in_runtime_launch_calls": round(runtime / args.calls),
            }
            print(f"{case}: {rows[case]}", file=sys.stderr)
    loop = rows.get("none", {}).get("instructions_per_call", 0)
    ratios = {}
    for a, b in PAIRS:
        if a in rows and b in rows:
            ia, ib = rows[a]["instructions_per_call"], rows[b]["instructions_per_call"]
            ratios[f"{a}/{b}"] = {"ratio": round(ia / ib, 3), "ratio_without_loop": round((ia - loop) / (ib - loop), 3)}
    result = {
        "command": " ".join(["python", *sys.argv]),
        "calls": args.calls,
        "cases": rows,
        "ratios": ratios,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
