"""Repeated kernel[grid] launches on dpnp arrays: each call's foreign arrays are resolved by the
session's adapter (``ForeignState.run``: the held lease of an array seen before, the producers'
queues waited for, the kit's own launch of typed pointers, a SYCL barrier after), and the compiled
dispatch and launcher see the kit's memory only. Checked here on the real CPU OpenCL device: results
are exact for 1-3 dimensional grids, every scalar kind and a kernel with local memory, SYCL host
tasks (oneMKL's gemm) on either side, the kit's memory beside dpnp arrays, arrays dropped while
their launch is queued, held leases following arrays swapped, dropped and replaced across sessions,
and threads.

Runs where dpnp is installed (the dpnp image variant sets XPUKIT_REQUIRE_DPNP=1).
"""

from __future__ import annotations

import gc
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

pytestmark = pytest.mark.container

from tests.support.dpnp_warm import warm_dpnp  # noqa: E402
from tests.support.kernels import row_sum  # noqa: E402
from tests.support.kernels import vector_add as add  # noqa: E402
from tests.support.runtime_required import dpnp_or_skip  # noqa: E402

dpctl, dpnp = dpnp_or_skip()

from xpukit.runtime import ur  # noqa: E402
from xpukit.runtime.triton import activate, from_numpy  # noqa: E402


@triton.jit
def program_ids(out, nx, ny, BLOCK: tl.constexpr):
    """out[z, y, x*BLOCK + j] = x + 1000 y + 1000000 z: which program wrote where."""
    px, py, pz = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    j = tl.arange(0, BLOCK)
    where = out + (pz * ny + py) * nx * BLOCK + px * BLOCK + j
    tl.store(where, tl.zeros([BLOCK], tl.int32) + px + 1000 * py + 1000000 * pz)


@triton.jit
def scalars(x, out, n, a_f32, b_i64, c_f64, d_i32, e_bool, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    v = tl.load(x + i, mask=m).to(tl.float64) * a_f32 + b_i64 + c_f64 + d_i32
    tl.store(out + i, tl.where(e_bool, v, -v), mask=m)


def _session() -> ur.Session:
    return ur.Session.from_sycl(dpctl.SyclQueue())


def test_held_arrays_on_the_sessions_queue_are_launched_in_order():
    """The first launch checks and leases the arrays; the next ones reuse the held leases, exact and
    in order; the launches' producers are held until the session knows they have run."""
    n = 5000
    with _session() as s, activate(s):
        q = s.sycl_queue
        x = dpnp.arange(n, dtype=dpnp.float32, sycl_queue=q)
        out = dpnp.zeros(n, dtype=dpnp.float32, sycl_queue=q)
        for _ in range(10):
            add[(triton.cdiv(n, 256),)](x, out, out, n, BLOCK=256)  # out += x, ten times, in order
        assert s.foreign.launches == 10 and len(s.foreign.held) == 2  # x and out, checked once each
        assert 1 <= len(s.foreign.inflight) <= 10
        result = dpnp.asnumpy(out)
        s.finish()
        assert not s.foreign.inflight
    np.testing.assert_array_equal(result, np.arange(n, dtype=np.float32) * 10)


@pytest.mark.parametrize("grid", [(3,), (3, 2), (2, 3, 4), (1, 1, 3)])
def test_grids_of_one_to_three_dimensions(grid):
    """Every program of a 1-3 dimensional grid writes where its ids say, on a repeated launch too."""
    block = 64
    nx, ny, nz = (*grid, 1, 1)[:3]
    want = np.zeros((nz, ny, nx * block), dtype=np.int32)
    for z in range(nz):
        for y in range(ny):
            for x in range(nx):
                want[z, y, x * block : (x + 1) * block] = x + 1000 * y + 1000000 * z
    with _session() as s, activate(s):
        out = dpnp.full(want.size, -1, dtype=dpnp.int32, sycl_queue=s.sycl_queue)
        program_ids[grid](out, nx, ny, BLOCK=block)  # out checked and leased
        out.fill(-1)
        program_ids[grid](out, nx, ny, BLOCK=block)  # its held lease
        assert s.foreign.launches == 2
        np.testing.assert_array_equal(dpnp.asnumpy(out).reshape(want.shape), want)


def test_every_scalar_kind_reaches_the_kernel_exactly():
    """float (Triton's fp32), 64- and 32-bit ints, a bool, in two sets of values."""
    n = 300
    h = np.linspace(-3, 3, n).astype(np.float32)
    with _session() as s, activate(s):
        x = dpnp.asarray(h, sycl_queue=s.sycl_queue)
        out = dpnp.empty(n, dtype=dpnp.float64, sycl_queue=s.sycl_queue)
        results = []
        for a, b, c, d, e in [(1.5, 2**40 + 3, 0.25, -7, True), (-0.5, -(2**35), 0.125, 2**30, False)]:
            for _ in range(2):  # the arrays leased, then held
                scalars[(triton.cdiv(n, 128),)](x, out, n, a, b, c, d, e, BLOCK=128)
                results.append(dpnp.asnumpy(out))
            v = h.astype(np.float64) * np.float32(a) + b + c + d
            for r in results[-2:]:
                np.testing.assert_array_equal(r, v if e else -v)
        assert s.foreign.launches == 4


def test_a_kernel_with_local_memory():
    """A row reduction across the work-group takes a local-memory argument (a hidden argument)."""
    rows, cols = 37, 1000
    h = np.random.default_rng(3).standard_normal((rows, cols)).astype(np.float32)
    with _session() as s, activate(s):
        x = dpnp.asarray(h, sycl_queue=s.sycl_queue)
        out = dpnp.zeros(rows, dtype=dpnp.float32, sycl_queue=s.sycl_queue)
        k = row_sum[(rows,)](x, out, cols, BLOCK=1024, num_warps=4)
        assert k.metadata.shared > 0, "the kernel must use local memory for this test to mean anything"
        out.fill(0)
        row_sum[(rows,)](x, out, cols, BLOCK=1024, num_warps=4)
        assert s.foreign.launches == 2
        np.testing.assert_allclose(dpnp.asnumpy(out), h.sum(axis=1), rtol=1e-5, atol=1e-4)


def test_host_tasks_on_either_side():
    """oneMKL's gemm runs as a SYCL host task on the CPU device, which the native queue never sees:
    the kit's launch follows the gemm that feeds it and precedes the gemm that reads it, every time."""
    rng = np.random.default_rng(1)
    a_h, b_h = rng.standard_normal((256, 64), dtype=np.float32), rng.standard_normal((64, 192), dtype=np.float32)
    with _session() as s, activate(s):
        q = s.sycl_queue
        a, b = dpnp.asarray(a_h, sycl_queue=q), dpnp.asarray(b_h, sycl_queue=q)
        prod = dpnp.empty((256, 192), dtype=dpnp.float32, sycl_queue=q)
        twice = dpnp.empty_like(prod)
        for it in range(6):
            dpnp.matmul(a * float(it + 1), b, out=prod)
            add[(triton.cdiv(prod.size, 256),)](prod, prod, twice, prod.size, BLOCK=256)
            back = twice @ b.T
            want = (2 * ((a_h * np.float32(it + 1)) @ b_h)) @ b_h.T
            np.testing.assert_allclose(dpnp.asnumpy(back), want, rtol=1e-4, atol=2e-2)
        assert s.foreign.launches == 6


def test_dpnp_arrays_by_keyword():
    """A foreign array passed by keyword is resolved like a positional one (Triton's own launch
    takes keywords), its lease held after the first call."""
    n = 1000
    h = np.arange(n, dtype=np.float32)
    with _session() as s, activate(s):
        q = s.sycl_queue
        x, y = dpnp.asarray(h, sycl_queue=q), dpnp.asarray(2 * h, sycl_queue=q)
        out = dpnp.zeros(n, dtype=dpnp.float32, sycl_queue=q)
        for _ in range(2):
            add[(triton.cdiv(n, 256),)](x, y_ptr=y, out_ptr=out, n=n, BLOCK=256)
            np.testing.assert_array_equal(dpnp.asnumpy(out), 3 * h)
        assert s.foreign.launches == 2 and len(s.foreign.held) == 3


def test_the_kits_own_memory_beside_dpnp_arrays():
    """A launch mixing dpnp arrays and the kit's own memory is ordered like any foreign launch (the
    gemm's host task waited for, a barrier after), and a later launch on the kit's memory alone,
    straight to UR, follows it."""
    rng = np.random.default_rng(2)
    a_h, b_h = rng.standard_normal((128, 32), dtype=np.float32), rng.standard_normal((32, 96), dtype=np.float32)
    y_h = rng.standard_normal(128 * 96, dtype=np.float32)
    with _session() as s, activate(s):
        q = s.sycl_queue
        a, b = dpnp.asarray(a_h, sycl_queue=q), dpnp.asarray(b_h, sycl_queue=q)
        prod = dpnp.empty((128, 96), dtype=dpnp.float32, sycl_queue=q)
        y, mixed, own = from_numpy(y_h), from_numpy(np.zeros_like(y_h)), from_numpy(np.zeros_like(y_h))
        size = y_h.size
        for it in range(4):
            dpnp.matmul(a * float(it + 1), b, out=prod)  # a host task
            add[(triton.cdiv(size, 256),)](prod, y, mixed, size, BLOCK=256)  # dpnp beside the kit's memory
            add[(triton.cdiv(size, 256),)](mixed, mixed, own, size, BLOCK=256)  # the kit's memory alone: UR
            want = 2 * (((a_h * np.float32(it + 1)) @ b_h).ravel() + y_h)
            np.testing.assert_allclose(own.to_numpy(), want, rtol=1e-5, atol=1e-3)
        assert s.foreign.launches == 4


def test_arrays_dropped_while_their_launch_is_queued():
    """The launch's producers are held until it has run (their memory must outlive it): an array
    dropped right after its launch lives on in the session's in-flight list until the session knows
    the launch ran, and the results are exact."""
    n = 1 << 18
    with _session() as s, activate(s):
        q = s.sycl_queue
        outs, dropped, held = [], [], 0
        for i in range(40):
            x = dpnp.full(n, float(i), dtype=dpnp.float32, sycl_queue=q)
            out = dpnp.empty(n, dtype=dpnp.float32, sycl_queue=q)
            add[(n // 1024,)](x, x, out, n, BLOCK=1024)  # new arrays: checked and leased
            add[(n // 1024,)](x, out, out, n, BLOCK=1024)  # held leases: out = 3 i
            dropped.append(weakref.ref(x.get_array()))
            del x
            gc.collect()
            if s.foreign.inflight:  # cleared only all at once (settle, every 32nd): this launch's producers are in it
                assert dropped[-1]() is not None, i
                held += 1
            outs.append(out)
        assert s.foreign.launches == 80
        assert held >= 30  # settle runs at every 32nd held launch only
        s.finish()
        gc.collect()
        assert all(r() is None for r in dropped)  # let go once the session knows they ran
        for i, out in enumerate(outs):
            assert (dpnp.asnumpy(out) == 3.0 * i).all(), i


def test_held_leases_follow_the_arrays():
    """A launch finds each array's held lease by the array object (its id, confirmed by a weak
    reference): arrays swapped between positions, dropped and replaced (the new one may take the old
    one's id), a dpnp array whose usm_ndarray is replaced, three sessions alternating on one kernel
    (one of them on the same queue and arrays), and a session opened over the same queue after the
    first closed: every launch writes where its arguments say."""
    n = 4096
    grid = (n // 256,)
    with _session() as s, activate(s):
        q = s.sycl_queue
        a = dpnp.full(n, 1.0, dtype=dpnp.float32, sycl_queue=q)
        b = dpnp.full(n, 10.0, dtype=dpnp.float32, sycl_queue=q)
        out1 = dpnp.zeros(n, dtype=dpnp.float32, sycl_queue=q)
        out2 = dpnp.zeros(n, dtype=dpnp.float32, sycl_queue=q)
        add[grid](a, b, out1, n, BLOCK=256)  # a, b, out1 leased
        assert len(s.foreign.held) == 3
        for i in range(3):
            out1.fill(0)
            out2.fill(0)
            add[grid](a, b, out1, n, BLOCK=256)  # held leases
            add[grid](a, a, out2, n, BLOCK=256)  # other arrays in two places (out2 leased on its first launch)
            assert (dpnp.asnumpy(out1) == 11.0).all() and (dpnp.asnumpy(out2) == 2.0).all(), i
        assert len(s.foreign.held) == 4

        for i in range(6):  # a dropped array's id may come back with a new array: never its pointer
            s.finish()  # its launches known to have run: nothing holds it any more
            gone = weakref.ref(a.get_array())
            del a
            gc.collect()
            assert gone() is None, i
            a = dpnp.full(n, float(i), dtype=dpnp.float32, sycl_queue=q)
            add[grid](a, b, out1, n, BLOCK=256)  # a new array: checked and leased
            add[grid](a, b, out1, n, BLOCK=256)  # its held lease
            assert (dpnp.asnumpy(out1) == 10.0 + i).all(), i

        c = dpnp.full(n, 100.0, dtype=dpnp.float32, sycl_queue=q)
        a._array_obj = c.get_array()  # reach-in: the dpnp array now wraps another usm_ndarray
        add[grid](a, b, out1, n, BLOCK=256)
        add[grid](a, b, out1, n, BLOCK=256)
        assert (dpnp.asnumpy(out1) == 110.0).all()

        # other sessions on the same kernel, alternating, each call compiled apart (a hit is recorded per
        # call signature: BLOCK differs): t on another queue, u on s's queue and arrays, leased for u itself
        with _session() as t, ur.Session.from_sycl(q) as u:
            x = dpnp.full(n, 5.0, dtype=dpnp.float32, sycl_queue=t.sycl_queue)
            y = dpnp.zeros(n, dtype=dpnp.float32, sycl_queue=t.sycl_queue)
            for _ in range(3):
                with activate(t):
                    add[(n // 128,)](x, x, y, n, BLOCK=128)
                with activate(u):
                    add[(n // 64,)](a, a, out2, n, BLOCK=64)
                add[grid](a, b, out1, n, BLOCK=256)
            assert (dpnp.asnumpy(y) == 10.0).all() and (dpnp.asnumpy(out2) == 200.0).all()
            assert (t.foreign.launches, len(t.foreign.held)) == (3, 2)
            assert (u.foreign.launches, len(u.foreign.held)) == (3, 2)
        assert (dpnp.asnumpy(out1) == 110.0).all()
    assert not s.foreign.held and not s.foreign.lent

    out1.fill(0)
    with ur.Session.from_sycl(q) as s2, activate(s2):  # a new session over the same queue: leased again
        add[grid](a, b, out1, n, BLOCK=256)
        add[grid](a, b, out1, n, BLOCK=256)
        assert s2.foreign.launches == 2 and len(s2.foreign.held) == 3
        assert (dpnp.asnumpy(out1) == 110.0).all()


def test_repeated_launches_from_threads():
    with _session() as s:
        warm_dpnp(s.sycl_queue)  # dpnp's own first use, not from four threads at once

        def work(i: int) -> bool:
            with activate(s):
                x = dpnp.full(4096, float(i), dtype=dpnp.float32, sycl_queue=s.sycl_queue)
                out = dpnp.zeros_like(x)
                for _ in range(6):
                    add[(16,)](x, out, out, 4096, BLOCK=256)
                return bool((dpnp.asnumpy(out) == 6.0 * i).all())

        with ThreadPoolExecutor(4) as pool:
            assert all(pool.map(work, range(8)))
        assert s.foreign.launches == 48
        s.finish()
        gc.collect()
        assert not s.foreign.inflight and not s.foreign.held and not s.foreign.lent
