"""``kernel[grid](...)`` through the compiled Dispatch (``_xpukit_launcher.Dispatch``) and its Python
twin (``fast_table.PyDispatch``): the same results, the same errors, the same launch counts, on the
hit path (a signature seen before, launched from C) and on every miss (Triton's ``run`` as the kit
wraps it). Real UR CPU device, real Triton compiles; random calls from hypothesis."""

from __future__ import annotations

import dis
import sys
import threading

import numpy as np
import pytest

pytest.importorskip("triton")

import triton
import triton.language as tl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.runtime_required import ur_session_or_skip
from xpukit.runtime.triton import DeviceArray, NoActiveSession, URDriver, activate, fast_table
from xpukit.runtime.triton import dispatch as compiled_dispatch
from xpukit.runtime.ur import launcher as launcher_mod
from xpukit.runtime.ur.core import Session
from xpukit.runtime.ur.errors import KernelArgumentError

pytestmark = pytest.mark.container
N = 64


@triton.jit
def axpy(x_ptr, y_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, a * tl.load(x_ptr + offs, mask=mask) + offs.to(tl.float32), mask=mask)


@pytest.fixture(scope="module")
def rig():
    if not launcher_mod.COMPILED or not compiled_dispatch.COMPILED:
        pytest.fail("the image must ship the compiled launch path (_xpukit_launcher and _xpukit_dispatch)")
    with ur_session_or_skip("cpu") as s:
        drv = URDriver(cache=False)
        x = s.from_numpy(np.arange(N, dtype=np.float32))
        y = s.alloc(N * 4)
        with activate(s, driver=drv):
            yield s, drv, x, y
        x.close()
        y.close()


def _outcome(session, drv, dispatch, grid, y, args, kwargs):
    y.copy_from(np.full(N, -1, np.float32))
    launches = drv.stats.launches
    try:
        result = dispatch[grid](*args, **kwargs)
    except Exception as exc:  # the class and the one line are what must agree
        return ("error", type(exc).__name__, str(exc).splitlines()[0], drv.stats.launches - launches)
    session.finish()
    return ("ok", type(result).__name__, y.to_numpy(np.float32).tobytes(), drv.stats.launches - launches)


def test_kernel_getitem_is_the_compiled_dispatch(rig):
    s, _drv, x, y = rig
    call = axpy[(1,)]
    assert type(call).__name__ == "GridCall"
    call(DeviceArray(x, np.float32), DeviceArray(y, np.float32), 2.0, N, BLOCK=N)
    s.finish()
    np.testing.assert_array_equal(y.to_numpy(np.float32), 2 * np.arange(N, dtype=np.float32) + np.arange(N))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    x_kind=st.sampled_from(["typed", "typed", "none", "zero", "int", "untyped", "host", "freed"]),
    a=st.sampled_from([2.0, -1.5, 3, np.float32(0.5), "s", None]),
    n=st.sampled_from([N, 7, 1, 33]),
    grid=st.sampled_from(["1", "2d", "callable", "list", "empty", "bad"]),
    block=st.sampled_from([N, 32]),
)
def test_compiled_and_python_dispatch_agree(rig, x_kind, a, n, grid, block):
    s, drv, x, y = rig
    freed = s.alloc(64)
    freed_array = DeviceArray(freed, np.float32)
    freed.close()
    xs = {
        "typed": DeviceArray(x, np.float32),
        "none": None,
        "zero": 0,
        "int": x.ptr,
        "untyped": x,
        "host": np.zeros(4, np.float32),
        "freed": freed_array,
    }
    grids = {
        "1": (triton.cdiv(N, block),),
        "2d": (triton.cdiv(N, block), 1, 1),
        "callable": lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
        "list": [triton.cdiv(N, block)],
        "empty": (0,),
        "bad": (1, 2, 3, 4),
    }
    args = (xs[x_kind], DeviceArray(y, np.float32), a, n)
    compiled = fast_table.dispatch_for(axpy, True)
    python = fast_table.dispatch_for(axpy, False)
    # twice each, in both orders: the first call of a new signature misses (Triton's run records
    # it), the next ones hit; a hit and a miss must give the same outcome
    outcomes = [
        _outcome(s, drv, d, grids[grid], y, args, {"BLOCK": block}) for d in (compiled, python, python, compiled)
    ]
    assert outcomes[0] == outcomes[1] == outcomes[2] == outcomes[3], (x_kind, a, n, grid, block)


def test_bad_pointers_are_refused_by_name_after_a_hit(rig):
    """The signature is recorded first, so every bad call reaches the C dispatch and must leave it."""
    s, drv, x, y = rig
    dx, dy = DeviceArray(x, np.float32), DeviceArray(y, np.float32)
    axpy[(1,)](dx, dy, 2.0, N, BLOCK=N)
    axpy[(1,)](dx, dy, 2.0, N, BLOCK=N)
    freed = s.alloc(256)
    freed_array = DeviceArray(freed, np.float32)
    freed.close()
    launches = drv.stats.launches
    for bad in (None, 0, 0x1000, x.ptr, x, np.zeros(4, np.float32), freed_array):
        with pytest.raises(KernelArgumentError, match=r"x_ptr|freed|host numpy array|cannot be"):
            axpy[(1,)](bad, dy, 2.0, N, BLOCK=N)
    assert drv.stats.launches == launches


def test_threads_each_launch_on_their_own_session(rig):
    _s0, drv, _x, _y = rig
    errors: list[BaseException] = []
    counts: list[int] = []

    def work(k: int) -> None:
        try:
            with ur_session_or_skip("cpu") as s, activate(s, driver=drv):
                src = s.from_numpy(np.full(N, k, np.float32))
                out = s.alloc(N * 4)
                call = axpy[(1,)]
                for i in range(200):
                    call(DeviceArray(src, np.float32), DeviceArray(out, np.float32), float(i), N, BLOCK=N)
                s.finish()
                want = np.float32(199) * np.float32(k) + np.arange(N, dtype=np.float32)
                np.testing.assert_array_equal(out.to_numpy(np.float32), want)
                counts.append(200)
                src.close()
                out.close()
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    before = drv.stats.launches
    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert drv.stats.launches - before == sum(counts) == 800


def test_a_new_specialization_misses_and_compiles(rig):
    s, drv, x, y = rig
    dx, dy = DeviceArray(x, np.float32), DeviceArray(y, np.float32)
    axpy[(1,)](dx, dy, 1.0, N, BLOCK=N)
    variants = drv.stats.variants
    axpy[(1,)](dx, dy, 1.0, 16, BLOCK=16)  # another BLOCK: not in the table, Triton compiles
    s.finish()
    assert drv.stats.variants == variants + 1
    got = y.to_numpy(np.float32)
    np.testing.assert_array_equal(got[:16], np.arange(16, dtype=np.float32) * 2)


@pytest.mark.parametrize("dispatch_compiled", [True, False])
def test_alternating_specializations_hit_with_their_own_kernel(rig, dispatch_compiled, monkeypatch):
    """n alternating between specializations (n % 16 == 0, n == 1, neither) and BLOCK between two
    values, every call's key unlike the last one's: once each is recorded, no call takes Triton's
    run and each launches its own specialization's kernel, whether the compiled Dispatch finds it
    among its last four hits (the first four calls) or in the table (all five: each evicts one)."""
    s, drv, x, y = rig
    d = fast_table.dispatch_for(axpy, dispatch_compiled)
    dx, dy = DeviceArray(x, np.float32), DeviceArray(y, np.float32)
    calls = [(48, N), (7, N), (1, N), (33, 32), (48, 32)]
    for n, block in calls:  # recorded (or already in the table)
        d[(triton.cdiv(N, block),)](dx, dy, 2.0, n, BLOCK=block)
    s.finish()
    doors: list[object] = []
    run = axpy.run
    # on the instance, removed afterwards (activate() swaps JITFunction.run on the class)
    monkeypatch.setitem(vars(axpy), "run", lambda *a, **k: doors.append(a) or run(*a, **k))
    launches = drv.stats.launches
    base = 2 * np.arange(N, dtype=np.float32) + np.arange(N, dtype=np.float32)
    for seq in (calls[:4], calls):
        for n, block in seq * 3:
            y.copy_from(np.full(N, -1, np.float32))
            d[(triton.cdiv(N, block),)](dx, dy, 2.0, n, BLOCK=block)
            s.finish()
            got = y.to_numpy(np.float32)
            np.testing.assert_array_equal(got[:n], base[:n], err_msg=f"n={n} BLOCK={block}")
            assert (got[n:] == -1).all(), (n, block)
    assert drv.stats.launches - launches == 3 * (4 + len(calls))
    assert not doors
    block = 8 if dispatch_compiled else 4  # a key never seen: Triton's run, as counted here
    d[(triton.cdiv(N, block),)](dx, dy, 2.0, 7, BLOCK=block)
    assert len(doors) == 1


def test_a_hit_left_by_a_closed_session_is_taken_over(rig, monkeypatch):
    """Another session launched a signature this one had recorded (the table's hit names it), then
    closed: this session's next call takes Triton's run once, takes the hit back, and hits after."""
    s, drv, x, y = rig
    dx, dy = DeviceArray(x, np.float32), DeviceArray(y, np.float32)
    axpy[(1,)](dx, dy, 3.0, 5, BLOCK=N)
    with ur_session_or_skip("cpu") as other, activate(other, driver=drv):
        ox = other.from_numpy(np.ones(N, np.float32))
        axpy[(1,)](DeviceArray(ox, np.float32), DeviceArray(ox, np.float32), 3.0, 5, BLOCK=N)
        other.finish()
        ox.close()
    doors: list[object] = []
    run = axpy.run
    monkeypatch.setitem(vars(axpy), "run", lambda *a, **k: doors.append(a) or run(*a, **k))
    for _ in range(3):
        axpy[(1,)](dx, dy, 3.0, 5, BLOCK=N)
    s.finish()
    assert len(doors) == 1
    np.testing.assert_array_equal(y.to_numpy(np.float32)[:5], 3 * np.arange(5, dtype=np.float32) + np.arange(5))


def test_kernel_getitem_after_activate_ends(rig):
    _s0, drv, _x, _y = rig
    with ur_session_or_skip("cpu") as s:
        x = s.from_numpy(np.ones(N, np.float32))
        with activate(s, driver=drv):
            kept = axpy[(1,)]
            kept(DeviceArray(x, np.float32), DeviceArray(x, np.float32), 1.0, N, BLOCK=N)
        # rig's block is still open in this thread: the kept call now launches on rig's session,
        # which refuses this session's memory by name
        with pytest.raises(KernelArgumentError, match=r"x_ptr|another session|not a live"):
            kept(DeviceArray(x, np.float32), DeviceArray(x, np.float32), 1.0, N, BLOCK=N)
        outcome: list[BaseException] = []

        def elsewhere() -> None:  # a thread with no activate(): the kit's error, not Triton's
            try:
                kept(DeviceArray(x, np.float32), DeviceArray(x, np.float32), 1.0, N, BLOCK=N)
            except BaseException as exc:
                outcome.append(exc)

        t = threading.Thread(target=elsewhere)
        t.start()
        t.join()
        assert len(outcome) == 1 and isinstance(outcome[0], NoActiveSession), outcome
        x.close()


@pytest.mark.parametrize("dispatch_compiled", [True, False])
def test_a_launch_hook_takes_tritons_run_after_a_hit(rig, dispatch_compiled):
    """CompiledKernel.launch_enter_hook (a class attribute, read by the C dispatch from the class)
    set after a signature was recorded: the next call goes through Triton's run, which calls it."""
    from triton.compiler import CompiledKernel

    s, drv, x, y = rig
    d = fast_table.dispatch_for(axpy, dispatch_compiled)
    dx, dy = DeviceArray(x, np.float32), DeviceArray(y, np.float32)
    d[(1,)](dx, dy, 2.0, N, BLOCK=N)
    d[(1,)](dx, dy, 2.0, N, BLOCK=N)
    seen: list[object] = []
    CompiledKernel.launch_enter_hook = seen.append
    try:
        launches = drv.stats.launches
        d[(1,)](dx, dy, 2.0, N, BLOCK=N)
    finally:
        CompiledKernel.launch_enter_hook = None
    s.finish()
    assert len(seen) == 1 and drv.stats.launches == launches + 1
    d[(1,)](dx, dy, 2.0, N, BLOCK=N)
    assert len(seen) == 1 and drv.stats.launches == launches + 2


@pytest.mark.parametrize("dispatch_compiled", [True, False])
def test_a_class_attribute_set_after_a_hit_takes_part(rig, dispatch_compiled, monkeypatch):
    """The C dispatch remembers, per type, where the state it reads lives (Session.closed in the
    instance dict, Stream.events in a slot); a class attribute of that name set after a hit (here a
    property saying the session is closed) must be read on the next call, as getattr reads it."""
    s, drv, x, y = rig
    d = fast_table.dispatch_for(axpy, dispatch_compiled)
    dx, dy = DeviceArray(x, np.float32), DeviceArray(y, np.float32)
    d[(1,)](dx, dy, 2.0, N, BLOCK=N)
    d[(1,)](dx, dy, 2.0, N, BLOCK=N)
    launches = drv.stats.launches
    monkeypatch.setattr(Session, "closed", property(lambda self: True), raising=False)
    with pytest.raises(NoActiveSession, match="is closed"):
        d[(1,)](dx, dy, 2.0, N, BLOCK=N)
    monkeypatch.undo()
    assert drv.stats.launches == launches
    d[(1,)](dx, dy, 2.0, N, BLOCK=N)
    s.finish()
    assert drv.stats.launches == launches + 1


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11), reason="CPython 3.11's specialized attribute reads (the image's Python)"
)
def test_a_hit_leaves_the_objects_it_reads_specializable(rig):
    """The C dispatch reads session.closed, queue.raw_handle and stats.launches on every hit without
    asking CPython for those instances' dicts: once asked for, a dict replaces the instance's inline
    values for good, and Python's reads of its attributes specialize no further than the dict's
    path (LOAD_ATTR_WITH_HINT; in Session.finish they stayed adaptive: the generic lookup, ~400
    instructions more per launch in bench_launch_instructions.py)."""
    s, drv, x, y = rig
    dx, dy = DeviceArray(x, np.float32), DeviceArray(y, np.float32)
    for _ in range(3):
        axpy[(1,)](dx, dy, 2.0, N, BLOCK=N)
    s.finish()

    def reads(session, stats):
        return session.closed, session.queue.raw_handle, stats.launches

    for _ in range(100):
        reads(s, drv.stats)
    ops = [i.opname for i in dis.get_instructions(reads, adaptive=True) if "ATTR" in i.opname]
    assert ops == ["LOAD_ATTR_INSTANCE_VALUE"] * 4, ops


class _PtrView:
    """Device memory as another library hands it over: an int ``.ptr`` (a property here, so the
    reads are counted), ``data_ptr()`` and ``dtype``."""

    def __init__(self, address: int, dtype):
        self.address, self.dtype, self.reads = address, np.dtype(dtype), 0

    @property
    def ptr(self) -> int:
        self.reads += 1
        return self.address

    def data_ptr(self) -> int:
        return self.address


def test_an_objects_ptr_is_read_once_per_launch_and_checked(rig):
    """On a hit the key match reads ``.ptr`` and the launch converts from that read (one read,
    where the launch used to read it again); the address is still checked against the session's
    live memory."""
    s, drv, x, y = rig
    view, dy = _PtrView(x.ptr, np.float32), DeviceArray(y, np.float32)
    for _ in range(3):  # the first call records the signature (Triton's run), the next ones hit
        axpy[(1,)](view, dy, 2.0, N, BLOCK=N)
    s.finish()
    view.reads = 0
    launches = drv.stats.launches
    for _ in range(5):
        axpy[(1,)](view, dy, 2.0, N, BLOCK=N)
    s.finish()
    assert drv.stats.launches - launches == 5
    assert view.reads == 5, view.reads
    np.testing.assert_array_equal(y.to_numpy(np.float32), 2 * np.arange(N, dtype=np.float32) + np.arange(N))

    freed = s.alloc(N * 4)
    stale = _PtrView(freed.ptr, np.float32)  # its address outlives the memory
    axpy[(1,)](stale, dy, 2.0, N, BLOCK=N)
    s.finish()
    freed.close()
    launches = drv.stats.launches
    with pytest.raises(KernelArgumentError, match=r"x_ptr.*live device memory.*freed"):
        axpy[(1,)](stale, dy, 2.0, N, BLOCK=N)
    assert drv.stats.launches == launches
