"""The examples refuse bad sizes in one line with exit 2 (argparse's usage error), before any device
work: a negative size used to reach numpy and end as its ValueError."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from xpukit.errors import EXIT_USAGE
from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.container


@pytest.mark.parametrize(
    ("script", "args", "wants"),
    [
        ("tutorial_01_vector_add.py", ["--size", "-5"], "--size must be >= 0"),
        ("tutorial_02_fused_softmax.py", ["--rows", "0"], "--rows and --cols must be >= 1"),
        ("tutorial_02_fused_softmax.py", ["--cols", "-3"], "--rows and --cols must be >= 1"),
        # a MemoryError from numpy before; and past 2**31 the kernels' 32-bit offsets would wrap
        ("xpu_triton_ur.py", ["--n", str(2**31)], "32-bit offsets; pass a smaller --n"),
        ("xpu_triton_ur.py", ["--n", str(2**31 - 1)], "GiB; pass a smaller --n"),
    ],
)
def test_examples_refuse_bad_sizes(script, args, wants):
    if wants.startswith("GiB") and os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") >= 20 * (2**31 - 1):
        pytest.skip("this machine has the memory for the largest --n: the demo would run it")
    p = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / script), *args, "--device", "cpu"],
                       capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    assert p.returncode == EXIT_USAGE and p.stderr.strip().splitlines()[-1].endswith(wants), p.stderr
    assert "device:" not in p.stdout and "Traceback" not in p.stderr


def test_the_dpnp_example_without_dpnp_names_the_command_that_has_it():
    """Where dpnp is not installed (the default image), the dpnp example stops in one line, exit 2,
    naming the whole command that runs it in the dpnp image (before: one that led back here)."""
    try:
        import dpnp  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("dpnp is installed here: the example runs (tests/image/test_dpnp.py, CI's dpnp example)")
    p = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / "dpnp_triton.py")],
                       capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "dpnp is not installed here" in lines[0], p.stderr
    assert "invoke demo-ur --with dpnp --example dpnp" in lines[0] and "Traceback" not in p.stderr


@pytest.mark.parametrize("how", ["example", "invoke"])
@pytest.mark.parametrize("icd", ["", "OCL_ICD_FILENAMES", "OCL_ICD_VENDORS"])
def test_the_ur_demo_with_a_loader_that_is_not_one_says_so_in_one_line(tmp_path, how, icd):
    """XPUKIT_UR_LOADER naming zlib: the UR demo, run as `invoke demo-ur --where host` runs it (and
    through invoke where the host has it), ends in one line of at most 200 characters naming the
    problem and the fix, whatever the OpenCL environment. Before: an OSError about libsvml.so
    (Intel's CPU runtime present), or a 300-character UnsupportedURRelease."""
    pytest.importorskip("triton")
    from tests.support import system_libz

    libz = system_libz()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OCL_ICD_")}
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env.update(XPUKIT_UR_LOADER=str(libz), PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1")
    if icd == "OCL_ICD_FILENAMES":
        env[icd] = str(tmp_path / "libintelocl.so")
    elif icd == "OCL_ICD_VENDORS":
        (tmp_path / "intel.icd").write_text("libintelocl.so\n")
        env[icd] = str(tmp_path)
    if how == "invoke":
        pytest.importorskip("invoke", reason="the image has no invoke: the example alone runs here")
        cmd = [sys.executable, "-m", "invoke", "-r", str(REPO_ROOT), "demo-ur", "--where", "host", "--device", "cpu"]
    else:
        cmd = [sys.executable, str(REPO_ROOT / "examples" / "xpu_triton_ur.py"), "--device", "cpu"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=300)
    last = (p.stderr.strip().splitlines() or [""])[-1]
    assert p.returncode != 0 and len(last) <= 200, p.stderr
    assert "XPUKIT_UR_LOADER names is not a Unified Runtime loader" in last and f"{libz} (no urLoaderInit)" in last
    assert last.endswith("(fix: point it at libur_loader.so.0 or unset it)"), last
    assert "Traceback" not in p.stderr and "libsvml" not in p.stderr and "is not in it" not in p.stderr
