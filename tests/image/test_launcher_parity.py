"""The compiled launcher and its Python twin agree on every argument a user can pass: the same
error (class and message) or the same bytes reaching the kernel, checked by a kernel that writes
each scalar it received back to device memory. Random values from hypothesis, real UR CPU device."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("triton")

import triton
import triton.language as tl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.runtime_required import ur_session_or_skip
from xpukit.runtime.triton.launch import TritonKernel
from xpukit.runtime.ur import launcher as launcher_mod
from xpukit.runtime.ur.errors import KernelArgumentError, raise_result

pytestmark = pytest.mark.container

SCALARS = {"b8": "i8", "ub8": "u8", "h16": "i16", "uh16": "u16", "i32": "i32", "u32": "u32", "q64": "i64"}
SCALARS |= {"uq64": "u64", "flag": "i1", "half": "fp16", "brain": "bf16", "single": "fp32", "double": "fp64"}


@triton.jit
def echo(out_ptr, b8, ub8, h16, uh16, i32, u32, q64, uq64, flag, half, brain, single, double):
    """Writes every scalar it got, as fp64, so the bytes each launcher set can be compared."""
    tl.store(out_ptr + 0, b8.to(tl.float64))
    tl.store(out_ptr + 1, ub8.to(tl.float64))
    tl.store(out_ptr + 2, h16.to(tl.float64))
    tl.store(out_ptr + 3, uh16.to(tl.float64))
    tl.store(out_ptr + 4, i32.to(tl.float64))
    tl.store(out_ptr + 5, u32.to(tl.float64))
    tl.store(out_ptr + 6, q64.to(tl.float64))
    tl.store(out_ptr + 7, uq64.to(tl.float64))
    tl.store(out_ptr + 8, flag.to(tl.float64))
    tl.store(out_ptr + 9, half.to(tl.float64))
    tl.store(out_ptr + 10, brain.to(tl.float64))
    tl.store(out_ptr + 11, single.to(tl.float64))
    tl.store(out_ptr + 12, double)


@pytest.fixture(scope="module")
def rig():
    if not launcher_mod.COMPILED:
        pytest.fail("the image must ship the compiled launcher (_xpukit_launcher)")
    with ur_session_or_skip("cpu") as s:
        sig = "out_ptr:*fp64," + ",".join(f"{n}:{t}" for n, t in SCALARS.items())
        bound = TritonKernel(echo, sig, cache=False).bind(s)
        form, fns = s.lib.launch_entry_points()
        twin = launcher_mod.PyLauncher(
            bound.kernel.handle,
            form,
            fns,
            bound.abi.kinds,
            bound.abi.local_size,
            s.allocations,
            bound.abi.argument_error(s),
            raise_result,
        )
        with s.alloc(13 * 8) as out:
            yield s, bound, twin, out


def _outcome(session, launch, out, args):
    try:
        launch(session.queue.handle, 1, 1, 1, args)
    except KernelArgumentError as exc:
        return ("error", exc.one_line())
    session.finish()
    return ("ok", out.to_numpy(np.float64).tobytes())


any_value = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-300, max_value=300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(np.int64),
    st.floats(width=32, allow_nan=False).map(np.float32),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(any_value, min_size=len(SCALARS), max_size=len(SCALARS)))
def test_compiled_and_twin_launchers_agree(rig, values):
    session, bound, twin, out = rig
    args = (out, *values)
    compiled = _outcome(session, bound.launcher.launch, out, args)
    python = _outcome(session, twin.launch, out, args)
    if compiled[0] == "ok" and python[0] == "ok":
        a, b = np.frombuffer(compiled[1]), np.frombuffer(python[1])
        assert np.array_equal(a, b, equal_nan=True), (values, a, b)
    else:
        assert compiled == python, values


def test_parity_check_sees_real_values(rig):
    """The echo kernel really reports what was set (so the parity test compares something)."""
    session, bound, _twin, out = rig
    got = _outcome(session, bound.launcher.launch, out, (out, -5, 250, -7, 60000, 7, 9, -(2**40), 2**63, True,
                                                          0.5, 1.5, 2.5, math.pi))  # fmt: skip
    assert got[0] == "ok"
    assert list(np.frombuffer(got[1])) == [-5, 250, -7, 60000, 7, 9, -(2**40), 2.0**63, 1, 0.5, 1.5, 2.5, math.pi]


def _direct_outcome(session, launch, out, grid, args, **kw):
    try:
        launch(grid, *args, **kw)
    except KernelArgumentError as exc:
        return ("error", exc.one_line())
    session.finish()
    return ("ok", out.to_numpy(np.float64).tobytes())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(any_value, min_size=len(SCALARS), max_size=len(SCALARS)),
    grid=st.sampled_from([(1,), (1, 1), (1, 1, 1), (0,), (-1,), (2**31,), (1.5,), (1, 2, 3, 4), ()]),
)
def test_direct_launch_and_its_python_method_agree(rig, values, grid):
    """``bound.launch`` is the compiled entry (``_xpukit_dispatch.Direct``) for a tuple grid and no
    keywords; ``BoundKernel.launch``, the Python method it stands for, must give the same outcome."""
    session, bound, _twin, out = rig
    assert type(bound.launch).__name__ == "Direct"
    args = (out, *values)
    compiled = _direct_outcome(session, bound.launch, out, grid, args)
    python = _direct_outcome(session, type(bound).launch.__get__(bound), out, grid, args)
    if compiled[0] == "ok" and python[0] == "ok":
        a, b = np.frombuffer(compiled[1]), np.frombuffer(python[1])
        assert np.array_equal(a, b, equal_nan=True), (values, grid, a, b)
    else:
        assert compiled == python, (values, grid)


def test_direct_launch_hands_other_calls_to_the_python_method(rig):
    """A callable or list grid, ``event=``, ``queue=``: the Python method's own handling."""
    session, bound, _twin, out = rig
    args = (out, -5, 250, -7, 60000, 7, 9, -(2**40), 2**63, True, 0.5, 1.5, 2.5, math.pi)
    want = _outcome(session, bound.launcher.launch, out, args)
    assert _direct_outcome(session, bound.launch, out, lambda meta: (1,), args) == want
    assert _direct_outcome(session, bound.launch, out, [1], args) == want
    assert _direct_outcome(session, bound.launch, out, (1,), args, queue=session.queue) == want
    event = bound.launch((1,), *args, event=True)
    event.wait()
    assert out.to_numpy(np.float64).tobytes() == want[1]
