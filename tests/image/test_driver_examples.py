"""The driver's examples end to end on the CPU device: the blog demo's both launch styles and
Triton's first two tutorials rewritten for xpukit."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.support.runtime_required import skip_unless_in_image

pytestmark = pytest.mark.container

EXAMPLES = ROOT / "examples"


def run(script: str, *flags: str) -> subprocess.CompletedProcess:
    pytest.importorskip("triton")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", OPENBLAS_NUM_THREADS="1")
    p = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    if "DeviceNotFound" in p.stderr or "LoaderNotFound" in p.stderr:
        skip_unless_in_image(f"no UR CPU device here: {p.stderr.strip().splitlines()[-1]}")
    return p


@pytest.mark.parametrize("launch", ["triton", "explicit"])
def test_demo_both_launch_styles(launch):
    p = run("xpu_triton_ur.py", "--n", "4097", "--device", "cpu", "--iters", "2", "--launch", launch)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("max abs error 0 (exact)") == 2, p.stdout
    if launch == "triton":
        assert "kernel[grid]+synchronize" in p.stdout
    assert p.stdout.rstrip().endswith("OK")


def test_demo_source_uses_the_blog_call_style():
    src = (EXAMPLES / "xpu_triton_ur.py").read_text()
    assert "kernel[grid](a_in, a_out, args.scale, n, BLOCK_SIZE=block)" in src
    assert "time.sleep(" not in src and "import torch" not in src


@pytest.mark.parametrize("size", ["1", "98432"])
def test_tutorial_01_vector_add(size):
    p = run("tutorial_01_vector_add.py", "--size", size, "--device", "cpu")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "max abs difference vs numpy: 0.0" in p.stdout and p.stdout.rstrip().endswith("OK")


def test_tutorial_01_bench_times_with_ur_events():
    p = run("tutorial_01_vector_add.py", "--size", "1000", "--device", "cpu", "--bench")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(" us, ") == 3


@pytest.mark.parametrize("shape", [("1823", "781"), ("3", "1"), ("64", "1024")])
def test_tutorial_02_fused_softmax(shape):
    p = run("tutorial_02_fused_softmax.py", "--rows", shape[0], "--cols", shape[1], "--device", "cpu")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.rstrip().endswith("OK")
