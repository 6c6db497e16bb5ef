"""The kernel report's cache key and store (xpukit.host.report_cache): a key that changes with
everything a report depends on, and no other thing. Real files, no Triton needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xpukit.host import report_cache

KERNEL = """
import triton
import triton.language as tl
from helpers import scale
from . import sibling  # a relative import resolves next to the kernel, too

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    scale(x_ptr, n, BLOCK)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.py").write_text(KERNEL)
    (tmp_path / "kernels" / "helpers.py").write_text("import os\nfrom deep import add\n\ndef scale(*a):\n    pass\n")
    (tmp_path / "kernels" / "deep.py").write_text("def add():\n    pass\n")
    (tmp_path / "kernels" / "sibling.py").write_text("X = 1\n")
    (tmp_path / "kernels" / "unrelated.py").write_text("Y = 1\n")
    return tmp_path


def _key(project: Path, toolchain: str = "image sha256:1", **options) -> report_cache.ReportKey:
    options = {"targets": ["pvc"], "configs": ["BLOCK=256"]} | options
    return report_cache.report_key(project / "kernels" / "k.py", "k", options, toolchain, project)


@pytest.mark.unit
def test_key_covers_the_kernel_and_the_modules_it_imports(project):
    key = _key(project)
    assert {Path(p).name for p in key.sources} == {"k.py", "helpers.py", "deep.py", "sibling.py"}
    assert _key(project) == key
    (project / "kernels" / "unrelated.py").write_text("Y = 2\n")
    assert _key(project).key == key.key  # a file the kernel does not import changes nothing
    (project / "kernels" / "deep.py").write_text("def add():\n    return 1\n")
    changed = _key(project)
    assert changed.key != key.key and changed.kernel_id == key.kernel_id  # same kernel, new report


@pytest.mark.unit
def test_key_covers_options_toolchain_and_kit_code(project):
    key = _key(project).key
    assert _key(project, configs=["BLOCK=512"]).key != key
    assert _key(project, targets=["pvc", "acm-g10"]).key != key
    assert _key(project, constexprs=["N=3"]).key != key
    assert _key(project, toolchain="image sha256:2").key != key  # a rebuilt image
    (project / "xpukit").mkdir()
    (project / "xpukit" / "targets.py").write_text("LIMITS = {}\n")  # the kit's own report code
    assert _key(project).key != key


@pytest.mark.unit
def test_store_previous_and_failed_reports(tmp_path, project):
    cache = report_cache.ReportCache(tmp_path / "cache")
    first, second = _key(project), _key(project, configs=["BLOCK=512"])
    row = {"target": "pvc", "config": "BLOCK=256", "error": None, "counts": {}}
    stored = cache.store(first, {"kernel": "k", "rows": [row]})
    assert cache.load(first.key) == stored and "stored_at" in stored
    assert cache.previous(first) is None
    cache.store(second, {"kernel": "k", "rows": [row | {"config": "BLOCK=512"}]})
    assert cache.previous(second)["rows"][0]["config"] == "BLOCK=256"
    assert cache.previous(first)["rows"][0]["config"] == "BLOCK=512"
    # A report with a failed cell is shown but not kept: the next run compiles again.
    third = _key(project, configs=["BLOCK=3"])
    cache.store(third, {"kernel": "k", "rows": [row | {"error": "failed to compile"}]})
    assert cache.load(third.key) is None
    # A damaged file is a miss, not a crash.
    cache.path(first.key).write_text("{not json")
    assert cache.load(first.key) is None
    assert not list(cache.folder.glob(".*.tmp"))
    assert json.loads((cache.folder / "history" / f"{first.kernel_id}.json").read_text())[-1] == second.key
    # A kernel keeps its newest HISTORY_KEEP reports; older ones are deleted.
    keys = [_key(project, configs=[f"BLOCK={2**i}"]) for i in range(report_cache.HISTORY_KEEP + 1)]
    for each in keys:
        cache.store(each, {"kernel": "k", "rows": [row]})
    assert cache.load(keys[0].key) is None and cache.load(keys[-1].key) is not None
    assert len(cache.history(first.kernel_id)) == report_cache.HISTORY_KEEP


@pytest.mark.unit
def test_unwritable_cache_folder_is_one_line(tmp_path):
    from xpukit.errors import XpukitError
    from xpukit.host.commands import zebin as commands

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(XpukitError) as info:
        commands._make_cache_folder(blocker / "kernel-reports")
    line = info.value.one_line()
    assert "cannot be made" in line and "XPUKIT_CACHE_DIR" in line and "\n" not in line
