"""Intel's SYCL arrays (dpnp, dpctl) in Triton kernels on a session over SYCL's own context and queue
(``ur.Session.from_sycl``, ``from_native``), on the real CPU OpenCL device: arrays, views, DLPack
both ways, another context's memory refused, an out-of-order queue kept safe, handles released.

Runs where dpnp is installed (the dpnp image variant, ``invoke build --with dpnp``, sets
XPUKIT_REQUIRE_DPNP=1 so a missing dpnp fails there instead of skipping).
"""

from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

pytestmark = pytest.mark.container

ROOT = Path(__file__).resolve().parents[2]

from tests.support.dpnp_warm import warm_dpnp  # noqa: E402
from tests.support.runtime_required import dpnp_or_skip  # noqa: E402

dpctl, dpnp = dpnp_or_skip()

from xpukit.runtime import ur  # noqa: E402
from xpukit.runtime.triton import activate, from_numpy  # noqa: E402
from xpukit.runtime.ur.interop import sycl as sycl_interop  # noqa: E402
from xpukit.runtime.ur.interop.arrays import KDL_ONEAPI  # noqa: E402


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)


@triton.jit
def strided_copy(x, out, rows, cols, sx0, sx1, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    m = c < cols
    tl.store(out + r * cols + c, tl.load(x + r * sx0 + c * sx1, mask=m), mask=m)


def grid(n: int, block: int = 256) -> tuple[int]:
    return (triton.cdiv(n, block),)


@pytest.fixture
def ooo_queue():
    q = dpctl.SyclQueue()  # dpctl's default queue kind: out-of-order
    assert not q.is_in_order
    return q


def _cl_refcount(kind: str, handle: int) -> int:
    ocl = ctypes.CDLL(sycl_interop.loaded_library("libOpenCL.so"))
    fn, prop = {"context": ("clGetContextInfo", 0x1080), "queue": ("clGetCommandQueueInfo", 0x1092)}[kind]
    value = ctypes.c_uint32()
    assert getattr(ocl, fn)(ctypes.c_void_p(handle), prop, 4, ctypes.byref(value), None) == 0
    return value.value


def test_dpnp_arrays_on_the_sessions_in_order_queue(ooo_queue):
    """dpnp -> kernel -> kernel -> dpnp on the session's in-order SYCL queue, exact; each array's
    allocation lent to the session's table while the array lives (checked once), and back out of
    it when the array is collected."""
    with ur.Session.from_sycl(ooo_queue) as s, activate(s):
        assert s.sycl_queue.is_in_order and s.sycl_queue.sycl_context == ooo_queue.sycl_context
        n = 3001
        x = dpnp.arange(n, dtype=dpnp.float32, sycl_queue=s.sycl_queue)
        y = dpnp.full(n, 0.5, dtype=dpnp.float32, sycl_queue=s.sycl_queue)
        out = dpnp.empty(n, dtype=dpnp.float32, sycl_queue=s.sycl_queue)
        add[grid(n)](x, y, out, n, BLOCK=256)
        add[grid(n)](out, y, out, n, BLOCK=256)  # the fast-table path on the second call
        assert s.foreign.launches == 2 and len(s.foreign.lent) == 3 and len(s.allocations) == 3
        assert len(s.foreign.held) == 3  # one check per array object, not per launch
        result = dpnp.asnumpy(out * 2)  # a dpnp op after the kernel, on the same queue
        assert len(s.foreign.inflight) == 2  # the launches' producers, held until they are known to have run
        s.finish()
        assert not s.foreign.inflight
        del x, y, out
        gc.collect()
        assert not s.foreign.held and not s.foreign.lent and len(s.allocations) == 0
    np.testing.assert_array_equal(result, (np.arange(n, dtype=np.float32) + 1.0) * 2)


def test_dpnp_matmul_around_a_kernel(ooo_queue):
    """oneMKL's gemm runs as a SYCL host task on the CPU device, which the native queue never sees:
    without the kit's ordering the kernel read unfinished scores and gemm read unfinished weights."""
    rng = np.random.default_rng(1)
    a_h, b_h = rng.standard_normal((200, 32), dtype=np.float32), rng.standard_normal((32, 150), dtype=np.float32)
    with ur.Session.from_sycl(ooo_queue) as s, activate(s):
        for _ in range(3):
            a, b = dpnp.asarray(a_h, sycl_queue=s.sycl_queue), dpnp.asarray(b_h, sycl_queue=s.sycl_queue)
            prod = a @ b
            twice = dpnp.empty_like(prod)
            add[grid(prod.size)](prod, prod, twice, prod.size, BLOCK=256)
            back = twice @ b.T
            np.testing.assert_allclose(dpnp.asnumpy(back), (2 * (a_h @ b_h)) @ b_h.T, rtol=1e-4, atol=1e-3)


def test_arrays_of_another_queue_are_ordered_and_exact(ooo_queue):
    with ur.Session.from_sycl(ooo_queue) as s, activate(s):
        n = 1 << 16
        x = dpnp.arange(n, dtype=dpnp.float32, sycl_queue=ooo_queue)
        out = dpnp.empty_like(x)
        add[grid(n)](x, x, out, n, BLOCK=256)
        assert s.foreign.launches == 1 and len(s.foreign.inflight) == 1  # x, out held until it ran
        np.testing.assert_array_equal(dpnp.asnumpy(out + 1), np.arange(n, dtype=np.float32) * 2 + 1)


def test_views_with_offsets_and_negative_strides(ooo_queue):
    with ur.Session.from_sycl(ooo_queue) as s, activate(s):
        q = s.sycl_queue
        base = np.arange(60, dtype=np.float64).reshape(6, 10)
        x = dpnp.asarray(base, sycl_queue=q)
        for view, host in ((x[2:, 3:], base[2:, 3:]), (x[::-1, ::2], base[::-1, ::2]), (x[1:5, ::-3], base[1:5, ::-3])):
            rows, cols = view.shape
            out = dpnp.empty((rows, cols), dtype=dpnp.float64, sycl_queue=q)
            sx0, sx1 = (st // 8 for st in view.strides)
            strided_copy[(rows,)](view, out, rows, cols, sx0, sx1, BLOCK=16)
            np.testing.assert_array_equal(dpnp.asnumpy(out), host)
        flat = dpnp.arange(100, dtype=dpnp.int32, sycl_queue=q)
        out = dpnp.zeros(90, dtype=dpnp.int32, sycl_queue=q)
        add[grid(90)](flat[10:], flat[:90], out, 90, BLOCK=256)  # byte offsets on int32
        np.testing.assert_array_equal(dpnp.asnumpy(out), np.arange(10, 100) + np.arange(90))


def test_a_view_reaching_outside_its_allocation_is_refused(ooo_queue):
    class Lying:  # claims more elements than its memory holds
        def __init__(self, arr):
            self.arr = arr

        @property
        def __sycl_usm_array_interface__(self):
            iface = dict(self.arr.__sycl_usm_array_interface__)
            iface["shape"] = (self.arr.shape[0] * 4,)
            return iface

    with ur.Session.from_sycl(ooo_queue) as s, activate(s):
        x = dpnp.ones(64, dtype=dpnp.float32, sycl_queue=s.sycl_queue)
        with pytest.raises(ur.KernelArgumentError, match="overrun its allocation"):
            add[grid(256)](Lying(x), x, x, 256, BLOCK=256)
        assert not s.foreign.lent


def test_dlpack_both_ways_without_copies(ooo_queue):
    """The kit's DeviceArray into dpnp (same memory), dpnp's DLPack into a kernel through a producer
    that speaks only DLPack, and an allocation closed while dpnp holds it freed only when dpnp lets go."""

    class DLPackOnly:
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, **kw):
            return self.arr.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()

    with ur.Session.from_sycl(ooo_queue) as s, activate(s):
        host = np.arange(1000, dtype=np.float32)
        a = from_numpy(host, session=s)
        assert a.__dlpack_device__() == (KDL_ONEAPI, s.sycl_queue.sycl_device.get_device_id())
        d = dpnp.from_dlpack(a, device=s.sycl_queue)
        assert d.__sycl_usm_array_interface__["data"][0] == a.ptr  # no copy
        d *= 3  # dpnp writes the kit's memory
        out = dpnp.empty(1000, dtype=dpnp.float32, sycl_queue=s.sycl_queue)
        add[grid(1000)](DLPackOnly(d), a, out, 1000, BLOCK=256)
        np.testing.assert_array_equal(dpnp.asnumpy(out), host * 6)
        a.close()  # dpnp still holds the memory: the free waits for it
        assert s.usm.deferred == 1
        np.testing.assert_array_equal(dpnp.asnumpy(d), host * 3)
        s.finish()  # the kit let go of the launch's producers (d among them) once it has run
        del d
        gc.collect()
        assert s.usm.deferred == 0 and a.alloc.exports == 0


def test_a_plain_sessions_memory_does_not_export_and_dlpack_of_host_memory_is_refused(session):
    a = session.alloc(64)
    with pytest.raises(BufferError, match="session over a SYCL context"):
        a.__dlpack__()
    with activate(session), pytest.raises(ur.KernelArgumentError, match="not kDLOneAPI"):
        add[(1,)](_HostDLPack(), a, a, 4, BLOCK=256)
    a.close()


class _HostDLPack:
    def __dlpack__(self, **kw):
        return np.arange(4, dtype=np.float32).__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


def test_memory_of_another_context_is_refused(ooo_queue):
    """A pointer of another SYCL context is a KernelArgumentError (on this CPU runtime it would even
    'work', USM being host memory: outside the USM rules, so never allowed)."""
    other = dpctl.SyclQueue(dpctl.SyclContext([ooo_queue.sycl_device]), ooo_queue.sycl_device)  # a new context
    assert other.sycl_context != ooo_queue.sycl_context
    x = dpnp.ones(16, dtype=dpnp.float32, sycl_queue=other)
    with ur.Session.from_sycl(ooo_queue) as s, activate(s):
        with pytest.raises(ur.KernelArgumentError, match=r"not USM memory of this session's context.*from_sycl"):
            add[(1,)](x, x, x, 16, BLOCK=256)
        assert not s.foreign.lent
    with (
        ur.Session("cpu") as plain,
        activate(plain),
        pytest.raises(ur.KernelArgumentError, match="not USM memory of this session's context"),
    ):
        add[(1,)](x, x, x, 16, BLOCK=256)


def test_from_native_opencl_handles_and_their_release(ooo_queue):
    in_order = dpctl.SyclQueue(ooo_queue.sycl_context, ooo_queue.sycl_device, property="in_order")
    h = sycl_interop.sycl_native_handles(in_order)  # retained once each (OpenCL's get_native)
    ctx_refs, q_refs = _cl_refcount("context", h.context), _cl_refcount("queue", h.queue)
    s = ur.Session.from_native("opencl", h.context, h.device, h.queue, owned=True)
    assert s.device.backend == "opencl" and s.device.type == "cpu"
    with activate(s):
        x = dpnp.arange(100, dtype=dpnp.float32, sycl_queue=in_order)
        out = dpnp.empty_like(x)
        add[(1,)](x, x, out, 100, BLOCK=128)
        np.testing.assert_array_equal(dpnp.asnumpy(out), np.arange(100, dtype=np.float32) * 2)
    s.close()
    assert _cl_refcount("context", h.context) == ctx_refs - 1 and _cl_refcount("queue", h.queue) == q_refs - 1


def test_an_out_of_order_native_queue_is_refused_and_its_references_given_back(ooo_queue):
    h = sycl_interop.sycl_native_handles(ooo_queue)
    ctx_refs = _cl_refcount("context", h.context)
    with pytest.raises(ur.BadDeviceRequest, match="out-of-order"):
        ur.Session.from_native("opencl", h.context, h.device, h.queue, owned=True)
    assert _cl_refcount("context", h.context) == ctx_refs - 1


def test_foreign_launches_from_threads(ooo_queue):
    warm_dpnp(ooo_queue)
    with ur.Session.from_sycl(ooo_queue) as s:

        def work(i: int) -> bool:
            with activate(s):
                x = dpnp.full(4096, float(i), dtype=dpnp.float32, sycl_queue=ooo_queue)
                out = dpnp.empty_like(x)
                for _ in range(5):
                    add[grid(4096)](x, x, out, 4096, BLOCK=256)
                return bool((dpnp.asnumpy(out) == 2.0 * i).all())

        with ThreadPoolExecutor(4) as pool:
            assert all(pool.map(work, range(8)))
        s.finish()  # the launches have run: their producers are let go
        gc.collect()
        assert not s.foreign.lent and not s.foreign.held and not s.foreign.inflight


def test_an_out_of_order_queue_never_races_the_kit():
    """dpnp on an out-of-order queue -> a Triton kernel -> dpnp, temporaries dropped at once, in
    separate processes (a crash is a failure here, not a dead pytest). Without the kit's ordering the
    same probe gave wrong results on this device: ``--unordered`` in 3 of 5 runs of 12 iterations,
    ``--no-after-barrier`` (no SYCL barrier after the launch) in 5 of 6; the spike saw 5 segfaults and
    4 wrong results in 13."""
    probe = ROOT / "tests" / "support" / "dpnp_order_probe.py"
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")

    def run(on: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(probe), "--iterations", "16", "--on", on], capture_output=True,
                              text=True, env=env, timeout=600)  # fmt: skip

    ons = ["other", "session", "other", "session"]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(run, ons))
    for on, r in zip(ons, results, strict=True):
        wrong = (on, r.returncode, r.stdout, r.stderr[-2000:])
        assert r.returncode == 0 and r.stdout.strip().startswith("exact 16"), wrong
        # every launch ordered by the adapter; "session": the kept arrays checked once and held after
        assert "16 launches ordered" in r.stdout, (on, r.stdout)
        if on == "session":
            assert "2 arrays held" in r.stdout, r.stdout
