"""README.md and docs/*.md against the code: every `invoke ...` line they show runs, every setting.

The tests that run against a container engine; the others are in tests/host/test_docs.py.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import pytest

from tests.support.docs import assert_sample_matches, sample_after
from xpukit import layout

pytestmark = pytest.mark.unit


ROOT = layout.REPO_ROOT


@pytest.mark.docker
def test_readme_invoke_test_sample_is_what_invoke_test_prints(tmp_path):
    """`invoke test`'s own lines in the README (one cheap test per phase, with the image built)."""
    env = {**os.environ, "XPUKIT_REQUIRE_DOCKER": "1"}
    select = [
        "tests/host/test_error_boundary.py::test_ctrl_c_is_one_line_and_130",
        "tests/image/test_docs.py::test_container_phase_runs",
    ]
    command = [sys.executable, "-m", "invoke", "test", "--pytest-args", " ".join(select)]
    p = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       check=False, timeout=900)  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:]
    # The sample runs every test: the selection this test added to both phases' commands is taken out.
    printed = [ln for ln in p.stdout.splitlines() if ln.startswith("xpukit: ")]
    printed = [functools.reduce(lambda line, s: line.replace(f" {s}", ""), select, ln) for ln in printed]
    assert_sample_matches(sample_after("README.md", "`invoke test` runs the"), printed)
