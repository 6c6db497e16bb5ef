"""Facts the kit once wrote in several places, each with one owner now, and a check that keeps it so:
the checkout's root (xpukit.layout.REPO_ROOT), the image's install root
(xpukit.layout.INSTALL_ROOT), the environment of a container with no home (layout.NO_HOME_ENV), the
reading of XPUKIT_CACHE_DIR (layout.kit_cache_dir) and the error line's length
(xpukit.errors.MAX_ERROR_CHARS). The lock's image entry has its own check in test_registry.py."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support import ROOT as TESTS_ROOT
from xpukit import errors, layout
from xpukit.host.matrix import schedule
from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.unit
SOURCES = sorted((REPO_ROOT / "xpukit").rglob("*.py"))
CLIMB = re.compile(r"__file__.*\.(parents\[|parent\.parent)")


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(REPO_ROOT)}:{getattr(node, 'lineno', 0)}"


def _constants(value: object, skip: tuple[str, ...]) -> list[str]:
    """Where the literal ``value`` appears in xpukit/ outside the files ``skip`` names."""
    found = []
    for path in SOURCES:
        if str(path.relative_to(REPO_ROOT)) in skip:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and type(node.value) is type(value) and node.value == value:
                found.append(_where(path, node))
    return found


def test_the_checkout_root_is_computed_once():
    assert TESTS_ROOT == REPO_ROOT  # the tests' name for it is the same folder
    computed, named_root = [], []
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        for number, line in enumerate(text.splitlines(), 1):  # climbing from a module to the checkout
            if CLIMB.search(line) and path.relative_to(REPO_ROOT).as_posix() != "xpukit/layout.py":
                computed.append(f"{path.relative_to(REPO_ROOT)}:{number}")
        for node in tree.body:  # module level: ROOT meant the checkout here and /opt/xpukit in layout
            targets = node.targets if isinstance(node, ast.Assign) else []
            named_root += [_where(path, node) for t in targets if isinstance(t, ast.Name) and t.id == "ROOT"]
    assert not computed, f"the checkout's root is xpukit.layout.REPO_ROOT: {computed}"
    assert not named_root, f"say REPO_ROOT (the checkout) or layout.INSTALL_ROOT (the image): {named_root}"


def test_no_home_environment_is_written_once():
    for value in (layout.NO_HOME, *layout.NO_HOME_ENV.values()):
        assert _constants(value, ("xpukit/layout.py",)) == [], f"{value} is layout.NO_HOME_ENV's"
    # Every runtime without the image's user gets all of it.
    line = schedule.ch_run_line(Path("/img"), ["true"], {"environment": {"A": "1"}})
    assert {f"--set-env={k}={v}" for k, v in layout.NO_HOME_ENV.items()} <= set(line)
    line = schedule.apptainer_line("x.sif", ["true"], {"environment": {}}, gpu=False)
    assert {f"--env={k}={v}" for k, v in layout.NO_HOME_ENV.items()} <= set(line)


def test_kit_cache_dir_is_read_once_and_matches_the_image(monkeypatch, tmp_path):
    assert _constants("XPUKIT_CACHE_DIR", ("xpukit/layout.py",)) == []
    monkeypatch.delenv("XPUKIT_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", layout.HOME)
    # The image's XPUKIT_CACHE_DIR (the Dockerfile's, from KIT_CACHE) is the default for its user.
    assert layout.kit_cache_dir() == Path(layout.KIT_CACHE)
    assert layout.kit_cache_dir(default=tmp_path) == tmp_path
    monkeypatch.setenv("XPUKIT_CACHE_DIR", str(tmp_path / "set"))
    assert layout.kit_cache_dir(default=Path("/elsewhere")) == tmp_path / "set"


def test_the_error_line_cap_is_written_once():
    assert errors.MAX_ERROR_CHARS == 200
    assert _constants(errors.MAX_ERROR_CHARS, ("xpukit/errors.py",)) == []
