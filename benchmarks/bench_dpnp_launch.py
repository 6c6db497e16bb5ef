#!/usr/bin/env python3
"""kernel[grid] on dpnp arrays against the same launch on the kit's own arrays, one process, one session.

The session is opened over dpnp's SYCL context (``ur.Session.from_sycl``); the kernel adds two
float32 vectors (3 pointers, n). Cases, in interleaved rounds (the queue drained between rounds,
outside the timing), per-call medians:
  own          kernel[grid](x, y, out, n) with the kit's DeviceArrays: the C dispatch, enqueue only
  own_finish   the same, then the session queue's finish (enqueue + completion)
  dpnp         kernel[grid](x, y, out, n) with dpnp arrays on the session's SYCL queue: the Python
               door (each pointer checked through urUSMGetMemAllocInfo and lent to the session), its
               fences (the SYCL queue waited for before, the launch finished after)
  dpnp_checks  a diagnostic, never a mode of the kit: the dpnp case with its fences switched off
               (no queue waited for, the launch not finished): what the checks and the Python door
               cost by themselves
Ratios (median of per-round ratios): dpnp / own (the issue's "enqueue" ratio; dpnp's time also
holds the kernel's completion), dpnp / own_finish (both including completion), dpnp_checks / own.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_dpnp_launch.py [--rounds 7] [--reps 300] [--n 1024] [--json F]

Needs dpnp (the dpnp image: invoke build --with dpnp).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)


def per_call(fn, reps: int) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) / reps * 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--reps", type=int, default=300)
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--json", type=Path)
    args = p.parse_args()

    import dpctl
    import dpnp

    from xpukit.runtime import ur
    from xpukit.runtime.triton import activate, from_numpy
    from xpukit.runtime.ur import foreign
    from xpukit.runtime.ur.objects import Queue

    def unfenced(launch):
        borrow, finish = foreign.ForeignState.borrow, Queue.finish

        def no_waits(self, obj):
            lease = borrow(self, obj)
            lease.waits = ()
            return lease

        foreign.ForeignState.borrow, Queue.finish = no_waits, lambda self: None
        try:
            launch()
        finally:
            foreign.ForeignState.borrow, Queue.finish = borrow, finish

    n, block = args.n, 1024
    grid = (triton.cdiv(n, block),)
    host = np.arange(n, dtype=np.float32)
    with ur.Session.from_sycl(dpctl.SyclQueue()) as s, activate(s):
        q = s.sycl_queue
        kx, ky, kout = from_numpy(host), from_numpy(host), from_numpy(host)
        dx, dy, dout = (dpnp.asarray(host, sycl_queue=q) for _ in range(3))
        cases = {
            "own": lambda: add[grid](kx, ky, kout, n, BLOCK=block),
            "own_finish": lambda: (add[grid](kx, ky, kout, n, BLOCK=block), s.queue.finish()),
            "dpnp": lambda: add[grid](dx, dy, dout, n, BLOCK=block),
            "dpnp_checks": lambda: unfenced(lambda: add[grid](dx, dy, dout, n, BLOCK=block)),
        }
        for fn in cases.values():  # compile, record, warm
            for _ in range(20):
                fn()
        s.finish()
        np.testing.assert_array_equal(kout.to_numpy(), host * 2)
        np.testing.assert_array_equal(dpnp.asnumpy(dout), host * 2)
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.rounds):
            for name, fn in cases.items():
                times[name].append(per_call(fn, args.reps))
                s.finish()
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = statistics.median(d / o for d, o in zip(times["dpnp"], times["own"], strict=True))
    ratio_finish = statistics.median(d / o for d, o in zip(times["dpnp"], times["own_finish"], strict=True))
    print(f"device: {s.device.name} [{s.device.type}, {s.device.backend}], n={n}, {args.rounds} rounds x {args.reps}")
    for k, v in med.items():
        print(f"  {k:<11} {v:8.1f} us/call (fastest round {min(times[k]):.1f})")
    print(f"  dpnp / own        {ratio:.2f}x")
    print(f"  dpnp / own_finish {ratio_finish:.2f}x")
    checks = statistics.median(d / o for d, o in zip(times["dpnp_checks"], times["own"], strict=True))
    print(f"  dpnp_checks / own {checks:.2f}x")
    if args.json:
        result = {"median_us": med, "rounds_us": times, "n": n, "dpnp_over_own": ratio}
        result.update(dpnp_over_own_finish=ratio_finish, checks_over_own=checks)
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
