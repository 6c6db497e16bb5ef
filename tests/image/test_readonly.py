"""Unwritable cache folders: Triton's and the kit's fall back to a private temporary folder with one
warning each, and kernels still run. The image's examples pass under ``docker run --read-only``
with only a tmpfs /tmp and no cache volume (Kubernetes' readOnlyRootFilesystem).
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.support import ROOT

TYPED_SIG = "x_ptr:*fp32,y_ptr:*fp32,scale:fp32,n:i32"


# kernel[grid](...) through the driver; says how many SPIR-V files were compiled into the fallback.
DRIVER_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import triton, triton.language as tl
    from xpukit.runtime import ur
    from xpukit.runtime.triton import activate

    @triton.jit
    def add_one(a, b, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(b + offs, tl.load(a + offs, mask=offs < n) + 1, mask=offs < n)

    with ur.Session("cpu") as s, activate(s):
        from xpukit.runtime.triton import DeviceArray
        x = s.from_numpy(np.arange(300, dtype=np.float32))
        y = s.alloc(1200)
        for _ in range(2):
            add_one[(3,)](DeviceArray(x, np.float32), DeviceArray(y, np.float32), 300, BLOCK=128)
            s.synchronize()
        assert (y.to_numpy(np.float32) == np.arange(300) + 1).all()
    from xpukit.runtime import scratch
    root = scratch._fallback_root
    print("RESULT OK; compiled into the fallback:", len(list(root.rglob("*.spv"))) if root else 0)
    """
)


def run_driver_script(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    script = tmp_path / "driver_run.py"  # a file: Triton reads the kernel's source back
    script.write_text(DRIVER_SCRIPT)
    full_env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(ROOT), **env)
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=full_env, timeout=600, check=False
    )


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("xpukit")]


@pytest.fixture
def fresh_fallback(monkeypatch) -> None:
    """A new private fallback root for this test: entries other tests left there cannot answer."""
    from xpukit.runtime import scratch

    monkeypatch.setattr(scratch, "_fallback_root", None)


def read_only_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    path.chmod(0o555)
    if os.access(path, os.W_OK):  # root writes through file modes
        pytest.skip("this user can write to a mode-555 folder (root); the image's user cannot")
    return path


def run_typed(session, kernel) -> None:
    n = 2500
    x = np.arange(n, dtype=np.float32)
    with session.from_numpy(x) as dx, session.empty(n, np.float32) as dy:
        kernel[(-(-n // 1024),)](dx, dy, np.float32(-2.0), n, session=session)
        session.finish()
        np.testing.assert_array_equal(dy.to_numpy(np.float32, n), x * np.float32(-2.0))


@pytest.mark.container
def test_read_only_triton_cache_falls_back_with_one_warning(session, tmp_path, monkeypatch, caplog, fresh_fallback):
    from tests.support.kernels import scale_raw, scale_typed
    from xpukit.runtime.triton.launch import TritonKernel

    cache = read_only_dir(tmp_path / "triton")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    caplog.clear()
    run_typed(session, TritonKernel(scale_typed, TYPED_SIG, {"BLOCK": 1024}, cache=False))
    # A second kernel and a recompile of the first: same fallback, nothing more said.
    raw_sig = "in_addr:i64,out_addr:i64,scale:fp32,n:i32"
    TritonKernel(scale_raw, raw_sig, {"BLOCK": 1024}, cache=False).bind(session).close()
    run_typed(session, TritonKernel(scale_typed, TYPED_SIG, {"BLOCK": 1024}, cache=False))
    found = warnings_of(caplog)
    assert len(found) == 1, found
    assert f"Triton cache {cache} is not writable" in found[0] and "this run uses" in found[0]
    assert list(cache.iterdir()) == []


@pytest.mark.container
def test_read_only_program_cache_falls_back_and_still_caches(session, tmp_path, monkeypatch, caplog, fresh_fallback):
    from tests.support.kernels import scale_typed
    from xpukit.runtime.triton.launch import ProgramCache, TritonKernel

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    directory = read_only_dir(tmp_path / "programs")
    caplog.clear()
    first, second = ProgramCache(directory), ProgramCache(directory)
    run_typed(session, TritonKernel(scale_typed, TYPED_SIG, {"BLOCK": 1024}, cache=first))
    run_typed(session, TritonKernel(scale_typed, TYPED_SIG, {"BLOCK": 1024}, cache=second))
    found = warnings_of(caplog)
    assert len(found) == 1, found
    assert f"program cache {directory} is not writable" in found[0]
    assert [e for e, _ in first.events] == ["miss", "store"]
    assert [e for e, _ in second.events] == ["hit"]  # served from the private fallback folder


@pytest.mark.container
def test_driver_run_with_both_caches_read_only_in_a_fresh_process(tmp_path):
    """kernel[grid](...) through the driver: two warnings (one per folder), exit 0, and the private
    folder is gone when the process ends."""
    pytest.importorskip("triton")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    triton_dir, xpukit_dir = read_only_dir(tmp_path / "t"), read_only_dir(tmp_path / "x")
    p = run_driver_script(
        tmp_path, TRITON_CACHE_DIR=str(triton_dir), XPUKIT_CACHE_DIR=str(xpukit_dir), TMPDIR=str(scratch)
    )
    assert p.returncode == 0, p.stderr
    assert "RESULT OK; compiled into the fallback: 1" in p.stdout
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "is not writable" in ln]
    assert len(lines) == 2, p.stderr
    assert any(str(triton_dir) in ln for ln in lines) and any(str(xpukit_dir) in ln for ln in lines)
    # One short line apart from the two paths (whose length is the user's).
    assert all(len(re.sub(r"/\S+", "PATH", ln)) <= 150 for ln in lines), lines
    assert not [d.name for d in scratch.iterdir() if d.name.startswith("xpukit-cache-")]


@pytest.mark.container
def test_read_only_prewarmed_triton_cache_is_still_read(tmp_path):
    """A cache filled earlier and then made read-only (one baked into an image): one warning, and the
    kernel comes from it; nothing is compiled into the fallback."""
    pytest.importorskip("triton")
    triton_dir = tmp_path / "t"
    warm = run_driver_script(tmp_path, TRITON_CACHE_DIR=str(triton_dir), XPUKIT_CACHE_DIR=str(tmp_path / "x1"))
    assert "compiled into the fallback: 0" in warm.stdout, warm.stderr
    for path in sorted(triton_dir.rglob("*"), reverse=True):
        path.chmod(0o555 if path.is_dir() else 0o444)
    read_only_dir(triton_dir.parent / "probe")  # skips where modes do not bind (root)
    triton_dir.chmod(0o555)
    p = run_driver_script(tmp_path, TRITON_CACHE_DIR=str(triton_dir), XPUKIT_CACHE_DIR=str(tmp_path / "x2"))
    assert p.returncode == 0, p.stderr
    assert "compiled into the fallback: 0" in p.stdout, p.stdout + p.stderr
    assert [ln for ln in p.stderr.splitlines() if ln.strip()] == [
        ln for ln in p.stderr.splitlines() if "Triton cache" in ln and "is not writable" in ln
    ]
    assert p.stderr.count("is not writable") == 1


@pytest.mark.container  # in the image: its user is not root, so mode 555 really denies writes
def test_no_writable_folder_at_all_is_one_clear_error(tmp_path, monkeypatch):
    """A read-only cache folder and a read-only temp dir: an XpukitError naming both and the fix."""
    import tempfile

    from xpukit.errors import XpukitError
    from xpukit.runtime import scratch

    cache, tmp = read_only_dir(tmp_path / "cache"), read_only_dir(tmp_path / "tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(scratch, "_fallback_root", None)
    with pytest.raises(XpukitError) as info:
        scratch.writable_cache_dir(cache, "Triton cache")
    line = info.value.one_line()
    assert str(cache) in line and str(tmp) in line and "--tmpfs /tmp" in line
    assert len(line) <= 400
