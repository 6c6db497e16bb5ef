"""The report's builds run at once (ocloc per family beside Triton's next group, the 256-GRF build
started beside the default one when the last build spilled, zebins reused by SPIR-V hash): the
report is the serial path's, field for field, and no ocloc outlives the run or the watch.

Needs ocloc 26.27 and Triton: the image. The expected reports are the serial path's own output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.families import current_ocloc_or_skip
from tests.support.interrupts import interrupt_and_wait

SEVEN = "pvc,bmg,acm-g10,arl-h,mtl,lnl,ptl"
MATMUL = ROOT / "examples" / "matmul.py"
SMALL = "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,num_warps=4"  # spills on the FMA families only


@pytest.fixture(scope="module")
def triton_cache(tmp_path_factory):
    pytest.importorskip("triton")
    current_ocloc_or_skip()
    mp = pytest.MonkeyPatch()
    mp.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton-cache")))
    yield
    mp.undo()


def _children() -> set[int]:
    """The pids whose parent is this process (a zombie counts: it is still listed). In the whole
    suite other tests' helpers are children too: a test compares against what it started with."""
    mine = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            mine.append(int(stat.parent.name))
    return set(mine)


def _rows(report: dict) -> str:
    return json.dumps(report["rows"], sort_keys=True)


@pytest.mark.container
def test_concurrent_builds_give_the_serial_report_for_seven_families(triton_cache, monkeypatch):
    """Serial (one worker, nothing remembered) against concurrent twice: the second time the FMA
    families, which spilled, start their 256-GRF builds at once. Every row is the serial one's."""
    from tests.support.reports import report_of as build_report
    from xpukit.runtime.kernels import compile as compile_module

    kernel = f"{MATMUL}:matmul_kernel"
    before = _children()
    with monkeypatch.context() as serial:
        serial.setattr(compile_module, "NATIVE_MEMORY", compile_module.NativeMemory())
        serial.setattr(os, "cpu_count", lambda: 1)
        expected = build_report(kernel, [SEVEN], [SMALL], lines=True)
    memory = compile_module.NativeMemory()
    monkeypatch.setattr(compile_module, "NATIVE_MEMORY", memory)
    first = build_report(kernel, [SEVEN], [SMALL], lines=True)
    assert memory.counts["built"] == 7 and not memory.counts["speculation used"]
    memory.results.clear()  # build again, now with the history of which families retried
    second = build_report(kernel, [SEVEN], [SMALL], lines=True, fresh=True)
    retried = {r["target"] for r in expected["rows"] if r["grf_retry"]}
    assert retried, "the FMA families spill at this tile: nothing would be speculated"
    assert memory.counts["speculation used"] == len(retried) and memory.counts["built"] == 14
    assert _rows(first) == _rows(expected)
    assert _rows(second) == _rows(expected)
    again = build_report(kernel, [SEVEN], [SMALL], lines=True)  # same SPIR-V: every zebin reused
    assert memory.counts["reused"] == 7 and memory.counts["built"] == 14
    assert _rows(again) == _rows(expected)
    assert not _children() - before


@pytest.mark.container
def test_the_speculative_256_grf_build_is_used_only_when_the_rule_retries(triton_cache):
    """pvc at 64x64 does not spill: the 256-GRF build started beside it is killed and reaped, and
    the result is the serial one's (128 GRF, no flag). At the declared 128x128 tile it spills: the
    speculative build is the retry, byte for byte the zebin the serial retry writes."""
    from xpukit.runtime.kernels.compile import load_kernel
    from xpukit.runtime.offline import ocloc
    from xpukit.runtime.triton.tritonc import compile_kernel, parse_signature

    tool = ocloc.find_ocloc()
    before = _children()
    spec = load_kernel(f"{MATMUL}:matmul_kernel")
    signature = {k: v for k, v in parse_signature(spec.signature).items() if k not in spec.constexprs}
    for tile, spills in ((dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32), False), ({}, True)):
        spirv = compile_kernel(spec.fn, signature, {**spec.constexprs, **tile}, "pvc").asm["spv"]
        serial = tool.compile_spirv(spirv, "pvc")
        speculative = tool.compile_spirv(spirv, "pvc", speculate_large=True)
        assert serial.retried_large_grf is spills and serial.speculation == ""
        assert speculative.speculation == ("used" if spills else "discarded")
        assert speculative.zebin == serial.zebin
        assert (speculative.build_flags, speculative.retried_large_grf) == (serial.build_flags, spills)
        assert (ocloc.LARGE_GRF_FLAG in speculative.build_flags) is spills
        assert not ocloc._LIVE and not _children() - before


@pytest.fixture
def pausing_ocloc(tmp_path) -> tuple[Path, Path]:
    """An ocloc wrapper that, once ``pause`` exists, writes its pid into ``pids`` and waits before
    handing a compile over to the real ocloc (queries and disasm pass straight through)."""
    real = shutil.which("ocloc")
    assert real, "the image carries ocloc"
    pause, pids = tmp_path / "pause", tmp_path / "pids"
    pids.mkdir()
    wrapper = tmp_path / "bin" / "ocloc"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import os, sys, time\n"
        f"if 'compile' in sys.argv and '-file' in sys.argv and os.path.exists({str(pause)!r}):\n"
        f"    open(os.path.join({str(pids)!r}, str(os.getpid())), 'w').close()\n"
        "    time.sleep(300)\n"
        f"os.execv({real!r}, [{real!r}, *sys.argv[1:]])\n"
    )
    wrapper.chmod(0o755)
    return wrapper, pause


@pytest.mark.container
def test_ctrl_c_during_a_speculative_rebuild_leaves_no_ocloc(triton_cache, tmp_path, pausing_ocloc):
    """The watch on the declared tile (it spills on pvc); a save starts the default and the 256-GRF
    build at once (two ocloc processes); Ctrl-C then: the watch stops, both are killed and reaped."""
    wrapper, pause = pausing_ocloc
    kernel = tmp_path / "matmul.py"
    shutil.copy(MATMUL, kernel)
    env = {**os.environ, "XPUKIT_OCLOC": str(wrapper), "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "xpukit", "kernel-report", f"{kernel}:matmul_kernel", "--target", "pvc", "--watch"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if re.search(r"http://127\.0\.0\.1:\d+/", line):
                break
        assert proc.poll() is None, "".join(seen)[-2000:]
        pause.touch()
        kernel.write_text(MATMUL.read_text().replace("dtype=tl.float32)\n", "dtype=tl.float32) + 1.0\n", 1))
        pids = tmp_path / "pids"
        deadline = time.monotonic() + 300
        while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        started = [int(p.name) for p in pids.iterdir()]
        assert len(started) == 2, f"expected the default and the 256-GRF build at once, saw {len(started)}"
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    err = interrupt_and_wait(proc, timeout=60)
    assert proc.returncode == 0 and "xpukit: watch: stopped" in err and "Traceback" not in err, err[-2000:]
    left = [pid for pid in started if Path(f"/proc/{pid}").exists()]
    assert not left, f"ocloc processes {left} outlived the watch"
