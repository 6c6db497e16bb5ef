"""xpukit.runtime.offline.ocloc: version, flag dialect, device list, SPIR-V -> zebin, spill retry, errors.

Unit tests drive a fake ``ocloc`` (a small shell script written to tmp_path) so the dialect and
retry logic are checked where no ocloc is installed; container tests use the real one.
"""

from __future__ import annotations

import shlex
import shutil
import stat
from pathlib import Path

import pytest

from xpukit.errors import XpukitError
from xpukit.runtime.offline import ocloc as ocloc_mod
from xpukit.runtime.offline.ocloc import (
    LARGE_GRF_FLAG,
    Ocloc,
    OclocError,
    UnsupportedDeviceError,
    find_ocloc,
    parse_device_list,
)

# The device lines of ocloc 26.27's ``compile --help`` (Debian forky's intel-ocloc 26.27.39122.14-1),
# shortened: the main list, then the deprecated names ocloc still accepts.
HELP_26_27 = (
    "  -device <device_type>                     Target device.\n"
    "                                            <device_type> can be: tgl, tgllp, acm-g10, dg2-g10, dg2, "
    "pvc, mtl-u, mtl, mtl-h, arl-h, bmg-g21, bmg,\n"
    "                                            lnl-m, ptl-h, ptl, xe2, xe-hpc, ip version  or hexadecimal value "
    "with 0x prefix\n"
    "                                            - can be single or multiple target devices.\n"
    "                                            Deprecated notation that is still supported:\n"
    "                                            <device_type> can be: arl, lnl\n"
    "                                            - can be single target device.\n"
    "\n"
    "  -device_options <device_type> <options>   Optional OpenCL C compilation options\n"
    "                                            <device_type> can be product acronym or version passed in -device\n"
)

FAKE = r"""#!/bin/sh
# Fake ocloc for tests. Records each call, acts like ocloc @VER@ (writes exactly the -o file).
echo "$@" >> "$(dirname "$0")/calls.log"
if [ "$1" = "query" ] && [ "$2" = "OCL_DRIVER_VERSION" ]; then echo "@VER@ " > OCL_DRIVER_VERSION; exit 0; fi
if [ "$1" = "query" ] && [ "$2" = "CL_DEVICE_EXTENSIONS" ]; then
  case "$4" in
    xe9) echo "cl_khr_fp64 cl_intel_subgroup_matrix_multiply_accumulate " > CL_DEVICE_EXTENSIONS; exit 0;;
    *) echo "Could not determine device target: $4"; exit 1;;
  esac
fi
if [ "$2" = "--help" ]; then
  echo "  -device <device_type>  Target device."
  echo "                         <device_type> can be: pvc, acm-g10, bmg, mtl-h, xe9, ip version  or hexadecimal value"
  echo "                         - can be single or multiple target devices."
  echo "                         Deprecated notation that is still supported:"
  echo "                         <device_type> can be: lnl"
  echo "                         - can be single target device."
  exit 0
fi
out=""; opts=""; prev=""
for a in "$@"; do
  case "$prev" in -o) out="$a";; -options) opts="$a";; esac
  prev="$a"
done
if [ -n "$FAKE_OCLOC_FAIL" ]; then echo "error: fake failure for $out"; exit 3; fi
case "$opts" in
  *256-GRF*) echo "Build succeeded.";;
  *) if [ -n "$FAKE_OCLOC_SPILL" ]; then
       echo "warning: kernel k compiled SIMD16 allocated 128 regs and spilled around 217"; fi
     echo "Build succeeded.";;
esac
printf "ZEBIN-$opts" > "$out"
exit 0
"""


def make_fake(tmp_path: Path, version: str) -> Path:
    folder = tmp_path / f"fake-{version}"
    folder.mkdir()
    script = folder / "ocloc"
    script.write_text(FAKE.replace("@VER@", version))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.mark.unit
def test_parse_device_list_reads_the_deprecated_line():
    devices = parse_device_list(HELP_26_27)
    assert devices[:3] == ["tgl", "tgllp", "acm-g10"] and devices[-2:] == ["arl", "lnl"]
    assert {"mtl-h", "arl-h", "bmg", "lnl-m", "ptl-h", "ptl", "xe2", "xe-hpc"} <= set(devices)
    assert "ip version" not in devices and len(devices) == len(set(devices))
    assert parse_device_list("no device list here") == []


@pytest.mark.unit
def test_command_is_current_ocloc_dialect(tmp_path):
    spv = tmp_path / "k.spv"
    cmd = Ocloc("/x/ocloc", "26.27.39122").command(spv, "pvc", "-cl-fast", tmp_path / "k.zebin")
    assert cmd[cmd.index("-o") + 1] == str(tmp_path / "k.zebin")
    assert cmd[cmd.index("-device") + 1] == "pvc" and cmd[cmd.index("-options") + 1] == "-cl-fast"
    assert "-output" not in cmd and "--format" not in cmd
    assert "-options" not in Ocloc("/x/ocloc", "26.27.39122").command(spv, "pvc", "", tmp_path / "k.zebin")


@pytest.mark.unit
def test_fake_ocloc_compile_and_spill_retry(tmp_path, monkeypatch):
    tool = find_ocloc(str(make_fake(tmp_path, "26.27.39122")))
    assert tool.version == "26.27.39122"
    assert tool.devices == {"pvc", "acm-g10", "bmg", "mtl-h", "xe9", "lnl"}
    plain = tool.compile_spirv(b"\x03\x02\x23\x07", "pvc", "-cl-x")
    assert plain.zebin == b"ZEBIN--cl-x" and not plain.retried_large_grf
    monkeypatch.setenv("FAKE_OCLOC_SPILL", "1")
    spilled = tool.compile_spirv(b"\x03\x02\x23\x07", "pvc", "-cl-x")
    assert spilled.retried_large_grf
    assert spilled.build_flags == f"-cl-x {LARGE_GRF_FLAG}"
    assert spilled.zebin == f"ZEBIN--cl-x {LARGE_GRF_FLAG}".encode()
    assert "spilled" in spilled.log
    calls = (tmp_path / "fake-26.27.39122" / "calls.log").read_text().splitlines()
    compiles = [c for c in calls if c.startswith("compile -file")]
    assert len(compiles) == 3  # one plain build, then exactly one retry (not a loop)
    # Already at 256 GRF: no retry even though the fake would not spill anyway.
    again = tool.compile_spirv(b"\x03\x02\x23\x07", "pvc", LARGE_GRF_FLAG)
    assert not again.retried_large_grf


@pytest.mark.unit
def test_ocloc_22_is_refused_in_one_line(tmp_path):
    tool = find_ocloc(str(make_fake(tmp_path, "22.43.24595")))
    for call in (lambda: tool.compile_spirv(b"\x03\x02\x23\x07", "pvc"), lambda: tool.target_preset("pvc")):
        with pytest.raises(OclocError, match=r"ocloc 22\.43\.24595 .* too old") as info:
            call()
        assert "XPUKIT_OCLOC" in info.value.fix and "\n" not in info.value.one_line()


@pytest.mark.unit
def test_fake_ocloc_failure_carries_log_and_repro(tmp_path, monkeypatch):
    tool = find_ocloc(str(make_fake(tmp_path, "26.27.39122")))
    monkeypatch.setenv("FAKE_OCLOC_FAIL", "1")
    with pytest.raises(OclocError) as info:
        tool.compile_spirv(b"\x03\x02\x23\x07", "pvc")
    err = info.value
    assert "fake failure" in err.log and "fake failure" in str(err)
    assert "exit code 3" in str(err)
    assert "repro:" in err.one_line() and "\n" not in err.one_line()
    # The repro is one shell line and the input it names is kept.
    spv = Path(shlex.split(err.repro.split("&&", 1)[1])[3])
    assert spv.read_bytes() == b"\x03\x02\x23\x07"
    shutil.rmtree(spv.parent)


@pytest.mark.unit
def test_fake_ocloc_targets_aliases_and_other_devices(tmp_path):
    tool = find_ocloc(str(make_fake(tmp_path, "26.27.39122")))
    assert tool.require_target("bmg") == tool.require_target("bmg-g21") == "bmg"
    assert tool.require_target("mtl") == "mtl-h"  # the kit's mtl is mtl-h (SYCL's intel_gpu_mtl_h)
    # A device outside the targets table: its properties from ocloc's extension query.
    other = tool.target_preset("xe9")
    assert (other.ocloc_device, other.architecture) == ("xe9", 0)
    assert other.has_fp64 and other.has_subgroup_matrix_multiply_accumulate and not other.has_subgroup_2d_block_io
    with pytest.raises(UnsupportedDeviceError, match=r"ocloc 26\.27\.39122 .* cannot target 'ptl'") as info:
        tool.require_target("ptl")  # a kit target whose device this (fake) ocloc lacks
    assert "pvc" in info.value.fix
    with pytest.raises(UnsupportedDeviceError, match="cannot target device 'ptl-h'"):
        tool.compile_spirv(b"", "ptl-h")
    with pytest.raises(UnsupportedDeviceError, match="cannot target 'gpu9000'") as info:
        tool.require_target("gpu9000")
    assert "ocloc compile --help" in info.value.fix
    with pytest.raises(XpukitError, match="no zebin"):
        tool.require_target("cpu")


@pytest.mark.unit
def test_missing_ocloc_is_an_error(tmp_path):
    with pytest.raises(OclocError, match="ocloc not found"):
        find_ocloc(str(tmp_path / "no-such-ocloc"))


# --- real ocloc -----------------------------------------------------------------------------------


@pytest.mark.unit
def test_a_build_asked_after_ctrl_c_never_starts_its_ocloc(tmp_path):
    """The race the CI run of 2026-12-03 hit (tests/image/test_interrupts.py timed out): Ctrl-C
    killed the ocloc runs that had started, while a worker thread had not yet started its own; it
    then started it after the kill and the interrupted run waited for it. After ``stop_builds`` no
    new ocloc process starts, until ``builds_may_run`` clears the mark. The command is a real
    process that would leave a file behind."""
    marker = tmp_path / "started"
    cmd = ["sh", "-c", f"touch {marker}"]
    try:
        ocloc_mod.stop_builds()
        with pytest.raises(ocloc_mod.BuildStopped, match="not started"):
            ocloc_mod._run_stoppable(cmd, tmp_path)
        assert not marker.exists()
    finally:
        ocloc_mod.builds_may_run()
    assert ocloc_mod._run_stoppable(cmd, tmp_path).returncode == 0 and marker.exists()


@pytest.mark.unit
def test_the_speculative_wait_wakes_when_the_child_exits_and_times_out_when_it_does_not():
    """_wait_exactly: a child that exits is reaped (returncode set, no zombie), one that runs past the
    timeout raises TimeoutExpired and is still running (the caller cancels it)."""
    import subprocess
    import time

    quick = subprocess.Popen(["sh", "-c", "exit 3"])
    started = time.monotonic()
    ocloc_mod._wait_exactly(quick, 30)
    assert quick.returncode == 3 and time.monotonic() - started < 10
    slow = subprocess.Popen(["sleep", "30"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            ocloc_mod._wait_exactly(slow, 0.2)
        assert slow.poll() is None
    finally:
        slow.kill()
        slow.wait()
