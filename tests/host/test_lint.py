"""ruff (settings in pyproject.toml) stays clean on the whole checkout, and no module of the kit
grows past the size a newcomer can read in one sitting (issue 31: 600 lines, Python and C)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_clean(args):
    ruff = shutil.which("ruff")
    assert ruff, "ruff is missing: pip install --require-hashes -r env/lock/host.txt"
    cmd = [ruff, *args, "--no-cache", "."]
    result = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]


MAX_MODULE_LINES = 600


def oversized(root: Path, limit: int = MAX_MODULE_LINES) -> list[str]:
    """The kit's modules (Python and C sources under xpukit/) longer than ``limit`` lines."""
    files = [*root.glob("xpukit/**/*.py"), *root.glob("xpukit/**/*.c"), *root.glob("xpukit/**/*.h")]
    counts = {f.relative_to(root).as_posix(): len(f.read_text().splitlines()) for f in files}
    return sorted(f"{name}: {n} lines" for name, n in counts.items() if n > limit)


def test_no_module_of_the_kit_over_600_lines():
    assert oversized(REPO_ROOT) == [], "split these by subject (one module per concern)"


def test_the_size_check_catches_a_long_module(tmp_path):
    (tmp_path / "xpukit" / "sub").mkdir(parents=True)
    (tmp_path / "xpukit" / "sub" / "long.c").write_text("x\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "xpukit" / "short.py").write_text("x\n" * MAX_MODULE_LINES)
    assert oversized(tmp_path) == [f"xpukit/sub/long.c: {MAX_MODULE_LINES + 1} lines"]
