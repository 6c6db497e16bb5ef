"""``kernel-report --launched-by SCRIPT`` as a kernel author meets it: a script with two
specializations, one that fails before or after launching, one that never ends, a kernel name the
file lacks, options the launches make meaningless. The scripts run on the CPU device through the
kit's own launch path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xpukit.errors import XpukitError
from xpukit.runtime.kernels import kernel_report
from xpukit.runtime.offline.report_model import ReportOptions

ADD = """import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride, mask=mask)
    tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""

# Launches add_kernel twice (n divisible by 16 with a unit stride, then neither), then does what
# its first argument says: raise, exit 3, or hang (writing its pid to its second argument first).
SCRIPT = """import os, sys, time
import numpy as np
import triton
from xpukit.runtime import ur
from xpukit.runtime.triton import activate, empty, from_numpy
from add import add_kernel

mode = sys.argv[1] if len(sys.argv) > 1 else ""
if mode == "raise-first":
    raise ValueError("no data file")
print("SCRIPT STARTED", flush=True)
with ur.Session("auto") as s, activate(s):
    for n, stride in ((1024, 1), (1000, 2)):
        with from_numpy(np.ones(n * stride, np.float32)) as x, from_numpy(np.ones(n, np.float32)) as y, \\
                empty((n,), np.float32) as out:
            add_kernel[(triton.cdiv(n, 128),)](x, y, out, n, stride, BLOCK=128)
            s.synchronize()
if mode == "raise":
    raise RuntimeError("after launching")
if mode == "exit3":
    sys.exit(3)
if mode == "hang":
    open(sys.argv[2], "w").write(str(os.getpid()))
    time.sleep(3600)
"""


@pytest.fixture
def files(env: Path) -> tuple[Path, Path]:
    (env / "add.py").write_text(ADD)
    (env / "run.py").write_text(SCRIPT)
    return env / "add.py", env / "run.py"


@pytest.mark.container
def test_two_specializations_are_launch_1_and_launch_2(files):
    kernel, script = files
    launches = kernel_report.launch_configs(f"{kernel}:add_kernel", script, [])
    assert [c.label for c in launches] == ["launch 1", "launch 2"]
    first, second = (c.specialization for c in launches)
    assert first is not None and second is not None
    assert first.divisible_16 == ("n",) and first.equal_1 == ("stride",)
    assert second.divisible_16 == () and second.equal_1 == ()
    assert first.aligned_16 == second.aligned_16 == ("x_ptr", "y_ptr", "out_ptr")


@pytest.mark.container
def test_the_running_line_names_the_script_as_the_user_gave_it(files, capfd):
    """In the image the script's path is /workspace/...; the line shows the path the user typed
    (and no double space when there are no script arguments)."""
    kernel, script = files
    kernel_report.launch_configs(f"{kernel}:add_kernel", script, [], shown="examples/run.py")
    err = capfd.readouterr().err
    assert "xpukit: running examples/run.py to record its launches of add_kernel" in err
    assert str(script) not in err


@pytest.mark.container
def test_a_script_that_raises_after_launching_reports_its_launches_with_a_warning(files, capfd):
    kernel, script = files
    launches = kernel_report.launch_configs(f"{kernel}:add_kernel", script, ["raise"])
    assert [c.label for c in launches] == ["launch 1", "launch 2"]
    err = capfd.readouterr().err
    assert "Traceback" not in err
    assert "warning" in err and "RuntimeError: after launching" in err and "run.py:" in err


@pytest.mark.container
@pytest.mark.parametrize("mode", ["raise-first", "exit3-first"])
def test_a_script_that_fails_before_launching_is_one_line(files, capfd, mode):
    kernel, script = files
    if mode == "exit3-first":
        script.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(XpukitError) as caught:
        kernel_report.launch_configs(f"{kernel}:add_kernel", script, [mode])
    line = caught.value.one_line()
    assert "\n" not in line and "launched no add_kernel" in line
    assert ("ValueError: no data file" in line and "run.py:10" in line) if mode == "raise-first" else "exit 3" in line
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.container
def test_a_kernel_the_file_lacks_fails_before_the_script_runs(files, capfd):
    kernel, script = files
    options = ReportOptions(f"{kernel}:mul_kernel", targets=("pvc",), launched_by=str(script))
    with pytest.raises(XpukitError, match="has no function 'mul_kernel'"):
        kernel_report.run_kernel_report(options)
    assert "SCRIPT STARTED" not in capfd.readouterr().out + capfd.readouterr().err


@pytest.mark.container
@pytest.mark.parametrize(
    ("change", "flag"),
    [
        ({"configs": ("BLOCK=64",)}, "--config"),
        ({"signature": "x_ptr:*fp32:16,y_ptr:*fp32,out_ptr:*fp32,n:i32,stride:i32"}, "--signature"),
        ({"constexprs": ("BLOCK=64",)}, "--constexpr"),
        ({"baseline_config": "BLOCK=64"}, "--baseline-config"),
    ],
)
def test_options_the_launches_replace_are_refused_in_one_line(files, capfd, change, flag):
    """The launches give the types, hints, constexprs and options: a --signature or --constexpr was
    dropped without a word, and a --baseline-config compiled with no types (an error in every row)."""
    kernel, script = files
    options = ReportOptions(f"{kernel}:add_kernel", targets=("pvc",), launched_by=str(script), **change)
    with pytest.raises(XpukitError, match=f"--launched-by and {flag} both given") as caught:
        kernel_report.run_kernel_report(options)
    assert f"drop {flag}" in caught.value.one_line()
    assert "SCRIPT STARTED" not in capfd.readouterr().out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.container
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_a_report_stopped_while_the_script_hangs_takes_the_script_with_it(files, env, how):
    """No timeout (a script may run long): Ctrl-C stops it, quietly, and so does a SIGTERM (or a
    SIGKILL) of the report, which used to leave the script running on its own."""
    kernel, script = files
    pid_file = env / "pid"
    command = [sys.executable, "-m", "xpukit", "kernel-report", f"{kernel}:add_kernel", "--target", "pvc"]
    command += ["--launched-by", str(script), "--script-args", f"hang {pid_file}"]
    child_env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(command, env=child_env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not pid_file.is_file() or not pid_file.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "the script never reached its hang"
            time.sleep(0.2)
        script_pid = int(pid_file.read_text())
        if how == "SIGINT":  # Ctrl-C: the terminal signals the whole foreground group
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        for _ in range(50):
            if not _alive(script_pid):
                break
            time.sleep(0.1)
        assert not _alive(script_pid), "the script outlived the report"
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
