"""`invoke compile` writes all its targets' files or none: a failed run leaves no `--out` folder it
made and no file of an earlier target (xpukit/runtime/kernels/staging.py; the compile itself, with an
ocloc that fails one target, is in tests/image/test_compile_all_or_nothing.py). Before, the host made
`--out` (and its parents) before the run and left them behind, and the image wrote each target's
files as it went, so a failure on the second target left the first's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from xpukit.host.commands.zebin import remove_made
from xpukit.layout import REPO_ROOT
from xpukit.runtime.kernels import staging
from xpukit.runtime.kernels.staging import STAGE_PREFIX, staged_output

pytestmark = pytest.mark.unit


def invoke_compile(tmp_path, out) -> subprocess.CompletedProcess:
    """A compile that fails after the host checked and made --out: no engine answers, and the host has
    no kit runtime (or, where it has one, the kernel file has no such function)."""
    env = {**os.environ, "XPUKIT_ENGINE": "docker", "DOCKER_HOST": "unix:///nonexistent.sock"}
    cmd = [sys.executable, "-m", "invoke", "-r", str(REPO_ROOT), "compile",
           f"{REPO_ROOT}/examples/kernels.py:no_such_kernel", "--where", "host", "--out", str(out)]  # fmt: skip
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=300)


def test_a_failed_invoke_compile_removes_the_folders_it_made(tmp_path):
    kept = tmp_path / "kept"
    (kept / "old").mkdir(parents=True)
    (kept / "old" / "k.zebin").write_bytes(b"earlier")
    for out in (tmp_path / "new" / "deeper" / "out", kept / "out", kept):
        p = invoke_compile(tmp_path, out)
        errors = [ln for ln in p.stderr.splitlines() if ln.startswith("xpukit: error:")]
        assert p.returncode == 1 and len(errors) == 1 and "Traceback" not in p.stderr, p.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"], "a folder the failed run made is left"
    assert [p.name for p in kept.iterdir()] == ["old"] and (kept / "old" / "k.zebin").read_bytes() == b"earlier"


def test_remove_made_takes_a_killed_runs_stage_and_leaves_anything_else(tmp_path):
    made = [tmp_path / "a", tmp_path / "a" / "out"]
    (made[1] / f"{STAGE_PREFIX}7-abcd1234-x" / "pvc").mkdir(parents=True)
    remove_made(made)
    assert not made[0].exists()
    (made[1] / "pvc").mkdir(parents=True)  # a target's files: the run got as far as moving them
    remove_made(made)
    assert (made[1] / "pvc").is_dir()


def _write(stage, files):
    for name, data in files.items():
        (stage / name).parent.mkdir(parents=True, exist_ok=True)
        (stage / name).write_bytes(data)


def test_staged_output_moves_every_file_or_none(tmp_path):
    out = tmp_path / "a" / "out"
    with staged_output(out) as stage:
        _write(stage, {"pvc/k.zebin": b"1", "bmg/k.zebin": b"2"})
        assert not (out / "pvc").exists()  # nothing in place before the block ends
    assert (out / "pvc" / "k.zebin").read_bytes() == b"1" and (out / "bmg" / "k.zebin").read_bytes() == b"2"
    assert sorted(p.name for p in out.iterdir()) == ["bmg", "pvc"]  # the stage is gone

    with pytest.raises(RuntimeError), staged_output(tmp_path / "b" / "out") as stage:
        _write(stage, {"pvc/k.zebin": b"3"})
        raise RuntimeError("the second target failed")
    assert not (tmp_path / "b").exists()

    with pytest.raises(KeyboardInterrupt), staged_output(out) as stage:
        _write(stage, {"pvc/k.zebin": b"4", "acm-g10/k.zebin": b"4"})
        raise KeyboardInterrupt
    assert sorted(p.name for p in out.iterdir()) == ["bmg", "pvc"] and (out / "pvc" / "k.zebin").read_bytes() == b"1"


def test_a_move_that_fails_half_way_puts_back_what_it_replaced(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _write(out, {"pvc/k.zebin": b"old", "pvc/k.json": b"old"})
    real_replace, calls = os.replace, []

    def failing_replace(src, dst):
        calls.append(dst)
        if len(calls) == 4:  # k.isa added, k.json replaced (old aside, new in); k.zebin's old: a full disk
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(staging.os, "replace", failing_replace)
    with pytest.raises(OSError), staged_output(out) as stage:
        _write(stage, {"pvc/k.zebin": b"new", "pvc/k.json": b"new", "pvc/k.isa": b"new", "bmg/k.zebin": b"new"})
    monkeypatch.setattr(staging.os, "replace", real_replace)
    assert sorted(p.name for p in out.iterdir()) == ["pvc"]  # bmg/, moved in whole, is gone again
    assert {p.name: p.read_bytes() for p in (out / "pvc").iterdir()} == {"k.zebin": b"old", "k.json": b"old"}


def test_a_stage_left_by_a_killed_run_is_swept_by_the_next(tmp_path):
    out = tmp_path / "out"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = out / f"{STAGE_PREFIX}{dead.stdout.strip()}-{staging.host_tag()}-abc"
    (left / "pvc").mkdir(parents=True)
    with staged_output(out) as stage:
        _write(stage, {"pvc/k.zebin": b"1"})
    assert sorted(p.name for p in out.iterdir()) == ["pvc"]
