"""One process of the out-of-order probe (tests/image/test_dpnp.py): dpnp operations on an
out-of-order SYCL queue handing arrays to a Triton kernel and back, temporaries dropped at once.
Prints "exact <iterations>" or exits non-zero naming the first wrong result; a crash is the signal.

Orderings (``--on``, ``--before``, ``--after``), the kit's by default:
  --on session       the dpnp arrays on the session's own in-order SYCL queue, not another queue
  --finish           every launch finished before it returns (the kit's earlier fence) instead of
                     handed back to SYCL
  --no-after-barrier a control: no SYCL barrier after the launch (the producers still held)
  --unordered        a control: no queue waited for before the launch and no barrier after it
                     (producers kept), as a session without the kit's ordering would launch; on the
                     CPU device that races (wrong results, segfaults), which shows the probe can see
                     the race the kit prevents
The controls are never the tests' expectations.
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
    parser.add_argument("--no-after-barrier", action="store_true")
    parser.add_argument("--finish", action="store_true")
    parser.add_argument("--on", choices=("other", "session"), default="other")
    args = parser.parse_args()

    import dpctl
    import dpnp

    from xpukit.runtime import ur
    from xpukit.runtime.triton import activate
    from xpukit.runtime.ur.interop.state import ForeignState

    if args.unordered:
        ForeignState.before = lambda self, queues: None  # type: ignore[method-assign]

    queue = dpctl.SyclQueue()  # dpctl's default: out-of-order
    assert not queue.is_in_order, "the probe needs an out-of-order queue"
    n = args.n
    with ur.Session.from_sycl(queue) as s, activate(s):
        s.foreign.handoff = not args.finish
        s.foreign.after_barrier = not (args.unordered or args.no_after_barrier)
        if args.on == "session":
            queue = s.sycl_queue
            # arrays kept across iterations: checked and lent on the first launch, held leases after it
            x_kept = dpnp.empty(n, dtype=dpnp.float32, sycl_queue=queue)
            y_kept = dpnp.empty(n, dtype=dpnp.float32, sycl_queue=queue)
        for it in range(args.iterations):
            x = dpnp.full(n, float(it), dtype=dpnp.float32, sycl_queue=queue)
            if args.on == "session":
                dpnp.multiply(x, 2.0, out=x_kept)  # a second dpnp kernel the launch must follow
                x, y = x_kept, y_kept
            else:
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
        held = len(s.foreign.held)
    print(f"exact {args.iterations} ({s.foreign.launches} launches ordered, {held} arrays held)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
