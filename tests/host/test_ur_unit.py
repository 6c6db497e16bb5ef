"""Pure-logic checks of the UR binding and the launch layer (no UR loader, no Triton)."""

from __future__ import annotations

import ctypes
import os
import shutil
import struct
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.support import ROOT
from xpukit.errors import XpukitError
from xpukit.runtime.offline import spirv
from xpukit.runtime.triton.dispatch import py_fast_key
from xpukit.runtime.triton.launch import LaunchABI, ProgramCache, normalize_grid
from xpukit.runtime.ur import _api, errors
from xpukit.runtime.ur.launcher import PyAllocTable
from xpukit.runtime.ur.loader import detect_release, find_loader

pytestmark = pytest.mark.unit


def _string_words(text: str) -> list[int]:
    raw = text.encode() + b"\0"
    raw += b"\0" * (-len(raw) % 4)
    return list(struct.unpack(f"<{len(raw) // 4}I", raw))


def _module() -> bytes:
    ins = [
        (17, [1]),  # OpCapability Addresses
        (17, [spirv.CAP_KERNEL_ATTRIBUTES_INTEL]),
        (10, _string_words("SPV_INTEL_kernel_attributes")),
        (10, _string_words("SPV_KHR_other")),
        (15, [6, 4, *_string_words("kern")]),  # OpEntryPoint Kernel %4 "kern"
        (16, [4, 35, 32]),  # OpExecutionMode %4 SubgroupSize 32
        (16, [4, 5893, 128, 1, 1]),  # MaxWorkgroupSizeINTEL
    ]
    words = [spirv.MAGIC, 0x00010100, 0, 10, 0]
    for op, operands in ins:
        words += [((len(operands) + 1) << 16) | op, *operands]
    return struct.pack(f"<{len(words)}I", *words)


def test_spirv_patch_drops_exactly_the_three_instructions():
    mod = _module()
    assert spirv.needs_cpu_patch(mod)
    out = spirv.patch_for_cpu(mod)
    _, ins, _ = spirv.parse(out)
    assert [(i.opcode, i.operands[:2]) for i in ins] == [
        (17, (1,)),
        (10, tuple(_string_words("SPV_KHR_other")[:2])),
        (15, (6, 4)),
        (16, (4, 35)),
    ]
    assert spirv.entry_points(out) == ["kern"]
    assert spirv.patch_for_cpu(out) == out  # idempotent


def test_spirv_big_endian_and_errors():
    mod = _module()
    be = struct.pack(f">{len(mod) // 4}I", *struct.unpack(f"<{len(mod) // 4}I", mod))
    assert spirv.entry_points(be) == ["kern"]
    assert not spirv.needs_cpu_patch(spirv.patch_for_cpu(be))
    with pytest.raises(spirv.SpirvError, match="bad magic"):
        spirv.parse(b"\0" * 20)
    with pytest.raises(spirv.SpirvError, match="word count"):
        spirv.parse(mod[:-4])


def test_result_named_errors():
    cls = errors.error_class("UR_RESULT_ERROR_INVALID_KERNEL_NAME")
    assert cls.__name__ == "UR_RESULT_ERROR_INVALID_KERNEL_NAME" and cls.code == 29
    assert errors.error_class(29) is cls is errors.UR_RESULT_ERROR_INVALID_KERNEL_NAME
    assert issubclass(cls, XpukitError)
    with pytest.raises(cls, match="urKernelCreate failed with UR_RESULT_ERROR_INVALID_KERNEL_NAME"):
        errors.raise_result(29, "urKernelCreate")
    assert errors.error_class(12345).__name__ == "UR_RESULT_0x3039"


def test_release_prototypes_differ_where_the_headers_do():
    p = {r: _api.RELEASE_ABIS[r].prototypes() for r in _api.SUPPORTED_RELEASES}
    assert p["2025.2"]["urPlatformGet"] == p["2025.0"]["urPlatformGet"]  # 2025.2 is API 0.12, old calls
    assert p["2025.2"]["urEnqueueKernelLaunch"] == p["2025.0"]["urEnqueueKernelLaunch"]
    assert len(p["2025.0"]["urPlatformGet"]) == 5 and len(p["2025.3"]["urPlatformGet"]) == 4
    assert len(p["2025.0"]["urEnqueueKernelLaunch"]) == 9 and len(p["2025.3"]["urEnqueueKernelLaunch"]) == 11
    assert len(p["2026.0"]["urEnqueueKernelLaunch"]) == 10 == len(p["2026.1"]["urEnqueueKernelLaunch"])
    assert "urEnqueueKernelLaunch" not in p["2026.2"] and "urKernelSetArgValue" not in p["2026.2"]
    assert all(len(p[r]["urEnqueueKernelLaunchWithArgsExp"]) == 12 for r in ("2026.0", "2026.1", "2026.2"))
    assert "urEnqueueKernelLaunchWithArgsExp" not in p["2025.3"]
    assert len(p["2025.0"]["urProgramCreateWithBinary"]) == 6 and len(p["2025.1"]["urProgramCreateWithBinary"]) == 7
    assert _api.SUPPORTED_RELEASES == ("2025.0", "2025.1", "2025.2", "2025.3", "2026.0", "2026.1", "2026.2")
    forms = {r: _api.RELEASE_ABIS[r].launch_form for r in _api.SUPPORTED_RELEASES}
    assert forms["2025.2"] == _api.LaunchForm.SET_ARGS_LAUNCH9 and forms["2025.3"] == _api.LaunchForm.SET_ARGS_LAUNCH11
    assert {forms[r] for r in ("2026.0", "2026.1", "2026.2")} == {_api.LaunchForm.WITH_ARGS}


def test_kernel_arg_properties_layout():
    """ur_exp_kernel_arg_properties_t as 2026.x's ur_api.h lays it out (x86-64)."""
    t = _api.KernelArgProperties
    assert ctypes.sizeof(t) == 48
    assert [(n, getattr(t, n).offset) for n in ("stype", "pNext", "type", "index", "size", "value")] == [
        ("stype", 0), ("pNext", 8), ("type", 16), ("index", 20), ("size", 24), ("value", 32)
    ]  # fmt: skip


def _exports(line):
    return [s for s, on in _api.RELEASE_ABIS[line].expected_symbols().items() if on] + ["urLoaderInit", "urAdapterGet"]


def _fake_loader(tmp_path, symbols, version=None, minor=12):
    """A real shared library that exports ``symbols`` (as empty functions), named like the loader;
    ``version``: an intel_cmplr_lib_ur dist-info beside it, as the wheel installs it."""
    gcc = shutil.which("gcc") or pytest.fail("these tests build fake loaders with gcc (apt-get install gcc)")
    lib = tmp_path / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    src = tmp_path / "fake.c"
    src.write_text("".join(f"void {s}(void) {{}}\n" for s in symbols) or "int xpukit_nothing;\n")
    real = lib / f"libur_loader.so.0.{minor}.0"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(real), str(src)], check=True)
    (lib / "libur_loader.so").symlink_to(real.name)
    if version:
        (lib / "python3.11" / "site-packages" / f"intel_cmplr_lib_ur-{version}.dist-info").mkdir(parents=True)
    return lib / "libur_loader.so"


@pytest.mark.parametrize(
    ("version", "minor"),
    [("2025.0.5", 10), ("2025.1.1", 11), ("2025.2.2", 12), ("2025.3.3", 12), ("2026.0.0", 12), ("2026.1.2", 12),
     ("2026.2.0", 12)],
)  # fmt: skip
def test_detect_release_from_metadata_and_exports(tmp_path, version, minor):
    line = version[:6]
    info = detect_release(_fake_loader(tmp_path, _exports(line), version, minor))
    assert (info.line, info.version, info.note) == (line, version, "")
    # Without metadata the exports (and, for 2025.0-2025.2, the file version) tell the same ABI.
    bare = detect_release(_fake_loader(tmp_path / "bare", _exports(line), None, minor))
    assert bare.abi.prototypes() == info.abi.prototypes() and "exported symbols" in bare.how


def test_metadata_and_exports_that_disagree_are_refused(tmp_path):
    """2026.1's metadata over 2026.2's exports (a half-upgraded prefix): one line naming the difference."""
    with pytest.raises(errors.UnsupportedURRelease) as exc:
        detect_release(_fake_loader(tmp_path, _exports("2026.2"), "2026.1.2"))
    assert "lacks urKernelSetArgValue" in exc.value.message and "urEnqueueKernelLaunch" in exc.value.message


def test_a_loader_that_matches_no_release_names_what_is_missing(tmp_path):
    """A future release that removes something again: refused, naming the symbol and the newest release."""
    symbols = [s for s in _exports("2026.2") if s != "urEnqueueKernelLaunchWithArgsExp"]
    with pytest.raises(errors.UnsupportedURRelease) as exc:
        detect_release(_fake_loader(tmp_path, symbols, "2026.3.0"))
    assert "2026.3.0" in exc.value.message and "lacks urEnqueueKernelLaunchWithArgsExp" in exc.value.message
    assert _api.NEWEST_RELEASE in exc.value.message and _api.NEWEST_RELEASE in exc.value.fix
    with pytest.raises(errors.UnsupportedURRelease, match="matches no supported release"):
        detect_release(_fake_loader(tmp_path / "bare", symbols))


def test_a_newer_release_with_the_newest_exports_runs_with_a_note(tmp_path):
    info = detect_release(_fake_loader(tmp_path, _exports("2026.2"), "2026.3.1"))
    assert (info.line, info.version) == ("2026.2", "2026.3.1")
    assert "newer than the newest release xpukit has verified (2026.2)" in info.note


def test_force_load_naming_a_missing_file_is_dropped(tmp_path, monkeypatch, caplog):
    """UR_ADAPTERS_FORCE_LOAD with a file that does not exist would leave zero adapters (2026.2)."""
    from xpukit.runtime.ur.loader import check_force_load

    present = tmp_path / "libur_adapter_opencl.so"
    present.write_bytes(b"")
    monkeypatch.setenv("UR_ADAPTERS_FORCE_LOAD", str(present))
    assert check_force_load() == "" and os.environ["UR_ADAPTERS_FORCE_LOAD"] == str(present)
    monkeypatch.setenv("UR_ADAPTERS_FORCE_LOAD", f"{present},{tmp_path / 'gone.so'}")
    assert check_force_load() and "UR_ADAPTERS_FORCE_LOAD" not in os.environ
    assert "gone.so" in caplog.text and "ONEAPI_DEVICE_SELECTOR" in caplog.text


def test_a_users_ocl_icd_filenames_is_kept_and_named_only_where_it_leaves_the_runtime_out(
    tmp_path, monkeypatch, caplog
):
    """The kit points OCL_ICD_FILENAMES at Intel's CPU runtime only when it is unset; a value of the
    user's is kept without a word (it may reach the CPU device another way), and named by the CPU
    device's error when it leaves the runtime out (icd_filenames_without)."""
    from xpukit.runtime.ur.loader import LoaderLocation, icd_filenames_without, setup_cpu_icd

    rt = tmp_path / "libintelocl.so"
    rt.write_bytes(b"")
    monkeypatch.setenv("XPUKIT_OPENCL_RT", str(rt))
    loc = LoaderLocation(tmp_path / "libur_loader.so", "pip")
    monkeypatch.delenv("OCL_ICD_FILENAMES", raising=False)
    monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
    assert setup_cpu_icd(loc) == rt.resolve() and os.environ["OCL_ICD_FILENAMES"] == str(rt.resolve())
    assert icd_filenames_without(rt.resolve()) == ""
    monkeypatch.setenv("OCL_ICD_FILENAMES", "/opt/vendor/libother.so")
    setup_cpu_icd(loc)
    assert os.environ["OCL_ICD_FILENAMES"] == "/opt/vendor/libother.so" and not caplog.text
    assert icd_filenames_without(rt.resolve()) == "/opt/vendor/libother.so"
    assert icd_filenames_without(None) == ""


@pytest.mark.parametrize(
    "named", ["a versioned symlink to it", "the symlink to its versioned file", "a hard link", "a byte-identical copy"]
)
def test_ocl_icd_filenames_naming_the_runtime_by_another_name_is_the_runtime(tmp_path, monkeypatch, caplog, named):
    """An OCL_ICD_FILENAMES entry that is Intel's CPU runtime under another name (a symlink, the
    versioned libintelocl.so.<version>: a hard link in the kit's image, a second file with the same
    bytes where pip installed the wheel) is that runtime. A different file under the same name is not."""
    from xpukit.runtime.ur.loader import LoaderLocation, icd_filenames_without, setup_cpu_icd

    lib = tmp_path / "lib"
    lib.mkdir()
    rt, versioned = lib / "libintelocl.so", lib / "libintelocl.so.2026.22.10.0"
    if named == "a versioned symlink to it":
        rt.write_bytes(b"runtime")
        versioned.symlink_to(rt.name)
        entry = versioned
    elif named == "the symlink to its versioned file":  # the kit resolves the runtime to the versioned file
        versioned.write_bytes(b"runtime")
        rt.symlink_to(versioned.name)
        entry = rt
    elif named == "a hard link":
        rt.write_bytes(b"runtime")
        os.link(rt, versioned)
        entry = versioned
    else:
        rt.write_bytes(b"runtime")
        versioned.write_bytes(b"runtime")
        entry = versioned
    monkeypatch.setenv("XPUKIT_OPENCL_RT", str(rt))
    monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
    loc = LoaderLocation(lib / "libur_loader.so", "pip")
    users = f"/opt/vendor/libother.so:{entry}"
    monkeypatch.setenv("OCL_ICD_FILENAMES", users)
    assert setup_cpu_icd(loc) == rt.resolve() and os.environ["OCL_ICD_FILENAMES"] == users
    assert icd_filenames_without(rt.resolve()) == "" and not caplog.text
    other = tmp_path / "other" / entry.name
    other.parent.mkdir()
    other.write_bytes(b"runtimE")  # the same size, other bytes
    monkeypatch.setenv("OCL_ICD_FILENAMES", f"/opt/vendor/libother.so:{other}")
    assert icd_filenames_without(rt.resolve()) == f"/opt/vendor/libother.so:{other}"


def test_a_library_that_is_not_a_ur_loader_is_refused_before_it_loads(tmp_path, monkeypatch):
    """A file that is not a UR loader, found by its exports (read, not loaded): refused naming the
    file, the variable or argument that named it, and what it lacks; a real loader's pair passes."""
    from xpukit.runtime.ur.loader import why_not_a_loader

    assert why_not_a_loader(_fake_loader(tmp_path / "ok", ["urLoaderInit", "urAdapterGet"])) == ""
    assert why_not_a_loader(_fake_loader(tmp_path / "zlib", ["deflate", "inflate"])) == "no urLoaderInit"
    assert why_not_a_loader(_fake_loader(tmp_path / "half", ["urLoaderInit"])) == "no urAdapterGet"
    # A library that calls the loader (an adapter, a binding) imports the names: not exports.
    gcc = shutil.which("gcc") or pytest.fail("this test builds a library with gcc (apt-get install gcc)")
    (tmp_path / "user.c").write_text("void urLoaderInit(void); void urAdapterGet(void);\n"
                                     "void f(void) { urLoaderInit(); urAdapterGet(); }\n")  # fmt: skip
    user = tmp_path / "libuser.so"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(user), str(tmp_path / "user.c")], check=True)
    assert why_not_a_loader(user) == "no urLoaderInit"
    text = tmp_path / "libur_loader.so"
    text.write_text("INPUT(-lz)\n")  # a linker script, as some distributions ship under .so names
    assert why_not_a_loader(text) == "not a 64-bit ELF library"

    zlib = _fake_loader(tmp_path / "env", ["deflate"])
    monkeypatch.setenv("XPUKIT_UR_LOADER", str(zlib))
    with pytest.raises(errors.LoaderNotFound) as env:
        find_loader()
    wants = f"the file XPUKIT_UR_LOADER names is not a Unified Runtime loader: {zlib} (no urLoaderInit)"
    assert env.value.message == wants
    assert env.value.fix == "point it at libur_loader.so.0 or unset it"
    with pytest.raises(errors.LoaderNotFound, match="the loader path passed is not a Unified Runtime loader"):
        find_loader(text)


def test_a_users_ocl_icd_vendors_is_not_doubled(tmp_path, monkeypatch, caplog):
    """With OCL_ICD_VENDORS set by the user (dpctl's setup, the dpnp image), the kit leaves
    OCL_ICD_FILENAMES unset: the ICD loader reads both, and the CPU platform would be listed twice."""
    from xpukit.runtime.ur.loader import LoaderLocation, setup_cpu_icd

    rt = tmp_path / "libintelocl.so"
    rt.write_bytes(b"")
    monkeypatch.setenv("XPUKIT_OPENCL_RT", str(rt))
    monkeypatch.delenv("OCL_ICD_FILENAMES", raising=False)
    monkeypatch.setenv("OCL_ICD_VENDORS", str(tmp_path / "vendors"))
    assert setup_cpu_icd(LoaderLocation(tmp_path / "libur_loader.so", "pip")) == rt.resolve()
    assert "OCL_ICD_FILENAMES" not in os.environ and not caplog.text


def test_find_loader_explicit_and_env(tmp_path, monkeypatch):
    f = _fake_loader(tmp_path, _exports("2025.2"), "2025.2.2")
    assert find_loader(tmp_path).path == f.resolve()
    monkeypatch.setenv("XPUKIT_UR_LOADER", str(f))
    assert find_loader().source == "env"
    monkeypatch.setenv("XPUKIT_UR_LOADER", str(tmp_path / "nope"))
    with pytest.raises(errors.LoaderNotFound, match="XPUKIT_UR_LOADER"):
        find_loader()


def _abi(shared=0, scratch=False):
    fn = SimpleNamespace(arg_names=["x", "y", "s", "n", "BLOCK"])
    md = SimpleNamespace(name="k", num_warps=4, threads_per_warp=16, shared=shared)
    if scratch:
        md.global_scratch_size, md.global_scratch_align = 0, 1
        md.profile_scratch_size, md.profile_scratch_align = 0, 1
    return LaunchABI.from_metadata(fn, {"x": "*fp32", "y": "i64", "s": "fp16", "n": "i32"}, md)


def test_abi_hidden_arguments_and_nd_range():
    assert _abi().local_index is None
    assert _abi(shared=256).local_index == 4
    abi = _abi(shared=64, scratch=True)
    assert [s[0] for s in abi.scratch] == ["global_scratch_size", "profile_scratch_size"]
    assert abi.local_index == 6
    assert abi.nd_range((5,)) == ((5 * 64, 1, 1), (64, 1, 1))
    assert abi.nd_range((2, 3, 4)) == ((128, 3, 4), (64, 1, 1))


def test_abi_launcher_kinds():
    """Each Triton type maps to one launcher kind; an integer the kernel casts to a pointer is checked."""
    assert _abi().kinds == "Pqei"
    fn = SimpleNamespace(arg_names=["a", "b", "c"])
    md = SimpleNamespace(name="k", num_warps=1, threads_per_warp=32, shared=0)
    abi = LaunchABI.from_metadata(fn, {"a": "i64", "b": "u64", "c": "fp64"}, md, addresses={0, 1})
    assert abi.kinds == "AAd"
    with pytest.raises(errors.KernelArgumentError, match="unsupported Triton argument type"):
        LaunchABI.from_metadata(fn, {"a": "fp8e5", "b": "i1", "c": "i1"}, md)


def test_alloc_table_bisects_live_ranges():
    """The Python twin of the compiled table (the image tests the compiled one against it)."""
    t = PyAllocTable()
    t.add(0x3000, 0x100)
    t.add(0x1000, 0x10)
    assert t.find(0x1000) == (0x1000, 0x10) and t.find(0x100F) == (0x1000, 0x10)
    assert t.find(0x1010) is None and t.find(0x2FFF) is None and t.find(0x30FF) == (0x3000, 0x100)
    generation = t.generation
    assert t.remove(0x1000) and not t.remove(0x1000)
    assert t.find(0x1000) is None and t.generation == generation + 2 and len(t) == 1
    with pytest.raises(ValueError):
        t.add(0x5000, 0)


def test_fast_key_is_at_least_as_fine_as_tritons_specialization():
    """Values Triton specializes differently (==1, %16, i32/i64/u64, bool vs int, constexpr types)
    never share a key."""
    t = PyAllocTable()
    modes = b"ssc"

    def key(*args, **kw):
        return py_fast_key(args, kw, modes, t)

    assert key(3, 2.0, 4) == key(5, 3.0, 4)
    distinct = [key(1, 2.0, 4), key(16, 2.0, 4), key(2**31, 2.0, 4), key(2**63, 2.0, 4), key(3, True, 4)]
    distinct += [
        key(3, 2.0, 4.0),
        key(3, 2.0, True),
        key(3, 2.0, 5),
        key(3, 2.0, 4, BLOCK=1),
        key(3, 2.0, 4, BLOCK=True),
    ]
    assert len({key(3, 2.0, 4), *distinct}) == len(distinct) + 1
    t.add(0x1000, 64)  # a small int inside a live allocation is an address: Triton's i64, not i32
    assert key(0x1000, 2.0, 4) != py_fast_key((0x1000, 2.0, 4), {}, modes, PyAllocTable())
    assert key([1], 2.0, 4) is None and key(3, 2.0, [4]) is None  # not covered: Triton's own path


def test_grid_normalisation():
    assert normalize_grid(4) == (4,)
    assert normalize_grid(lambda m: (m["n"] // 2, 3), {"n": 10}) == (5, 3)
    with pytest.raises(errors.KernelArgumentError):
        normalize_grid((1, 2, 3, 4))
    with pytest.raises(errors.KernelArgumentError):
        normalize_grid("ab")


def test_program_cache_checks(tmp_path):
    dev = SimpleNamespace(cache_key=lambda: "opencl|cpu|1.0|0x0", ur_release="2025.3.3")
    cache = ProgramCache(tmp_path)
    key = cache.key(dev, "abc")
    assert cache.key(dev, "abd") != key
    assert cache.read(key, dev, "abc") is None
    assert cache.write(key, dev, "abc", b"binary")
    assert cache.read(key, dev, "abc") == b"binary"
    with pytest.raises(errors.ProgramCacheCorrupt, match="device/driver/SPIR-V"):
        cache.read(key, dev, "other-spirv")
    (tmp_path / f"{key}.bin").write_bytes(b"binarY")
    with pytest.raises(errors.ProgramCacheCorrupt, match="checksum"):
        cache.read(key, dev, "abc")


def test_only_the_core_layer_calls_unified_runtime():
    """Triton on UR (xpukit.runtime.triton: the launch door, the driver, the caches) reaches UR only through
    xpukit.runtime.ur: no ctypes, no loaded-library attribute (``.lib``/``.raw``)."""
    import ast

    runtime = ROOT / "xpukit" / "runtime"
    files = sorted((runtime / "triton").glob("*.py"))
    assert {"launch.py", "program_cache.py", "driver.py"} <= {p.name for p in files}
    for path in files:
        name = path.relative_to(runtime)
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                modules = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any(m.split(".")[0] == "ctypes" for m in modules), f"{name}:{node.lineno} imports ctypes"
            if isinstance(node, ast.Attribute) and node.attr in ("lib", "raw"):
                raise AssertionError(f"{name}:{node.lineno} reaches the UR library directly (.{node.attr})")


def test_a_stale_compiled_launcher_is_set_aside_with_one_line(tmp_path):
    """A `_xpukit_launcher` of another ABI (an image from another commit under a mounted checkout)
    is not used, and the launch path says so once instead of running slower in silence. The stale
    module is a real module on the path carrying only an old ABI constant."""
    (tmp_path / "_xpukit_launcher.py").write_text("ABI = 1\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    env.pop("XPUKIT_PURE_PYTHON", None)
    code = "from xpukit.runtime.ur import launcher; print(launcher.COMPILED, launcher.IMPLEMENTATION)"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False pure Python"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "_xpukit_launcher is ABI 1" in lines[0] and "invoke build" in lines[0], lines
