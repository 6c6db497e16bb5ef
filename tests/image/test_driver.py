"""Triton's own ``kernel[grid](...)`` through xpukit's UR driver on the CPU device.

Every kernel is compiled by Triton's JIT for the session's device, loaded through UR (CPU SPIR-V
patch, program cache in tmp_path), launched by the driver's launcher and compared with numpy.
Compiles are counted with Triton's own ``JITFunction.compiled_hook`` and the driver's
``stats.variants`` (one per ``load_binary``), never guessed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.support import ROOT
from tests.support.driver import RNG
from tests.support.kernels import fresh, k_loop_sum, matmul_small, scale_raw, scale_typed
from tests.support.runtime_required import skip_unless_in_image, ur_session_or_skip

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from triton.runtime.driver import driver as triton_driver  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

from xpukit.runtime.triton import (  # noqa: E402
    DeviceArray,
    NoActiveSession,
    URDriver,
    activate,
    empty,
    from_numpy,
)
from xpukit.runtime.ur.errors import KernelArgumentError  # noqa: E402

pytestmark = pytest.mark.container


@pytest.fixture
def act(session, drv):
    with activate(session, driver=drv) as d:
        yield d


# --- kernels (fresh for this module, so compile counts are this module's own) -----------------

scale_addr = fresh(scale_raw)  # 64-bit addresses the kernel casts to pointers (the blog's style)
scale_ptr = fresh(scale_typed)
loop_k = fresh(k_loop_sum)
matmul = fresh(matmul_small)


@triton.jit
def spec_probe(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


@triton.jit
def add2d(x_ptr, y_ptr, out_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    idx = rows[:, None] * stride + cols[None, :]
    tl.store(out_ptr + idx, tl.load(x_ptr + idx, mask=mask) * 2.0 + tl.load(y_ptr + idx, mask=mask), mask=mask)


@triton.jit
def row_max_sum(x_ptr, max_ptr, sum_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf"))
    tl.store(max_ptr + row, tl.max(x, axis=0))
    tl.store(sum_ptr + row, tl.sum(tl.where(cols < N, x, 0.0), axis=0))


@triton.jit
def convert(h_ptr, i_ptr, f_ptr, d_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    h = tl.load(h_ptr + offs, mask=mask).to(tl.float32)  # fp16 -> fp32
    i = tl.load(i_ptr + offs, mask=mask).to(tl.float32)  # int32 -> fp32
    tl.store(f_ptr + offs, h + i, mask=mask)
    tl.store(d_ptr + offs, (h * 3.0).to(tl.float64), mask=mask)  # fp32 -> fp64


@triton.jit
def int_ops(x_ptr, out_ptr, n, k, flag, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = (x * k) ^ (x >> 3)
    if flag:
        y = y + 1
    tl.store(out_ptr + offs, y, mask=mask)


@triton.jit
def big_index(x_addr, out_addr, base, n, BLOCK: tl.constexpr):
    # A 64-bit scalar beyond int32 (base) and address arithmetic in int64.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    src = x_addr.to(tl.pointer_type(tl.int64))
    dst = out_addr.to(tl.pointer_type(tl.int64))
    tl.store(dst + offs, tl.load(src + offs, mask=mask) + base, mask=mask)


# --- correctness ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 1000, 1024, 4097])
@pytest.mark.parametrize("style", ["int address", "USM allocation", "DeviceArray"])
def test_scale_blog_style(act, session, n, style):
    x = RNG.standard_normal(n, dtype=np.float32)
    guard = 8
    with session.from_numpy(x) as dx, session.from_numpy(np.full(n + guard, 7, np.float32)) as dy:
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
        if style == "int address":
            scale_addr[grid](dx.ptr, dy.ptr, 2.5, n, BLOCK=1024)
        elif style == "USM allocation":
            scale_addr[grid](dx, dy, np.float32(2.5), n, BLOCK=1024)
        else:
            scale_ptr[grid](DeviceArray(dx, np.float32), DeviceArray(dy, np.float32), 2.5, n, BLOCK=1024)
        session.synchronize()
        got = dy.to_numpy(np.float32)
    np.testing.assert_array_equal(got[:n], x * np.float32(2.5))
    np.testing.assert_array_equal(got[n:], 7)  # the mask kept the guard intact


def test_2d_grid_with_strides(act, session):
    M, N = 70, 130
    x, y = RNG.standard_normal((M, N), dtype=np.float32), RNG.standard_normal((M, N), dtype=np.float32)
    with from_numpy(x) as dx, from_numpy(y) as dy, empty((M, N), np.float32) as out:
        add2d[(triton.cdiv(M, 16), triton.cdiv(N, 32))](dx, dy, out, M, N, N, BM=16, BN=32)
        session.synchronize()
        np.testing.assert_array_equal(out.to_numpy(), x * 2 + y)


def test_reductions_take_the_local_memory_argument(act, session):
    R, N = 33, 300
    x = RNG.standard_normal((R, N), dtype=np.float32)
    with from_numpy(x) as dx, empty(R, np.float32) as mx, empty(R, np.float32) as sm:
        compiled = row_max_sum[(R,)](dx, mx, sm, N, BLOCK=512)
        session.synchronize()
        assert compiled.metadata.shared > 0  # so the launcher had to add urKernelSetArgLocal
        np.testing.assert_array_equal(mx.to_numpy(), x.max(axis=1))
        np.testing.assert_allclose(sm.to_numpy(), x.sum(axis=1), rtol=1e-5, atol=1e-4)


def test_loop(act, session):
    R, K = 9, 1000
    x = RNG.standard_normal((R, K), dtype=np.float32)
    with from_numpy(x) as dx, empty(R, np.float32) as out:
        loop_k[(R,)](dx, out, K, BK=128)
        session.synchronize()
        np.testing.assert_allclose(out.to_numpy(), x.sum(axis=1), rtol=1e-5, atol=1e-4)


def test_dot_compiled_for_the_device(act, session):
    M, N, K = 48, 40, 70
    a, b = RNG.standard_normal((M, K), dtype=np.float32), RNG.standard_normal((K, N), dtype=np.float32)
    with from_numpy(a) as da, from_numpy(b) as db, empty((M, N), np.float32) as c:
        compiled = matmul[(triton.cdiv(M, 16), triton.cdiv(N, 16))](da, db, c, M, N, K, BM=16, BN=16, BK=16)
        session.synchronize()
        # The driver's target is the CPU device's: no DPAS (matrix engine) properties.
        assert compiled.metadata.target.arch["has_subgroup_matrix_multiply_accumulate"] is False
        np.testing.assert_allclose(c.to_numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_conversions(act, session):
    n = 3000
    h = RNG.standard_normal(n).astype(np.float16)
    i = RNG.integers(-1000, 1000, n, dtype=np.int32)
    with from_numpy(h) as dh, from_numpy(i) as di, empty(n, np.float32) as f, empty(n, np.float64) as d:
        convert[(triton.cdiv(n, 256),)](dh, di, f, d, n, BLOCK=256)
        session.synchronize()
        np.testing.assert_array_equal(f.to_numpy(), h.astype(np.float32) + i.astype(np.float32))
        np.testing.assert_array_equal(d.to_numpy(), (h.astype(np.float32) * np.float32(3)).astype(np.float64))


@pytest.mark.parametrize("flag", [True, False])
def test_int_scalars_and_bool(act, session, flag):
    n = 777
    x = RNG.integers(-(2**20), 2**20, n, dtype=np.int32)
    with from_numpy(x) as dx, empty(n, np.int32) as out:
        int_ops[(triton.cdiv(n, 128),)](dx, out, n, -7, flag, BLOCK=128)
        session.synchronize()
        want = (x * np.int32(-7)) ^ (x >> 3)
        np.testing.assert_array_equal(out.to_numpy(), want + 1 if flag else want)


def test_int64_scalar_beyond_int32(act, session):
    n = 100
    x = np.arange(n, dtype=np.int64)
    base = 3 * 2**40
    with session.from_numpy(x) as dx, session.alloc(x.nbytes) as out:
        big_index[(1,)](dx.ptr, out.ptr, base, n, BLOCK=128)
        session.synchronize()
        np.testing.assert_array_equal(out.to_numpy(np.int64), x + base)


def test_compiled_kernel_reused_on_a_second_session(drv):
    """A variant compiled on one session runs on the next (the program is loaded per session)."""
    n = 512
    x = RNG.standard_normal(n, dtype=np.float32)
    for _ in range(2):
        with ur_session_or_skip() as s, activate(s, driver=drv):
            before = drv.stats.variants
            with s.from_numpy(x) as dx, s.alloc(x.nbytes) as dy:
                scale_addr[(1,)](dx.ptr, dy.ptr, -1.0, n, BLOCK=512)
                s.synchronize()
                np.testing.assert_array_equal(dy.to_numpy(np.float32), -x)
            assert drv.stats.variants - before <= 1


# --- specialization and compile counting --------------------------------------------------------


class CompileCounter:
    """Triton's JITFunction.compiled_hook: called once after each real (cache-missing) compile."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def __call__(self, *args, **kwargs) -> bool:
        self.keys.append(kwargs["key"])
        return False

    def __enter__(self) -> CompileCounter:
        self._saved = JITFunction.compiled_hook
        JITFunction.compiled_hook = self
        return self

    def __exit__(self, *exc) -> None:
        JITFunction.compiled_hook = self._saved


def test_specialization_compiles_new_variants_only_when_needed(act, session, drv):
    with session.alloc(4 * 4096) as dx, session.alloc(4 * 4096) as dy, CompileCounter() as cc:
        dx.copy_from(np.zeros(4096, np.float32))
        v0 = drv.stats.variants

        x, y = DeviceArray(dx, np.float32), DeviceArray(dy, np.float32)

        def call(n: int, block: int) -> None:
            spec_probe[(triton.cdiv(n, block),)](x, y, n, BLOCK=block)

        call(1024, 256)  # n % 16 == 0: Triton specializes n as divisible by 16
        assert len(cc.keys) == 1 and drv.stats.variants == v0 + 1
        for _ in range(5):
            call(1024, 256)
        call(2048, 256)  # still divisible by 16: same variant
        assert len(cc.keys) == 1 and drv.stats.variants == v0 + 1
        call(1000, 256)  # not divisible by 16: new variant
        assert len(cc.keys) == 2 and drv.stats.variants == v0 + 2
        call(1000, 512)  # a new constexpr: new variant
        assert len(cc.keys) == 3 and drv.stats.variants == v0 + 3
        call(1001, 512)
        call(4096, 256)
        assert len(cc.keys) == 3 and drv.stats.variants == v0 + 3
        call(1, 256)  # n == 1 is a constexpr in Triton's specialization: new variant
        assert len(cc.keys) == 4
        # Triton's own per-device cache holds exactly those variants for this driver's device.
        assert len(spec_probe.device_caches[drv.get_current_device()][0]) == 4
        session.synchronize()
        got = dy.to_numpy(np.float32)
        np.testing.assert_array_equal(got[:4096], 1.0)


# --- errors --------------------------------------------------------------------------------------


def test_no_active_session_is_a_clear_error(session):
    drv = URDriver(cache=False)
    triton_driver.set_active(drv)
    try:
        with session.alloc(4096) as d, pytest.raises(NoActiveSession, match="no xpukit session is active") as ei:
            scale_addr[(1,)](d.ptr, d.ptr, 1.0, 1024, BLOCK=1024)
        assert "activate(s)" in ei.value.fix
        assert drv.stats.launches == 0 and drv.stats.variants == 0
    finally:
        triton_driver.reset_active()


def test_closed_session_inside_activate(drv):
    s = ur_session_or_skip()
    with activate(s, driver=drv):
        addr = s.alloc(4096).ptr
        s.close()
        with pytest.raises(NoActiveSession, match="closed"):
            scale_addr[(1,)](addr, addr, 1.0, 1024, BLOCK=1024)


@pytest.mark.parametrize(
    "bad, match",
    [
        ("abc", "a str cannot be a Triton kernel argument"),
        ([1, 2], "a list cannot be a Triton kernel argument"),
        (object(), "a object cannot be a Triton kernel argument"),
    ],
)
def test_wrong_kind_of_argument(act, session, drv, bad, match):
    with session.from_numpy(np.ones(64, np.float32)) as d:
        launches = drv.stats.launches
        with pytest.raises(KernelArgumentError, match=match):
            scale_addr[(1,)](bad, d.ptr, 1.0, 64, BLOCK=64)
        assert drv.stats.launches == launches


def test_host_numpy_array_is_refused_before_anything_is_enqueued(act, session, drv):
    host = np.arange(64, dtype=np.float32)
    with session.from_numpy(np.full(64, 5, np.float32)) as out:
        launches = drv.stats.launches
        with pytest.raises(KernelArgumentError, match="host numpy array") as ei:
            scale_ptr[(1,)](host, DeviceArray(out, np.float32), 1.0, 64, BLOCK=64)
        assert "from_numpy" in ei.value.fix
        with pytest.raises(KernelArgumentError, match="host numpy array"):
            scale_addr[(1,)](host, out.ptr, 1.0, 64, BLOCK=64)
        session.synchronize()
        assert drv.stats.launches == launches
        np.testing.assert_array_equal(out.to_numpy(np.float32), 5)


def test_closed_allocation_is_refused(act, session, drv):
    d = session.alloc(256)
    d.close()
    with pytest.raises(KernelArgumentError, match="freed"):
        scale_addr[(1,)](d, d, 1.0, 64, BLOCK=64)


def test_dtype_triton_has_no_type_for(act, session, drv):
    launches = drv.stats.launches
    with session.alloc(1024) as d, pytest.raises(KernelArgumentError, match="a DeviceArray cannot be"):
        scale_ptr[(1,)](DeviceArray(d, np.complex64), DeviceArray(d, np.float32), 1.0, 64, BLOCK=64)
    assert drv.stats.launches == launches


# --- scope ---------------------------------------------------------------------------------------


def test_activation_is_scoped(session, drv):
    import triton.runtime.jit as jit

    original_spec, original_run = jit.specialize_impl, jit.JITFunction.run
    before = triton_driver.active
    assert "__getitem__" not in jit.JITFunction.__dict__  # Triton's is KernelInterface's
    with activate(session, driver=drv) as d:
        assert triton_driver.active is d
        assert jit.specialize_impl is not original_spec and jit.JITFunction.run is not original_run
        assert "__getitem__" in jit.JITFunction.__dict__
        inner = ur_session_or_skip()
        with activate(inner, driver=drv):
            assert drv.session is inner
        inner.close()
        assert triton_driver.active is d and drv.session is session
    assert triton_driver.active is before
    assert jit.specialize_impl is original_spec and jit.JITFunction.run is original_run
    assert "__getitem__" not in jit.JITFunction.__dict__
    with pytest.raises(NoActiveSession):
        drv.get_current_device()


def test_driver_path_never_imports_torch(tmp_path):
    """In a fresh process: activate, compile, launch, synchronize; torch must not be imported."""
    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        import triton, triton.language as tl
        from xpukit.runtime import ur
        from xpukit.runtime.triton import activate

        @triton.jit
        def k(a, b, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            src = a.to(tl.pointer_type(tl.float32))
            dst = b.to(tl.pointer_type(tl.float32))
            tl.store(dst + offs, tl.load(src + offs, mask=offs < n) + 1, mask=offs < n)

        with ur.Session("cpu") as s, activate(s):
            x = s.from_numpy(np.arange(100, dtype=np.float32))
            y = s.alloc(400)
            k[(1,)](x.ptr, y.ptr, 100, BLOCK=128)
            s.synchronize()
            assert (y.to_numpy(np.float32) == np.arange(100) + 1).all()
        bad = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
        print("TORCH", bad)
        """
    )
    env = dict(
        os.environ,
        XPUKIT_CACHE_DIR=str(tmp_path / "x"),
        TRITON_CACHE_DIR=os.environ.get("TRITON_CACHE_DIR", str(tmp_path / "t")),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=str(ROOT),
    )
    script = tmp_path / "no_torch.py"  # a file: Triton reads the kernel's source back
    script.write_text(code)
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600, check=False)
    if "DeviceNotFound" in p.stderr or "LoaderNotFound" in p.stderr:
        skip_unless_in_image("no UR CPU device here")
    assert p.returncode == 0, p.stderr
    assert "TORCH []" in p.stdout


def test_identical_launch_reenqueues_and_changed_arguments_are_set(act, session, drv):
    """An identical call re-enqueues with the arguments the UR kernel holds; any change is set."""
    n = 2048
    x = RNG.standard_normal(n, dtype=np.float32)
    with session.from_numpy(x) as dx, session.alloc(x.nbytes) as d1, session.alloc(x.nbytes) as d2:
        for scale, out in ((2.0, d1), (2.0, d1), (3.0, d1), (3.0, d2), (3, d2)):
            launches = drv.stats.launches
            scale_addr[(2,)](dx.ptr, out.ptr, scale, n, BLOCK=1024)
            session.synchronize()
            assert drv.stats.launches == launches + 1
            np.testing.assert_array_equal(out.to_numpy(np.float32), x * np.float32(scale))


def test_session_synchronize_waits_for_every_queue_it_owns(session, drv):
    """synchronize(): urDeviceWaitExp where the release exports it and the adapter has it (the CPU
    OpenCL adapter of 2026.x answers UNSUPPORTED_FEATURE), else every queue the session owns."""
    n = 1 << 16
    x = RNG.standard_normal(n, dtype=np.float32)
    q2 = session.new_queue()
    with activate(session, driver=drv), session.from_numpy(x) as dx, session.alloc(x.nbytes) as dy:
        drv.active().stream = type(drv.active().stream)(session, q2)  # launch on the second queue
        scale_addr[(triton.cdiv(n, 1024),)](dx.ptr, dy.ptr, 4.0, n, BLOCK=1024)
        session.synchronize()  # must cover q2, not only session.queue
        got = np.empty(n, np.float32)
        q2.memcpy(got.ctypes.data, dy.ptr, x.nbytes)
        np.testing.assert_array_equal(got, x * 4)
    q2.close()
    session.synchronize()  # a closed queue is skipped


def test_a_zebin_reaches_the_driver_only_for_a_gpu(session, drv):
    """A real pvc zebin (Triton SPIR-V through the installed ocloc) handed to the driver on the CPU
    device is refused with a clear error before any program is created."""
    from xpukit.runtime.offline.ocloc import find_ocloc
    from xpukit.runtime.triton import ZebinNeedsGpu
    from xpukit.runtime.triton.tritonc import compile_kernel

    ck = compile_kernel(
        scale_addr, {"in_addr": "i64", "out_addr": "i64", "scale": "fp32", "n": "i32"}, {"BLOCK": 1024}, "pvc"
    )
    zebin = find_ocloc().compile_spirv(ck.asm["spv"], "pvc").zebin
    assert zebin[:4] == b"\x7fELF"
    with activate(session, driver=drv) as d:
        loads = d.stats.program_loads
        with pytest.raises(ZebinNeedsGpu, match="cannot run"):
            d.load_binary(scale_addr.__name__, zebin, 0, "", d.get_current_device())
        assert d.stats.program_loads == loads
