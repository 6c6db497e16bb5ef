#!/usr/bin/env python3
"""kernel[grid] on dpnp arrays against the same launch on the kit's own arrays, one process, one session.

The session is opened over dpnp's SYCL context (``ur.Session.from_sycl``); the kernel adds two
float32 vectors (3 pointers, n). Cases, in interleaved rounds (the queue drained between rounds,
outside the timing), per-call medians:
  own          kernel[grid](x, y, out, n) with the kit's DeviceArrays: the C dispatch, enqueue only
  own_finish   the same, then the session queue's finish (enqueue + completion)
  dpnp         kernel[grid](x, y, out, n) with dpnp arrays on the session's SYCL queue: the kit's
               foreign launch (each array checked and lent on its first launch, in the warm-up;
               every measured call resolved by the session's adapter, ForeignState.run: held
               leases, the queues asked whether they are empty, the kit's own launch of typed
               pointers, a SYCL barrier after; docs/ur.md)
Ratio (median of per-round ratios): dpnp / own, the issue's "enqueue" ratio.

``--instructions``: instructions per call on the launching thread (callgrind, deterministic on a
shared machine): each case in a child process under ``valgrind --tool=callgrind
--separate-threads=yes``, ``--calls`` launches after a warm-up, each followed by a clFinish on the
session's native queue called straight from ctypes (excluded: the drain, not the launch; a
urQueueFinish or SYCL wait inside the launch counts). ``--kit DIR`` imports xpukit from another
checkout (before/after in one run: ``--kit /path/to/main --kit .``). ``XPUKIT_BENCH_KEEP=DIR`` copies
the callgrind dumps there (for callgrind_annotate).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_dpnp_launch.py [--rounds 7] [--reps 300] [--n 1024] [--json F]
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_dpnp_launch.py --instructions [--calls 500] [--kit DIR ...]

Needs dpnp (the dpnp image: invoke build --with dpnp); --instructions needs valgrind.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import gc
import glob
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.common import callgrind_calls, per_call_us  # noqa: E402  (this checkout's, whatever --kit runs)

KIT = os.environ.get("XPUKIT_BENCH_KIT")  # --kit: the checkout whose xpukit the child imports
sys.path.insert(0, KIT or str(REPO))

import numpy as np  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

CASES = ("none", "own", "dpnp")


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)


def setup(n: int) -> tuple[Any, ...]:
    """The session over dpnp's default queue, the kit's and dpnp's arrays, the launches."""
    import dpctl
    import dpnp

    from xpukit.runtime import ur
    from xpukit.runtime.triton import activate, from_numpy

    block = 1024
    grid = (triton.cdiv(n, block),)
    host = np.arange(n, dtype=np.float32)
    s = ur.Session.from_sycl(dpctl.SyclQueue())
    act = activate(s)
    act.__enter__()
    q = s.sycl_queue
    kx, ky, kout = from_numpy(host), from_numpy(host), from_numpy(host)
    dx, dy, dout = (dpnp.asarray(host, sycl_queue=q) for _ in range(3))
    cases = {
        "none": lambda: None,
        "own": lambda: add[grid](kx, ky, kout, n, BLOCK=block),
        "own_finish": lambda: (add[grid](kx, ky, kout, n, BLOCK=block), s.queue.finish()),
        "dpnp": lambda: add[grid](dx, dy, dout, n, BLOCK=block),
    }
    for fn in cases.values():  # compile, record, warm
        for _ in range(20):
            fn()
    s.finish()
    q.wait()
    np.testing.assert_array_equal(kout.to_numpy(), host * 2)
    np.testing.assert_array_equal(dpnp.asnumpy(dout), host * 2)
    return s, act, cases


def child(case: str, calls: int, n: int) -> None:
    """The process callgrind measures: ``calls`` launches of ``case``, each then drained by a
    clFinish called from ctypes (the parse leaves those out)."""
    import ctypes

    from xpukit.runtime.ur.interop import sycl as sycl_interop

    s, act, cases = setup(n)
    f = cases[case]
    ocl = ctypes.CDLL(sycl_interop.loaded_library("libOpenCL.so"))
    native = ctypes.c_void_p(sycl_interop.sycl_native_handles(s.sycl_queue).queue)  # retained once: the process ends
    drain = ocl.clFinish
    for _ in range(50):
        f()
        drain(native)
    s.sycl_queue.wait()
    gc.collect()  # a collection due from the set-up must not fall into the window
    os.getppid()  # callgrind zeroes its counters here (--zero-before=getppid)
    for _ in range(calls):
        f()
        drain(native)
    os.getpgrp()  # and dumps them here (--dump-before=getpgrp): the loop alone
    s.sycl_queue.wait()
    act.__exit__(None, None, None)
    s.close()


def parse(path: str) -> int:
    """Instructions of one callgrind dump without the loop's drains: clFinish called from ctypes
    (not from UR's urQueueFinish), inclusive. A urQueueFinish in the launch (a fence) counts."""
    total, calls = callgrind_calls(path)
    drained = sum(cost for fn, cfn, cost in calls if cfn == "clFinish" and "urQueueFinish" not in fn)
    if not drained:
        sys.exit(f"bench_dpnp_launch: no drain (clFinish outside urQueueFinish) found in {path}")
    return total - drained


def instructions(args: argparse.Namespace) -> dict[str, Any]:
    kits = [str(Path(k).resolve()) for k in (args.kit or [str(REPO)])]
    rows: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as td:
        for kit in kits:
            env = {**os.environ, "PYTHONHASHSEED": "0", "XPUKIT_BENCH_KIT": kit}
            rows[kit] = {}
            for case in CASES:
                me = [sys.executable, str(Path(__file__).resolve()), "--n", str(args.n), "--child", case]
                subprocess.run([*me, "1"], check=True, capture_output=True, env=env)  # warm Triton's caches
                base = f"{td}/cg.{len(rows)}.{case}"
                cmd = [args.valgrind, "--tool=callgrind", "--separate-threads=yes", "--zero-before=getppid"]
                cmd += ["--dump-before=getpgrp", f"--callgrind-out-file={base}.%p", *me, str(args.calls)]
                r = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if os.environ.get("XPUKIT_BENCH_KEEP"):
                    subprocess.run(["sh", "-c", f"cp {base}.* {os.environ['XPUKIT_BENCH_KEEP']}/"])
                files = glob.glob(f"{base}.*.1-01")  # the dump at getpgrp, thread 1 (the launching thread)
                if r.returncode or len(files) != 1:
                    sys.exit(f"bench_dpnp_launch: {case} under callgrind failed: {r.stderr.strip().splitlines()[-3:]}")
                rows[kit][case] = round(parse(files[0]) / args.calls)
            own, dpnp, loop = rows[kit]["own"], rows[kit]["dpnp"], rows[kit]["none"]
            rows[kit]["dpnp_over_own"] = round(dpnp / own, 3)  # type: ignore[assignment]
            rows[kit]["dpnp_over_own_without_loop"] = round((dpnp - loop) / (own - loop), 3)  # type: ignore[assignment]
            print(f"{kit}: {rows[kit]}", flush=True)
    return {"instructions_per_call": rows, "calls": args.calls, "n": args.n}


def times(args: argparse.Namespace) -> dict[str, Any]:
    s, act, cases = setup(args.n)
    del cases["none"]
    rounds: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.rounds):
        for name, fn in cases.items():
            rounds[name].append(per_call_us(fn, args.reps))
            s.finish()
            s.sycl_queue.wait()
    med = {k: statistics.median(v) for k, v in rounds.items()}
    ratio = statistics.median(d / o for d, o in zip(rounds["dpnp"], rounds["own"], strict=True))
    ratio_finish = statistics.median(d / o for d, o in zip(rounds["dpnp"], rounds["own_finish"], strict=True))
    print(f"device: {s.device.name} [{s.device.type}, {s.device.backend}], n={args.n}, "
          f"{args.rounds} rounds x {args.reps}, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    for k, v in med.items():
        print(f"  {k:<11} {v:8.1f} us/call (fastest round {min(rounds[k]):.1f})")
    print(f"  dpnp / own        {ratio:.2f}x")
    print(f"  dpnp / own_finish {ratio_finish:.2f}x")
    act.__exit__(None, None, None)
    s.close()
    return {"median_us": med, "rounds_us": rounds, "n": args.n, "dpnp_over_own": ratio,
            "dpnp_over_own_finish": ratio_finish, "load": os.getloadavg()[0]}  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--reps", type=int, default=300)
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--instructions", action="store_true", help="callgrind instructions per call instead of times")
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--kit", action="append", help="an xpukit checkout to measure (repeatable; default: this one)")
    p.add_argument("--valgrind", default="valgrind")
    p.add_argument("--json", type=Path)
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.n)
        return 0
    result = instructions(args) if args.instructions else times(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
