"""An ocloc that XPUKIT_OCLOC chose and that cannot do the work: the one line names the variable as
the fix, not the image (`XPUKIT_OCLOC=/bin/false` in the image used to say "use the kit's image",
which is where the user already was). Without the variable the fix still names the image."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.container
KERNEL = f"{REPO_ROOT}/examples/kernels.py:scale_kernel"
VARIABLE_FIX = "(fix: point XPUKIT_OCLOC at ocloc 26.27 or later, or unset it to use the ocloc on PATH)"


def old_ocloc(folder) -> str:
    """A stand-in for an ocloc that answers as one but knows only Gen12 devices."""
    fake = folder / "ocloc"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "query" ]; then echo "24.35.1 " > OCL_DRIVER_VERSION; exit 0; fi\n'
        'echo "  <device_type> can be: tgllp, dg1 or hexadecimal"; exit 0\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return str(fake)


def xpukit(args, tmp_path, ocloc) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XPUKIT_OCLOC"}
    env.update(PYTHONPATH=str(REPO_ROOT), TRITON_CACHE_DIR=str(tmp_path / "cache"), PYTHONDONTWRITEBYTECODE="1")
    if ocloc is not None:
        env["XPUKIT_OCLOC"] = ocloc
    return subprocess.run([sys.executable, "-m", "xpukit", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False, timeout=300)  # fmt: skip


@pytest.mark.parametrize(
    ("ocloc", "wants"),
    [
        ("/bin/false", "XPUKIT_OCLOC names /usr/bin/false, which does not answer as ocloc"),
        ("/bin/true", "XPUKIT_OCLOC names /usr/bin/true, which does not answer as ocloc"),
        ("/nonexistent/ocloc", "XPUKIT_OCLOC=/nonexistent/ocloc is not an executable"),
        ("old", "ocloc 24.35.1 at "),
    ],
)
@pytest.mark.parametrize("command", ["compile", "kernel-report"])
def test_an_ocloc_xpukit_ocloc_chose_is_named_in_the_fix(tmp_path, ocloc, wants, command):
    if ocloc == "old":
        ocloc = old_ocloc(tmp_path)
    args = [command, KERNEL, "--target", "pvc"] + (["--out", str(tmp_path / "out")] if command == "compile" else [])
    p = xpukit(args, tmp_path, ocloc)
    lines = [ln for ln in p.stderr.splitlines() if "warning:" not in ln]  # e.g. a stale launcher's ABI note
    assert p.returncode != 0 and len(lines) == 1, p.stderr
    assert lines[0].startswith("xpukit: error: ") and wants in lines[0], lines[0]
    assert lines[0].endswith(VARIABLE_FIX) and "image" not in lines[0], lines[0]
    assert "Traceback" not in p.stderr and not (tmp_path / "out").exists()


def test_without_the_variable_the_fix_names_the_image(tmp_path, monkeypatch):
    """No ocloc on PATH and no XPUKIT_OCLOC (a host without the compiler): the image is the fix."""
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    p = xpukit(["compile", KERNEL, "--target", "pvc", "--out", str(tmp_path / "out")], tmp_path, None)
    lines = [ln for ln in p.stderr.splitlines() if "warning:" not in ln]
    assert p.returncode != 0 and len(lines) == 1, p.stderr
    assert "ocloc not found" in lines[0] and "run inside the kit's image" in lines[0], lines[0]
