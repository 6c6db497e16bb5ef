"""The examples refuse bad sizes in one line with exit 2 (argparse's usage error), before any device
work: a negative size used to reach numpy and end as its ValueError."""

from __future__ import annotations

import subprocess
import sys

import pytest

from xpukit.errors import EXIT_USAGE
from xpukit.host.pins import REPO_ROOT

pytestmark = pytest.mark.container


@pytest.mark.parametrize(
    ("script", "args", "wants"),
    [
        ("tutorial_01_vector_add.py", ["--size", "-5"], "--size must be >= 0"),
        ("tutorial_02_fused_softmax.py", ["--rows", "0"], "--rows and --cols must be >= 1"),
        ("tutorial_02_fused_softmax.py", ["--cols", "-3"], "--rows and --cols must be >= 1"),
    ],
)
def test_examples_refuse_bad_sizes(script, args, wants):
    p = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / script), *args, "--device", "cpu"],
                       capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    assert p.returncode == EXIT_USAGE and p.stderr.strip().splitlines()[-1].endswith(wants), p.stderr
    assert "device:" not in p.stdout and "Traceback" not in p.stderr
