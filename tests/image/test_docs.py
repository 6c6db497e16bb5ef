"""README.md and docs/*.md against the code: every `invoke ...` line they show runs, every setting.

The tests that run inside the image; the others are in tests/host/test_docs.py.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from tests.support.docs import assert_sample_matches, normalise, sample_after
from xpukit import layout

pytestmark = pytest.mark.unit


ROOT = layout.REPO_ROOT


@pytest.fixture(scope="module")
def demo_output() -> list[str]:
    """The UR demo as `invoke demo-ur` runs it, twice: the README shows a run with the kernels cached."""
    for _ in range(2):
        p = subprocess.run([sys.executable, "examples/xpu_triton_ur.py"], cwd=ROOT,
                           capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
        assert p.returncode == 0, p.stdout + p.stderr
    return (p.stderr + p.stdout).splitlines()


@pytest.mark.sharing_smoke
@pytest.mark.container
def test_container_phase_runs():
    """The container phase's test for the sample above: the container runs with the layout's env."""
    from xpukit import layout

    if os.environ.get("XPUKIT_IN_CONTAINER") != "1":
        pytest.skip("checks the image's containers (here: the runtime installed on the host)")
    assert {k: os.environ.get(k) for k in layout.CONTAINER_ENV} == layout.CONTAINER_ENV


@pytest.mark.sharing_smoke
@pytest.mark.container
def test_readme_demo_sample_is_what_the_demo_prints(demo_output):
    sample = sample_after("README.md", "Output on a machine without a GPU")
    demo_lines = [ln for ln in sample if not ln.startswith("xpukit: ")]  # the task's own lines: above
    assert_sample_matches(demo_lines, demo_output)
    assert len(demo_lines) == len([ln for ln in demo_output if ln.strip()])


@pytest.mark.container
def test_readme_compile_table_is_what_compile_prints(tmp_path):
    sample = sample_after("README.md", "Compile a kernel for Intel GPUs")
    assert sample[0].startswith("$ invoke compile ")
    args = shlex.split(sample[0][2:])[2:]
    kernel = str(ROOT / args[0])
    p = subprocess.run([sys.executable, "-m", "xpukit", "compile", kernel, *args[1:]], cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, check=False,
                       timeout=600)  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    printed = [ln for ln in p.stdout.splitlines() if ln.strip()]
    assert [normalise(ln) for ln in sample[1:]] == [normalise(ln) for ln in printed]
