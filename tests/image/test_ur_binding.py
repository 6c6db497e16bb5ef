"""The UR binding on the CPU device: loader, release, session, device info, USM, programs, errors.

These tests also run once per UR release (2025.0-2026.2) through test_ur_matrix.py, each in its
own process with XPUKIT_UR_LOADER pointing at that release (XPUKIT_EXPECT_UR_RELEASE names it).
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest

from tests.support.runtime_required import ur_session_or_skip
from xpukit.runtime import ur
from xpukit.runtime.offline import spirv
from xpukit.runtime.ur.objects import Event

pytestmark = pytest.mark.container


@pytest.fixture(scope="module")
def scale_spirv():
    """Triton's SPIR-V for a scale kernel (typed pointers), patched for the CPU device."""
    pytest.importorskip("triton")
    from tests.support.kernels import scale_typed
    from xpukit.runtime.triton.tritonc import compile_kernel

    ck = compile_kernel(
        scale_typed, {"x_ptr": "*fp32", "y_ptr": "*fp32", "scale": "fp32", "n": "i32"}, {"BLOCK": 128}, "cpu"
    )
    return ck.asm["spv"]


def test_release_is_supported_and_expected(session):
    lib = session.lib
    assert lib.release.line in ur.SUPPORTED_RELEASES
    expected = os.environ.get("XPUKIT_EXPECT_UR_RELEASE")
    if expected:
        assert lib.release.version == expected, (lib.location, lib.release)
    assert session.device.ur_release == lib.release.version


def test_device_info(session):
    d = session.device
    assert d.type == "cpu"
    assert d.backend == "opencl"
    assert d.name and d.driver_version
    assert d.max_work_group_size >= 128
    assert "cl_intel_unified_shared_memory" in d.extensions


@pytest.mark.parametrize("kind", ["device", "shared", "host"])
def test_usm_roundtrip(session, kind):
    x = np.random.default_rng(0).standard_normal(4097).astype(np.float32)
    with session.from_numpy(x, kind=kind) as buf:
        assert isinstance(buf.ptr, int) and buf.ptr > 0 and buf.kind == kind
        assert int(buf) == buf.ptr
        np.testing.assert_array_equal(buf.to_numpy(np.float32, x.size), x)


def test_usm_copy_rejects_oversize_and_bad_arrays(session):
    with session.alloc(16) as buf:
        with pytest.raises(ValueError, match="does not fit"):
            buf.copy_from(np.zeros(5, np.float32))
        with pytest.raises(ValueError, match="C-contiguous"):
            buf.copy_from(np.zeros((4, 4), np.float32)[:, 0])
        with pytest.raises(TypeError):
            buf.copy_from([1, 2, 3])


def test_program_from_spirv_and_native_binary(session, scale_spirv):
    n = 300
    x = np.arange(n, dtype=np.float32)
    code = spirv.patch_for_cpu(scale_spirv)
    with session.program_from_spirv(code) as prog:
        assert prog.kernel_names() == ["scale_typed"]
        binary = prog.binary()
    assert binary[:4] == b"\x7fELF"
    with (
        session.program_from_binary(binary) as prog2,
        prog2.kernel("scale_typed") as k,
        session.from_numpy(x) as dx,
        session.alloc(x.nbytes) as dy,
    ):
        k.set_arg_pointer(0, dx.ptr)
        k.set_arg_pointer(1, dy.ptr)
        k.set_arg_value(2, ctypes.c_float(1.5))
        k.set_arg_value(3, ctypes.c_int32(n))
        session.queue.launch(k, (3 * 128, 1, 1), (128, 1, 1))
        session.queue.finish()
        np.testing.assert_array_equal(dy.to_numpy(np.float32, n), x * np.float32(1.5))


def test_events_from_a_profiling_queue(session, scale_spirv):
    """Queue.launch(event=True) and the checked launcher's launch door (what BoundKernel.submit is)
    give core Events: wait() returns once the kernel ran, profile() gives ordered device
    timestamps, close() releases them."""
    n = 1 << 16
    x = np.arange(n, dtype=np.float32)
    with (
        session.program_from_spirv(spirv.patch_for_cpu(scale_spirv)) as prog,
        prog.kernel("scale_typed") as k,
        session.from_numpy(x) as dx,
        session.alloc(x.nbytes) as dy,
        session.new_queue(profiling=True) as q,
    ):
        k.set_arg_pointer(0, dx.ptr)
        k.set_arg_pointer(1, dy.ptr)
        k.set_arg_value(2, ctypes.c_float(2.0))
        k.set_arg_value(3, ctypes.c_int32(n))
        with q.launch(k, (n, 1, 1), (128, 1, 1), event=True) as ev:
            ev.wait()
            start, end = ev.profile()
            assert 0 < start <= end
        np.testing.assert_array_equal(dy.to_numpy(np.float32, n), x * 2)
        launcher = k.launcher("PPfi", (128, 1, 1), lambda i, code, v: (_ for _ in ()).throw(ValueError(i, code)))
        ev2 = Event(session, launcher.launch(q.handle, n // 128, 1, 1, (dy, dx, 0.5, n), True))
        ev2.wait()
        assert ev2.profile()[0] >= end
        ev2.close()
        assert ev2.closed and ev.closed
        np.testing.assert_array_equal(dx.to_numpy(np.float32, n), x)  # y * 0.5 == x, written to x
        with pytest.raises(ValueError):
            launcher.launch(q.handle, 1, 1, 1, (dy, 12345, 0.5, n))  # not device memory: the callback's error


def test_every_launch_entry_point_writes_its_event(session, scale_spirv):
    """The silent-prototype hazard: 2026.0's 10-parameter urEnqueueKernelLaunch called with 2025.3's
    11-parameter prototype returns success and never writes phEvent. Every launch call this release
    exports, through the prototype the binding bound for it, must hand back a real event that
    waits for a kernel that really ran."""
    from xpukit.runtime.ur import _api

    lib, n = session.lib, 4096
    x = np.arange(n, dtype=np.float32)
    abi = lib.abi
    exported = {s for s, on in abi.expected_symbols().items() if on}
    assert exported == {s for s in abi.expected_symbols() if hasattr(lib.raw, s)}, "the exports are the release's"
    with (
        session.program_from_spirv(spirv.patch_for_cpu(scale_spirv)) as prog,
        prog.kernel("scale_typed") as k,
        session.from_numpy(x) as dx,
        session.alloc(x.nbytes) as dy,
    ):
        g, loc = _api.size_array([n, 1, 1]), _api.size_array([128, 1, 1])
        calls = []
        if abi.launch_params is not None:
            calls.append("urEnqueueKernelLaunch")
        if abi.has_launch_with_args:
            calls.append("urEnqueueKernelLaunchWithArgsExp")
        assert calls, "a release with no launch call"
        for i, name in enumerate(calls, start=2):
            dy.copy_from(np.zeros(n, np.float32))
            event = ctypes.c_void_p()
            if name == "urEnqueueKernelLaunch":
                lib.urKernelSetArgPointer(k.handle, 0, None, ctypes.c_void_p(dx.ptr))
                lib.urKernelSetArgPointer(k.handle, 1, None, ctypes.c_void_p(dy.ptr))
                lib.urKernelSetArgValue(k.handle, 2, 4, None, ctypes.byref(ctypes.c_float(i)))
                lib.urKernelSetArgValue(k.handle, 3, 4, None, ctypes.byref(ctypes.c_int32(n)))
                middle = {9: (), 10: (None,), 11: (0, None)}[abi.launch_params]
                lib.urEnqueueKernelLaunch(session.queue.handle, k.handle, 3, None, g, loc, *middle, 0, None,
                                          ctypes.byref(event))  # fmt: skip
            else:
                k.set_arg_pointer(0, dx.ptr)
                k.set_arg_pointer(1, dy.ptr)
                k.set_arg_value(2, ctypes.c_float(i))
                k.set_arg_value(3, ctypes.c_int32(n))
                args, _keep = k.argument_properties()
                lib.urEnqueueKernelLaunchWithArgsExp(session.queue.handle, k.handle, 3, None, g, loc, len(args), args,
                                                     None, 0, None, ctypes.byref(event))  # fmt: skip
            assert event.value, f"{name} returned success without writing its event"
            lib.urEventWait(1, (ctypes.c_void_p * 1)(event.value))
            lib.urEventRelease(event)
            np.testing.assert_array_equal(dy.to_numpy(np.float32, n), x * np.float32(i), err_msg=name)


def test_unpatched_spirv_build_failure_carries_log(session, scale_spirv):
    with pytest.raises(ur.error_class("UR_RESULT_ERROR_PROGRAM_BUILD_FAILURE")) as info:
        session.program_from_spirv(scale_spirv)
    err = info.value
    assert type(err).__name__ == "UR_RESULT_ERROR_PROGRAM_BUILD_FAILURE"
    assert err.function == "urProgramBuild"
    assert "5892" in err.build_log
    assert isinstance(err, ur.UrError) and err.one_line().startswith("urProgramBuild failed with")


def test_unknown_kernel_name(session, scale_spirv):
    kname_error = ur.error_class("UR_RESULT_ERROR_INVALID_KERNEL_NAME")
    with (
        session.program_from_spirv(spirv.patch_for_cpu(scale_spirv)) as prog,
        pytest.raises(kname_error) as info,
    ):
        prog.kernel("no_such_kernel")
    assert type(info.value).__name__ == "UR_RESULT_ERROR_INVALID_KERNEL_NAME"
    assert info.value.function == "urKernelCreate"


def test_invalid_binary_is_named(session):
    with pytest.raises(ur.UrError) as info:
        session.program_from_binary(b"\x7fELF" + b"\0" * 60)
    assert type(info.value).__name__.startswith("UR_RESULT_ERROR_")


def test_bad_device_request():
    with pytest.raises(ur.BadDeviceRequest, match="unknown device request 'tpu'"):
        ur.Session("tpu")


def test_gpu_request_without_gpu_is_named():
    try:
        s = ur.Session("gpu")
    except ur.DeviceNotFound as exc:
        assert "no GPU device" in exc.message and exc.fix
    else:  # an Intel GPU host
        assert s.device.type == "gpu"
        s.close()


def test_auto_falls_back_to_cpu_and_says_so(caplog):
    s = ur_session_or_skip("auto")
    try:
        if s.device.type == "cpu":
            assert "using the CPU device" in s.note
            assert "using the CPU device" in caplog.text
    finally:
        s.close()


def test_use_after_close_and_double_close():
    s = ur_session_or_skip()
    buf = s.alloc(64)
    q = s.queue
    s.close()
    s.close()  # twice is fine
    assert buf.closed and q.closed
    buf.close()  # already closed by the session: still fine
    with pytest.raises(ur.ClosedError, match="USM allocation used after close"):
        buf.ptr  # noqa: B018
    with pytest.raises(ur.ClosedError, match="queue used after close"):
        q.finish()
    with pytest.raises(ur.ClosedError, match="session used after close"):
        s.alloc(16)


def test_context_managers_release_in_order():
    with ur_session_or_skip() as s:
        with s.alloc(128) as a, s.alloc(128, "host") as b:
            assert a.ptr != b.ptr
        assert a.closed and b.closed
        assert a.session is s and b.session is s
        assert s.owned() == [s.queue]  # closed objects are no longer the session's to close
    assert s.closed


def test_raw_binding_is_one_to_one(session, scale_spirv):
    """``lib.urX`` raises result-named errors; ``lib.raw.urX`` returns the code.

    (Null handles are not probed: without UR's validation layer the loader does not check them.)
    """
    lib = session.lib
    with session.program_from_spirv(spirv.patch_for_cpu(scale_spirv)) as prog:
        out = ctypes.c_void_p()
        code = lib.raw.urKernelCreate(prog.handle, b"nope", ctypes.byref(out))
        assert code == ur.error_class("UR_RESULT_ERROR_INVALID_KERNEL_NAME").code
        with pytest.raises(ur.error_class("UR_RESULT_ERROR_INVALID_KERNEL_NAME")) as info:
            lib.urKernelCreate(prog.handle, b"nope", ctypes.byref(out))
    assert info.value.function == "urKernelCreate"


def test_usm_ranges_recognise_addresses(session):
    """A plain int inside a live allocation is a device address (the driver then types it i64;
    in the image, Debian's non-PIE python makes the CPU runtime hand out addresses below 2**31,
    and the blog-style driver tests exercise exactly that)."""
    a = session.alloc(4096)
    b = session.alloc(64, "shared")
    try:
        for ptr, size in ((a.ptr, 4096), (b.ptr, 64)):
            assert session.is_usm_address(ptr) and session.is_usm_address(ptr + size - 1)
            assert not session.is_usm_address(ptr + size) or session.is_usm_address(ptr + size) == any(
                other.ptr <= ptr + size < other.ptr + other.nbytes for other in (a, b)
            )
        assert not session.is_usm_address(0) and not session.is_usm_address(1024)
    finally:
        ptr = a.ptr
        a.close()
        b.close()
    assert not session.is_usm_address(ptr)
