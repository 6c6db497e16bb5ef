"""Ctrl-C and kills: the demo and ``python -m xpukit`` stop with one line and exit 130, and ocloc's
scratch folders never outlive their run (stale ones from a killed run go at the next run).

To interrupt a real ocloc build at a known moment, XPUKIT_OCLOC points at a small wrapper that
waits before handing a build over to the real ocloc (queries pass straight through): the build
itself is still the real ocloc's.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.interrupts import PREFIX, interrupt_and_wait

DEMO = ROOT / "examples" / "xpu_triton_ur.py"
KERNELS = ROOT / "examples" / "kernels.py"


# --- the stale sweep, on plain folders --------------------------------------------------------


# --- the demo ---------------------------------------------------------------------------------


def start(cmd: list[str], env: dict[str, str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kwargs)


def wait_until_mapped(p: subprocess.Popen, fragment: str, timeout: float = 60) -> None:
    """Until the child has a shared object whose path contains ``fragment`` mapped (its import has
    begun): a delay counted from here lands in the program's imports, not in the interpreter's own
    start-up, which no program can guard (a SIGINT inside `site` is Python's fatal error)."""
    maps = Path(f"/proc/{p.pid}/maps")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and p.poll() is None:
        try:
            if fragment in maps.read_text():
                return
        except OSError:
            pass
        time.sleep(0.005)
    raise AssertionError(f"the child never mapped {fragment!r} (exit {p.poll()})")


def demo_env(tmp_path: Path) -> dict[str, str]:
    return dict(
        os.environ,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        TRITON_CACHE_DIR=str(tmp_path / "triton"),
        XPUKIT_CACHE_DIR=str(tmp_path / "xpukit"),
    )


def assert_one_line_130(p: subprocess.Popen, stderr: str, line: str) -> None:
    assert p.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert [ln for ln in stderr.splitlines() if ln.strip()] == [line], stderr


@pytest.mark.container
@pytest.mark.parametrize("delay", [0.3, 2.5])
@pytest.mark.parametrize("launch", ["triton", "explicit"])
def test_ctrl_c_in_the_demo_while_it_works(tmp_path, launch, delay):
    """SIGINT once the demo has its device (while it compiles, then while it launches): one line,
    exit 130, no traceback, and no crash from freeing buffers under a running kernel."""
    pytest.importorskip("triton")
    cmd = [sys.executable, str(DEMO), "--device", "cpu", "--n", "65536", "--iters", "1000000", "--launch", launch]
    p = start(cmd, demo_env(tmp_path))
    try:
        line = p.stdout.readline()
        if not line.startswith("device:"):
            p.kill()
            pytest.fail(f"the demo did not start: {line}{p.communicate(timeout=60)[1]}")
        while not line.startswith("versions:"):
            line = p.stdout.readline()
            assert line, p.communicate(timeout=60)[1]
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        _, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert_one_line_130(p, stderr, "interrupted")


@pytest.mark.container
@pytest.mark.parametrize("delay", [0.05, 0.1, 0.15, 0.25])
def test_ctrl_c_while_the_demo_starts_up(tmp_path, delay):
    """SIGINT early, while Python imports numpy and Triton (an interrupt inside numpy's C init
    used to become an ImportError, or be lost entirely and the demo ran to the end): the same one
    line and 130 at every moment. The delay counts from numpy's first shared object being mapped:
    counted from the process start, a loaded CI machine put 0.05 s inside the interpreter's own
    start-up (its `site` import), before any line of the demo runs."""
    pytest.importorskip("triton")
    cmd = [sys.executable, str(DEMO), "--device", "cpu", "--n", "4096", "--iters", "1000000"]
    p = start(cmd, demo_env(tmp_path))
    wait_until_mapped(p, "numpy")
    time.sleep(delay)
    assert_one_line_130(p, interrupt_and_wait(p), "interrupted")


# --- python -m xpukit compile, with ocloc mid-build ---------------------------------------------


@pytest.fixture
def slow_ocloc(tmp_path) -> Path:
    """A wrapper that says (by a file in its working folder) that a build has started, waits, then
    runs the real ocloc."""
    real = shutil.which("ocloc")
    if real is None:
        from tests.support.runtime_required import skip_unless_in_image

        skip_unless_in_image("ocloc is not installed here")
    wrapper = tmp_path / "bin" / "ocloc"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import os, sys, time\n"
        "if '-file' in sys.argv:\n"
        "    open('build-started', 'w').close()\n"
        "    time.sleep(120)\n"
        f"os.execv({real!r}, [{real!r}, *sys.argv[1:]])\n"
    )
    wrapper.chmod(0o755)
    return wrapper


def compile_env(tmp_path: Path, scratch: Path, ocloc: Path | None = None) -> dict[str, str]:
    env = dict(
        os.environ,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=str(ROOT),
        TMPDIR=str(scratch),
        TRITON_CACHE_DIR=str(tmp_path / "triton"),  # fresh: the kernel really goes through ocloc
    )
    if ocloc is not None:
        env["XPUKIT_OCLOC"] = str(ocloc)
    return env


def compile_cmd(out: Path, targets: str = "pvc") -> list[str]:
    kernel = f"{KERNELS}:scale_kernel"
    return [sys.executable, "-m", "xpukit", "compile", kernel, "--target", targets, "--out", str(out)]


def wait_for_build(scratch: Path, p: subprocess.Popen, timeout: float = 300) -> Path:
    """The scratch folder of ``p``'s ocloc build once the (slow) ocloc has started on it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for folder in scratch.glob(f"{PREFIX}{p.pid}-*"):
            if (folder / "build-started").exists():
                return folder
        if p.poll() is not None:
            pytest.fail(f"compile ended early: {p.communicate()[1]}")
        time.sleep(0.05)
    pytest.fail("ocloc never started")


@pytest.mark.container
@pytest.mark.parametrize("targets", ["pvc", "pvc,bmg,lnl"])
def test_ctrl_c_during_ocloc_removes_its_folder(tmp_path, slow_ocloc, targets):
    """One target builds in the main thread; several build in worker threads, whose ocloc runs the
    interrupted main thread kills: either way one line, exit 130, no folder left."""
    pytest.importorskip("triton")
    scratch, out = tmp_path / "scratch", tmp_path / "out"
    scratch.mkdir()
    p = start(compile_cmd(out, targets), compile_env(tmp_path, scratch, slow_ocloc), cwd=tmp_path)
    try:
        folder = wait_for_build(scratch, p)
        p.send_signal(signal.SIGINT)
        _, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert_one_line_130(p, stderr, "xpukit: interrupted")
    assert not folder.exists()
    assert not list(scratch.glob(f"{PREFIX}*"))
    assert not out.exists() or not [f for f in out.rglob("*") if f.is_file()]


@pytest.mark.container
def test_killed_run_folder_is_removed_by_the_next_run_and_a_live_one_is_not(tmp_path, slow_ocloc):
    """SIGKILL leaves the folder behind; the next run removes it, but never that of a run still going."""
    pytest.importorskip("triton")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = compile_env(tmp_path, scratch, slow_ocloc)
    killed = start(compile_cmd(tmp_path / "out1"), env, cwd=tmp_path, start_new_session=True)
    running = start(compile_cmd(tmp_path / "out2"), env, cwd=tmp_path, start_new_session=True)
    try:
        stale = wait_for_build(scratch, killed)
        live = wait_for_build(scratch, running)
        os.killpg(killed.pid, signal.SIGKILL)  # the run and its ocloc, as the OOM killer would
        killed.wait(timeout=60)
        assert stale.exists()
        # The next run (real ocloc, no wait) sweeps the dead run's folder and leaves the live one.
        p = subprocess.run(
            compile_cmd(tmp_path / "out3"),
            env=compile_env(tmp_path, scratch),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            cwd=tmp_path,
        )
        assert p.returncode == 0, p.stderr
        assert not stale.exists()
        assert live.exists()
        assert (tmp_path / "out3" / "pvc" / "scale_kernel.zebin").read_bytes()[:4] == b"\x7fELF"
    finally:
        for proc in (killed, running):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
