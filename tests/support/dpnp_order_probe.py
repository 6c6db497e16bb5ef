"""One process of the out-of-order probe (tests/image/test_dpnp.py): dpnp operations on an
out-of-order SYCL queue handing arrays to a Triton kernel and back, temporaries dropped at once.
Prints "exact <iterations>" or exits non-zero naming the first wrong result; a crash is the signal.

``--unordered`` (a control, never used by the tests' assertions): no queue is waited for and the
launch is not finished, as a session without the kit's ordering would launch; on the CPU device
that races (wrong results, segfaults), which shows the probe can see the race the kit prevents.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import triton
import triton.language as tl


@triton.jit
def axpb(x, y, n, a, b, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    v = tl.load(x + i, mask=m)
    for _ in range(4):  # enough work per element that a racing reader sees it unfinished
        v = tl.sqrt(v * v + 1.0) - 1.0 + v * 0.0
    tl.store(y + i, tl.load(x + i, mask=m) * a + b + v * 0.0, mask=m)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--n", type=int, default=1 << 21)
    parser.add_argument("--unordered", action="store_true")
    args = parser.parse_args()

    import dpctl
    import dpnp

    from xpukit.runtime import ur
    from xpukit.runtime.triton import activate
    from xpukit.runtime.ur import foreign

    if args.unordered:
        from xpukit.runtime.ur.objects import Queue

        borrow = foreign.ForeignState.borrow

        kept = []  # producers kept to the end: freeing USM blocks until its users finish, a hidden fence

        def unfenced(self, obj):  # the control: no waits at either handoff
            lease = borrow(self, obj)
            lease.waits = ()
            kept.append(obj)
            return lease

        foreign.ForeignState.borrow = unfenced
        Queue.finish = lambda self: None  # only the launch's fence calls it before the end

    queue = dpctl.SyclQueue()  # dpctl's default: out-of-order
    assert not queue.is_in_order, "the probe needs an out-of-order queue"
    n = args.n
    with ur.Session.from_sycl(queue) as s, activate(s):
        for it in range(args.iterations):
            x = dpnp.full(n, float(it), dtype=dpnp.float32, sycl_queue=queue)
            x = x * 2.0  # a second dpnp kernel the launch must follow
            y = dpnp.empty(n, dtype=dpnp.float32, sycl_queue=queue)
            axpb[(triton.cdiv(n, 1024),)](x, y, n, 3.0, 1.0, BLOCK=1024)
            del x  # the producer goes at once: the kit must hold it while the kernel runs
            z = y - 1.0  # dpnp reads what the kernel wrote
            got = dpnp.asnumpy(z)
            want = np.float32(6.0 * it)
            if not (got == want).all():
                bad = int(np.argmax(got != want))
                print(f"wrong at iteration {it}: z[{bad}] = {got[bad]}, want {want}", flush=True)
                return 3
    print(f"exact {args.iterations}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
