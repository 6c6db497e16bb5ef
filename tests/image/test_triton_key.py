"""Triton's ``triton_key()`` remembered across processes (xpukit.runtime.triton.triton_cache): the same
key Triton computes, read back while the installed Triton is unchanged, computed again when a file it
covers changes, and never trusted when the memo is damaged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

pytest.importorskip("triton")

from triton.compiler import compiler

from xpukit.runtime.triton import triton_cache, tritonc

pytestmark = pytest.mark.container


def fake_key(digit: str) -> str:
    import triton

    return triton.__version__ + "-".join([digit * 64] * 3)


class Counting:
    """Stands for Triton's own function and counts its calls."""

    def __init__(self, key: str) -> None:
        self.key, self.calls = key, 0

    def __call__(self) -> str:
        self.calls += 1
        return self.key


def fake_triton(root: Path) -> Path:
    """The files triton_key() reads, laid out as in Triton 3.3 (only their stat() matters here)."""
    import sysconfig

    ext = sysconfig.get_config_var("EXT_SUFFIX").split(".")[-1]
    for rel in ("compiler/compiler.py", "backends/intel/compiler.py", "language/core.py", f"_C/libtriton.{ext}"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n")
    return root


def test_the_installed_key_is_tritons_own():
    tritonc.xpu_backend()
    assert getattr(compiler.triton_key, "_xpukit_remembered", False)
    assert compiler.triton_key() == compiler.triton_key.__wrapped__()
    assert triton_cache.well_formed_key(compiler.triton_key())


def test_computed_once_then_read_back(tmp_path):
    import triton

    root = Path(triton.__file__).resolve().parent  # the real install: stat() only
    compute = Counting(fake_key("a"))
    first = triton_cache.remembered_key(compute, root, tmp_path / "memo")
    second = triton_cache.remembered_key(compute, root, tmp_path / "memo")
    assert first == second == compute.key
    assert compute.calls == 1
    assert [p.read_text() for p in (tmp_path / "memo").iterdir()] == [compute.key]


@pytest.mark.parametrize("change", ["libtriton resized", "a backend file touched", "a language file added"])
def test_a_changed_triton_is_hashed_again(tmp_path, change):
    root = fake_triton(tmp_path / "triton")
    memo = tmp_path / "memo"
    compute = Counting(fake_key("b"))
    triton_cache.remembered_key(compute, root, memo)
    if change == "libtriton resized":
        (lib,) = (root / "_C").iterdir()
        lib.write_text("a longer library than before\n")
    elif change == "a backend file touched":
        path = root / "backends/intel/compiler.py"
        info = path.stat()
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
    else:
        (root / "language/extra.py").write_text("x = 1\n")
    triton_cache.remembered_key(compute, root, memo)
    assert compute.calls == 2
    assert len(list(memo.iterdir())) == 2


def test_pycache_is_not_part_of_the_stamp(tmp_path):
    root = fake_triton(tmp_path / "triton")
    before = triton_cache.install_stamp(root)
    (root / "compiler/__pycache__").mkdir()
    (root / "compiler/__pycache__/compiler.cpython-311.pyc").write_bytes(b"\0" * 16)
    assert triton_cache.install_stamp(root) == before


@pytest.mark.parametrize("damage", ["truncated", "not a key", "empty", "binary"])
def test_a_damaged_memo_is_computed_again_and_replaced(tmp_path, damage):
    root = fake_triton(tmp_path / "triton")
    memo = tmp_path / "memo"
    compute = Counting(fake_key("c"))
    triton_cache.remembered_key(compute, root, memo)
    (path,) = memo.iterdir()
    path.write_bytes(
        {
            "truncated": compute.key[:-10].encode(),
            "not a key": b"hello",
            "empty": b"",
            "binary": b"\xff\xfe" + compute.key.encode(),
        }[damage]
    )
    assert triton_cache.remembered_key(compute, root, memo) == compute.key
    assert compute.calls == 2
    assert path.read_text() == compute.key


def test_an_unwritable_memo_folder_costs_only_the_hashing(tmp_path):
    root = fake_triton(tmp_path / "triton")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    compute = Counting(fake_key("d"))
    for _ in range(2):
        assert triton_cache.remembered_key(compute, root, blocker / "memo") == compute.key
    assert compute.calls == 2


def test_a_second_process_reads_the_first_ones_key(tmp_path):
    """Through the real install path (tritonc.xpu_backend): process 1 writes Triton's key; a
    well-formed stand-in put in its place is what process 2 gets, so process 2 hashed nothing."""
    script = (
        "import json\n"
        "from triton.compiler import compiler\n"
        "from xpukit.runtime.triton import tritonc\n"
        "tritonc.xpu_backend()\n"
        "print(json.dumps([compiler.triton_key(), compiler.triton_key.__wrapped__()]))\n"
    )
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}

    def run() -> list[str]:
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        return json.loads(done.stdout.splitlines()[-1])

    remembered, own = run()
    assert remembered == own
    (memo,) = (tmp_path / triton_cache.KEY_MEMO).iterdir()
    assert memo.read_text() == own
    memo.write_text(fake_key("e"))
    assert run() == [fake_key("e"), own]
