"""The binding, launch, launch-safety and dispatch tests and the UR demo against every supported UR release,
each in its own process (one release of every launch form among them: 2025.0-2025.2 setarg + the
9-parameter launch, 2025.3 the 11-parameter one, 2026.0-2026.2 one launch with its arguments).

Each release gets a prefix (tests/support/ur_matrix.py prepare_prefix, cached under XPUKIT_CACHE_DIR) and a
pytest subprocess with XPUKIT_UR_LOADER pointing at it. A prefix that cannot be prepared (offline)
skips with the reason, unless XPUKIT_REQUIRE_UR_MATRIX=1 makes it a failure (CI).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ur_matrix import UR_RELEASE_MATRIX, URPrefixUnavailable, loader_in, prepare_prefix

pytestmark = pytest.mark.container

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parents[1]


@pytest.mark.parametrize("line", list(UR_RELEASE_MATRIX))
def test_binding_against_release(line):
    pytest.importorskip("triton")
    version = UR_RELEASE_MATRIX[line]
    try:
        prefix = prepare_prefix(version)
    except URPrefixUnavailable as exc:
        if os.environ.get("XPUKIT_REQUIRE_UR_MATRIX") == "1":
            pytest.fail(f"XPUKIT_REQUIRE_UR_MATRIX=1: {exc.one_line()}")
        pytest.skip(exc.one_line())
    env = dict(os.environ)
    env.update(
        XPUKIT_UR_LOADER=str(loader_in(prefix)),
        XPUKIT_EXPECT_UR_RELEASE=version,
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]),
        PYTHONDONTWRITEBYTECODE="1",  # the source tree may be mounted read-only
    )
    cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(REPO),
        str(TESTS / "test_ur_binding.py"), str(TESTS / "test_launch.py"), str(TESTS / "test_launch_safety.py"),
        str(TESTS / "test_launcher_parity.py"), str(TESTS / "test_dispatch.py"), "-k", "not 1048576",
        "-m", "not gpu",  # GPU tests skip here; any other skip would hide a release difference
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, check=False)
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:]
    assert proc.returncode == 0, f"UR {version}: {summary}\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
    assert re.search(r"\d+ passed", summary) and "skipped" not in summary, summary
    demo = [sys.executable, str(REPO / "examples" / "xpu_triton_ur.py"), "--n", "65536", "--device", "cpu"]
    proc = subprocess.run(demo, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, f"UR {version}: the demo failed\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert f"UR {version}," in proc.stdout and proc.stdout.count("(exact)") == 2, proc.stdout
