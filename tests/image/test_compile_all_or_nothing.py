"""`python -m xpukit compile` (what `invoke compile` runs in the image) writes every target's files
or none: with an ocloc that fails acm-g10 after pvc built, a new `--out` is not made, an existing
one keeps its earlier files byte for byte, and no staging folder is left. Before, pvc's files and
the `--out` folders stayed behind the error."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import pytest

from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.container
KERNEL = f"{REPO_ROOT}/examples/kernels.py:scale_kernel"


def compile_(tmp_path, out, *more, ocloc=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("XPUKIT_OCLOC", None)
    if ocloc:
        env["XPUKIT_OCLOC"] = ocloc
    cmd = [sys.executable, "-m", "xpukit", "compile", KERNEL, "--target", "pvc,acm-g10", "--out", str(out), *more]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=600)


def failing_acm_g10(folder) -> str:
    """The real ocloc, except that its builds for acm-g10 fail."""
    real = shutil.which("ocloc") or pytest.skip("ocloc is not installed here")
    fake = folder / "ocloc"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = compile ]; then for a in "$@"; do\n'
        '  if [ "$a" = acm-g10 ]; then echo "error: no acm-g10 today"; exit 3; fi\n'
        "done; fi\n"
        f'exec {real} "$@"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return str(fake)


def tree(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_target_that_fails_leaves_nothing_of_the_run(tmp_path):
    pytest.importorskip("triton")
    ocloc = failing_acm_g10(tmp_path)
    new = tmp_path / "new" / "out"
    p = compile_(tmp_path, new, ocloc=ocloc)
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("xpukit: error:")]
    assert p.returncode == 1 and len(errors) == 1 and "failed for device acm-g10" in errors[0], p.stderr
    assert not (tmp_path / "new").exists(), "the failed run left --out or its parent"

    kept = tmp_path / "kept"
    assert compile_(tmp_path, kept).returncode == 0  # both targets, with the real ocloc
    before = tree(kept)
    assert sorted(before) == [f"{t}/scale_kernel.{e}" for t in ("acm-g10", "pvc") for e in ("json", "spv", "zebin")]
    p = compile_(tmp_path, kept, "--constexpr", "BLOCK=512", ocloc=ocloc)  # other bytes, had they been written
    assert p.returncode == 1 and "failed for device acm-g10" in p.stderr, p.stderr
    assert tree(kept) == before and sorted(x.name for x in kept.iterdir()) == ["acm-g10", "pvc"]

    p = compile_(tmp_path, kept, "--constexpr", "BLOCK=512")  # and a run that succeeds replaces them
    assert p.returncode == 0, p.stderr
    after = tree(kept)
    assert sorted(after) == sorted(before) and after["pvc/scale_kernel.spv"] != before["pvc/scale_kernel.spv"]
