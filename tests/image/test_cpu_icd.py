"""The UR demo with the user's own OCL_ICD_FILENAMES: no word while the CPU device is found, one line
naming the variable and Intel's CPU runtime when it is not.

Before, a value naming the versioned `libintelocl.so.<version>` that pip writes as a second file
(byte-identical, not a link) got "Intel's CPU runtime ... is not in it (add it there to see the CPU
device)" on a run that then found and used the CPU device."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.container


def run_demo(ocl_icd_filenames: str) -> subprocess.CompletedProcess:
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OCL_ICD_")}
    env.update(OCL_ICD_FILENAMES=ocl_icd_filenames, PYTHONPATH=str(REPO_ROOT), PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, str(REPO_ROOT / "examples" / "xpu_triton_ur.py"), "--device", "cpu", "--n", "4096"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=300)


@pytest.fixture
def runtime():
    from xpukit.runtime.ur.loader import find_cpu_opencl_runtime, find_loader

    found = find_cpu_opencl_runtime(find_loader().path)
    if found is None:
        pytest.skip("Intel's CPU OpenCL runtime (intel-opencl-rt) is not installed here")
    return found


def test_a_byte_identical_copy_of_the_runtime_finds_the_device_and_says_nothing(tmp_path, runtime):
    """The wheel as pip installs it: libintelocl.so.<version> a second file with the same bytes beside
    the runtime's other files (here: its folder linked file by file, the versioned name copied)."""
    versioned = next(runtime.parent.glob("libintelocl.so.*[0-9]"), None) or pytest.skip("no versioned runtime here")
    for item in runtime.parent.iterdir():
        (tmp_path / item.name).symlink_to(item)
    (tmp_path / versioned.name).unlink()
    shutil.copyfile(versioned, tmp_path / versioned.name)
    assert not os.path.samefile(tmp_path / versioned.name, runtime)
    p = run_demo(str(tmp_path / versioned.name))
    assert p.returncode == 0 and "[cpu, opencl]" in p.stdout, p.stdout + p.stderr
    assert "OCL_ICD_FILENAMES" not in p.stderr and "not in it" not in p.stderr, p.stderr


def test_a_value_that_leaves_the_runtime_out_is_named_when_the_device_is_missing(runtime):
    p = run_demo("/nonexistent/libvendor.so")
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "no CPU device found through UR" in lines[0] and "Traceback" not in p.stderr, lines[0]
    assert lines[0].endswith(
        f"(fix: your OCL_ICD_FILENAMES leaves out Intel's CPU runtime: add {runtime} to it, or unset it)"
    ), lines[0]
