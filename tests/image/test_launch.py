"""Triton -> UR launches on the CPU device: exact results, argument errors, the program cache."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from tests.support.launch import BLOCK, TYPED_SIG

pytest.importorskip("triton")

import triton
import triton.language as tl

from tests.support.kernels import scale_raw, scale_typed
from tests.support.runtime_required import ur_session_or_skip
from xpukit.runtime import ur
from xpukit.runtime.triton.launch import BoundKernel, ProgramCache, TritonKernel

pytestmark = pytest.mark.container

RAW_SIG = "in_addr:i64,out_addr:i64,scale:fp32,n:i32"


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    cache = ProgramCache(tmp_path_factory.mktemp("programs"))
    return {
        "raw": TritonKernel(scale_raw, RAW_SIG, {"BLOCK": BLOCK}, cache=cache),
        "typed": TritonKernel(scale_typed, TYPED_SIG, {"BLOCK": BLOCK}, cache=cache),
    }


@pytest.mark.sharing_smoke
@pytest.mark.parametrize("style", ["raw", "typed"])
@pytest.mark.parametrize("n", [1, 1023, 1024, 1025, 1 << 20])
def test_scale_exact(session, kernels, style, n):
    x = np.random.default_rng(n).standard_normal(n, dtype=np.float32)
    scale = np.float32(-3.25)
    guard = 16  # elements past n that the kernel must not touch
    with session.from_numpy(x) as dx, session.alloc(4 * (n + guard)) as dy:
        dy.copy_from(np.full(n + guard, 7.0, np.float32))
        a, b = (dx.ptr, dy.ptr) if style == "raw" else (dx, dy)
        kernels[style][(-(-n // BLOCK),)](a, b, scale, n, session=session)
        session.queue.finish()
        got = dy.to_numpy(np.float32, n + guard)
    np.testing.assert_array_equal(got[:n], x * scale)
    np.testing.assert_array_equal(got[n:], np.float32(7.0))


def test_grid_callable_and_nd_range(session, kernels):
    bound = kernels["typed"].bind(session)
    assert bound.abi.local_size == (bound.abi.num_warps * bound.abi.threads_per_warp, 1, 1)
    assert bound.abi.nd_range((3, 2)) == ((3 * bound.abi.local_size[0], 2, 1), bound.abi.local_size)
    n = 3000
    x = np.arange(n, dtype=np.float32)
    with session.from_numpy(x) as dx, session.empty(n, np.float32) as dy:
        bound[lambda meta: (-(-meta["n"] // meta["BLOCK"]),)](dx, dy, 2.0, n)
        session.finish()
        np.testing.assert_array_equal(dy.to_numpy(np.float32, n), x * 2)


@pytest.mark.parametrize("grid", [(0,), (4, 0), (4, 1, 0)])
def test_zero_grid_launches_nothing(session, kernels, grid):
    """A grid with an empty axis enqueues nothing: no event, and the output stays as it was even
    though n asks for work; the same call over one program does enqueue and write."""
    n = 64
    x = np.ones(n, np.float32)
    bound = kernels["typed"].bind(session)
    with session.from_numpy(x) as dx, session.from_numpy(np.full(n, 7.0, np.float32)) as dy:
        assert bound.launch(grid, dx, dy, 2.0, n, event=True) is None
        kernels["typed"][grid](dx, dy, 2.0, n, session=session)
        session.finish()
        np.testing.assert_array_equal(dy.to_numpy(np.float32, n), np.float32(7.0))
        with bound.launch((1,), dx, dy, 2.0, n, event=True) as ev:
            ev.wait()
        np.testing.assert_array_equal(dy.to_numpy(np.float32, n), np.float32(2.0))


# --- argument errors: raised before anything is enqueued -------------------------------------


def test_wrong_argument_count(session, kernels):
    with session.alloc(64) as buf, pytest.raises(ur.KernelArgumentError, match="takes 4 argument"):
        kernels["typed"][(1,)](buf, buf, 1.0, session=session)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("not a pointer", None, 1.0, 4), "'x_ptr'.*must be a device pointer"),
        ((None, None, "2.0", 4), "'scale'.*must be a number"),
        ((None, None, 2.0, 4.5), "'n'.*must be an integer"),
        ((None, None, 2.0, 2**31), "'n'.*2147483648 does not fit i32"),
        ((-1, None, 2.0, 4), "'x_ptr'"),
    ],
)
def test_wrong_argument_type(session, kernels, args, match):
    with session.alloc(64) as buf:
        args = tuple(buf if a is None else a for a in args)
        with pytest.raises(ur.KernelArgumentError, match=match):
            kernels["typed"][(1,)](*args, session=session)


def test_bad_argument_leaves_previous_arguments_untouched(session, kernels):
    """A rejected launch must not have set any argument: the next good launch still runs right."""
    n = 100
    x = np.ones(n, np.float32)
    bound = kernels["typed"].bind(session)
    with session.from_numpy(x) as dx, session.empty(n, np.float32) as dy:
        bound[(1,)](dx, dy, 5.0, n)
        with pytest.raises(ur.KernelArgumentError):
            bound[(1,)](dx, dy, "bad", n)
        bound[(1,)](dx, dy, 5.0, n)
        session.finish()
        np.testing.assert_array_equal(dy.to_numpy(np.float32, n), x * 5)


def test_numpy_scalars_accepted(session, kernels):
    n = 10
    x = np.arange(n, dtype=np.float32)
    with session.from_numpy(x) as dx, session.empty(n, np.float32) as dy:
        kernels["raw"][(1,)](np.int64(dx.ptr), np.uint64(dy.ptr), np.float64(0.5), np.int32(n), session=session)
        session.finish()
        np.testing.assert_array_equal(dy.to_numpy(np.float32, n), x * np.float32(0.5))


def test_raw_address_kernel_accepts_usm_allocations(session, kernels):
    n = 10
    x = np.arange(n, dtype=np.float32)
    with session.from_numpy(x) as dx, session.empty(n, np.float32) as dy:
        kernels["raw"][(1,)](dx, dy, 3.0, n, session=session)  # i64 params: the allocation's address
        session.finish()
        np.testing.assert_array_equal(dy.to_numpy(np.float32, n), x * 3)


def test_use_after_close_of_bound_kernel(tmp_path):
    s = ur_session_or_skip()
    k = TritonKernel(scale_typed, TYPED_SIG, {"BLOCK": BLOCK}, cache=ProgramCache(tmp_path))
    bound = k.bind(s)
    buf = s.alloc(64)
    bound.close()
    bound.close()  # twice is fine
    with pytest.raises(ur.ClosedError):
        bound[(1,)](buf, buf, 1.0, 1)
    s.close()
    with pytest.raises(ur.ClosedError):
        k.bind(s)
    with pytest.raises(ur.ClosedError):
        buf.ptr  # noqa: B018 - the property itself raises


# --- program cache -----------------------------------------------------------------------------


def _fresh(tmp_path):
    return TritonKernel(scale_typed, TYPED_SIG, {"BLOCK": BLOCK}, cache=ProgramCache(tmp_path))


def _check_runs(session, bound):
    n = 50
    x = np.arange(n, dtype=np.float32)
    with session.from_numpy(x) as dx, session.empty(n, np.float32) as dy:
        bound[(1,)](dx, dy, 2.0, n)
        session.finish()
        np.testing.assert_array_equal(dy.to_numpy(np.float32, n), x * 2)


def test_program_cache_miss_then_hit(session, tmp_path):
    k1 = _fresh(tmp_path)
    b1 = k1.bind(session)
    assert [e for e, _ in k1.cache.events] == ["miss", "store"]
    k2 = _fresh(tmp_path)
    b2 = k2.bind(session)
    assert [e for e, _ in k2.cache.events] == ["hit"]
    assert b2.program.source_kind == "binary"
    _check_runs(session, b2)
    b1.close()
    b2.close()


@pytest.mark.parametrize("damage", ["flip-binary", "truncate-binary", "bad-json", "other-driver", "garbage-same-hash"])
def test_program_cache_corrupt_entry_is_rebuilt(session, tmp_path, damage, caplog):
    _fresh(tmp_path).bind(session).close()
    bins = list(tmp_path.glob("*.bin"))
    metas = list(tmp_path.glob("*.json"))
    assert len(bins) == 1 and len(metas) == 1
    data = bins[0].read_bytes()
    meta = json.loads(metas[0].read_text())
    if damage == "flip-binary":
        bins[0].write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    elif damage == "truncate-binary":
        bins[0].write_bytes(data[: len(data) // 2])
    elif damage == "bad-json":
        metas[0].write_text("{not json")
    elif damage == "other-driver":
        meta["device"] = meta["device"] + "-older-driver"
        metas[0].write_text(json.dumps(meta))
    else:  # a garbage binary whose checksum matches: only the device can reject it
        import hashlib

        junk = b"\x7fELF" + b"\0" * 64
        bins[0].write_bytes(junk)
        meta.update(size=len(junk), sha256=hashlib.sha256(junk).hexdigest())
        metas[0].write_text(json.dumps(meta))
    k = _fresh(tmp_path)
    bound = k.bind(session)
    events = [e for e, _ in k.cache.events]
    assert events == ["corrupt", "store"], events
    assert "program cache entry" in caplog.text
    assert bound.program.source_kind == "il"
    _check_runs(session, bound)
    bound.close()
    # The rewritten entry is good again.
    k3 = _fresh(tmp_path)
    k3.bind(session).close()
    assert [e for e, _ in k3.cache.events] == ["hit"]


def test_program_cache_read_raises_named_error(session, tmp_path):
    k = _fresh(tmp_path)
    bound = k.bind(session)
    key = k.cache.events[0][1]
    (tmp_path / f"{key}.bin").write_bytes(b"corrupt")
    with pytest.raises(ur.ProgramCacheCorrupt, match="checksum"):
        k.cache.read(key, session.device, bound.artifact.spirv_sha256)
    bound.close()


def test_program_cache_unwritable_dir_still_runs(session, tmp_path):
    """A cache folder that cannot be created falls back to a private temporary one (tests/image/test_readonly.py)."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    k = TritonKernel(scale_typed, TYPED_SIG, {"BLOCK": BLOCK}, cache=ProgramCache(blocker / "sub"))
    bound = k.bind(session)
    assert [e for e, _ in k.cache.events][-1] in ("store", "hit")
    assert blocker.read_text() == "x"
    _check_runs(session, bound)
    bound.close()


def test_arguments_rebound_after_memory_is_freed_and_reused(session, tmp_path):
    """Free and allocate again on every launch, so new allocations land on freed addresses.
    Intel's CPU runtime binds a pointer argument to its allocation when it is set: skipping an
    "unchanged" address after a free gave wrong sums at the second launch and, later, heap
    corruption. 300 launches of a reduction (local-memory argument) must all be exact."""
    from tests.support.kernels import row_sum

    rows, n = 7, 300
    x = np.random.default_rng(3).standard_normal((rows, n), dtype=np.float32)
    want = x.sum(axis=1)
    bound = TritonKernel(row_sum, "x_ptr:*fp32,out_ptr:*fp32,N:i32", {"BLOCK": 512}, cache=_fresh(tmp_path)).bind(
        session
    )
    reused = 0
    seen: set[int] = set()
    for i in range(300):
        # Closed in creation order, so the next round's first allocation takes the freed addresses.
        dx, out, spare = session.from_numpy(x), session.alloc(rows * 4), session.alloc(rows * 4)
        reused += dx.ptr in seen or out.ptr in seen
        seen.update((dx.ptr, out.ptr))
        bound[(rows,)](dx, out, n)
        session.queue.finish()
        got = out.to_numpy(np.float32)
        for a in (dx, out, spare):
            a.close()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4, err_msg=f"launch {i}")
    assert reused > 0  # the allocator did hand freed addresses back: the case under test happened
    bound.close()


@triton.jit
def copy_with_scratch(x_ptr, y_ptr, n, global_scratch, profile_scratch, WRITE: tl.constexpr, BLOCK: tl.constexpr):
    """A user kernel followed by the two scratch pointers the xpu profile's Triton line appends
    (global, profile); with WRITE each program fills its 16-byte global scratch slice."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)
    if WRITE:
        lane = tl.arange(0, 4)
        tl.store(global_scratch + pid * 4 + lane, (pid * 10 + lane).to(tl.float32))


def _scratch_kernel(session, write: bool, global_size: int) -> BoundKernel:
    """A BoundKernel whose launch ABI is the 9e23713 Triton line's (metadata reporting
    global_scratch_size / profile_scratch_size, two hidden pointers after the user arguments).
    Triton 3.3 has no such metadata, so the ABI is written here from that line's rules; the
    kernel, the UR launch and the scratch memory are real."""
    sig = "x_ptr:*fp32,y_ptr:*fp32,n:i32,global_scratch:*fp32,profile_scratch:*fp32"
    art = TritonKernel(copy_with_scratch, sig, {"WRITE": write, "BLOCK": 64}, cache=False).compile(session.device)
    abi = dataclasses.replace(
        art.abi,
        params=art.abi.params[:3],
        scratch=[("global_scratch_size", global_size, 16), ("profile_scratch_size", 0, 1)],
    )
    return BoundKernel(session, dataclasses.replace(art, abi=abi), session.program_from_spirv(art.spirv))


def test_scratch_is_allocated_per_program_and_grows(session):
    """global_scratch_size > 0: every launch door allocates scratch for the grid (grown for a larger
    one, by the launcher itself: submit is the checked launcher, bk[grid] the compiled Direct) and
    hands the kernel its address; profile_scratch_size == 0 stays a null pointer."""
    n = 64 * 9
    x = np.arange(n, dtype=np.float32)
    bk = _scratch_kernel(session, write=True, global_size=16)
    try:
        assert bk.grows_scratch and bk.submit == bk.launcher.launch
        with session.from_numpy(x) as dx, session.alloc(x.nbytes) as dy:
            for programs in (5, 3, 9):
                bk[(programs,)](dx, dy, n)
                session.finish()
                glob, prof = bk.scratch_buffers
                assert prof is None and glob.nbytes >= 16 * programs
                got = glob.to_numpy(np.float32, 4 * programs).reshape(programs, 4)
                want = np.arange(programs)[:, None] * 10 + np.arange(4)[None, :]
                np.testing.assert_array_equal(got, want.astype(np.float32))
            assert bk.scratch_buffers[0].nbytes >= 16 * 9
            ev = bk.launch((9,), dx, dy, n, event=True)  # the explicit door, with an event
            ev.wait()
            ev.close()
            np.testing.assert_array_equal(dy.to_numpy(np.float32, n), x)
    finally:
        bk.close()


def test_zero_scratch_takes_the_launcher_itself(session):
    """Both scratch sizes 0 (the common case on the xpu profile's line): null pointers, no Python
    frame per launch (submit is the checked launcher), and the launch is exact."""
    n = 64 * 4
    x = np.arange(n, dtype=np.float32) * 3
    bk = _scratch_kernel(session, write=False, global_size=0)
    try:
        assert not bk.grows_scratch and bk.submit == bk.launcher.launch
        with session.from_numpy(x) as dx, session.alloc(x.nbytes) as dy:
            bk[(4,)](dx, dy, n)
            session.finish()
            np.testing.assert_array_equal(dy.to_numpy(np.float32, n), x)
            assert bk.scratch_buffers == [None, None]
    finally:
        bk.close()
