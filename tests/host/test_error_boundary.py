"""The kit's one error boundary (xpukit.errors.guard): every entry point goes through it, and what it
prints and returns for a kit error, any other error, Ctrl-C and --debug."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xpukit.errors import EXIT_INTERRUPTED, EXIT_USAGE, XpukitError, error_line, guard
from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.unit

# Every program a user starts: tasks (invoke), the host commands, `python -m xpukit`, the examples.
ENTRY_POINTS = ["tasks.py", "xpukit/__main__.py", *sorted(
    str(p.relative_to(REPO_ROOT)) for folder in ("xpukit/host/commands", "examples")
    for p in (REPO_ROOT / folder).glob("*.py"))]  # fmt: skip


@pytest.mark.parametrize("path", ENTRY_POINTS)
def test_no_entry_point_writes_its_own_boundary(path):
    """The policy (one line, exit codes, Ctrl-C -> 130) is written once, in xpukit/errors.py."""
    text = (REPO_ROOT / path).read_text()
    assert not re.search(r"(=|return|exit\()\s*130\b", text), f"{path} sets exit code 130 itself: use xpukit.errors"
    assert "except KeyboardInterrupt" not in text.replace("except KeyboardInterrupt:\n    sys.exit(interrupted(", ""), (
        f"{path} catches Ctrl-C itself: go through xpukit.errors.guard"
    )
    assert "error: {" not in text, f"{path} formats its own error line: use xpukit.errors.error_line"


def test_a_kit_error_is_one_line_with_its_fix_and_its_code(capsys):
    class Refused(XpukitError):
        exit_code = 3

    def body() -> int:
        raise Refused("the widget is missing\nsecond line never shown", "install the widget")

    assert guard(body) == 3
    assert capsys.readouterr().err == "xpukit: error: the widget is missing (fix: install the widget)\n"


def test_ctrl_c_is_one_line_and_130(capsys):
    def body() -> int:
        raise KeyboardInterrupt

    assert guard(body, prog=None) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "interrupted\n"


def test_debug_shows_the_traceback_and_other_errors_are_bugs():
    def kit() -> int:
        raise XpukitError("x")

    with pytest.raises(XpukitError):
        guard(kit, debug=True)
    with pytest.raises(KeyboardInterrupt):
        guard(lambda: (_ for _ in ()).throw(KeyboardInterrupt), debug=True)
    with pytest.raises(ZeroDivisionError):  # not a kit error: a bug, shown as one
        guard(lambda: 1 // 0)


def test_an_example_names_any_error_in_one_line_with_exit_2(capsys):
    def body() -> int:
        raise RuntimeError("driver said no\nmore detail")

    assert guard(body, prog=None, any_error=True) == EXIT_USAGE
    assert capsys.readouterr().err == "error: RuntimeError: driver said no\n"


def test_python_m_xpukit_goes_through_it():
    p = subprocess.run([sys.executable, "-m", "xpukit", "compile", "/nonexistent.py:kernel"], cwd=REPO_ROOT,
                       capture_output=True, text=True, check=False)  # fmt: skip
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("xpukit: error: ") and "(fix: " in p.stderr and "Traceback" not in p.stderr


def test_an_examples_error_line_is_cut_at_200_characters_keeping_the_fix(capsys):
    """The examples' lines keep their TYPE and are cut like the kit's (a UR release error ran past 300):
    in the middle, so the message's end (an OSError's reason) and the whole fix stay."""

    def kit() -> int:
        raise XpukitError("the loader at " + "/very/long" * 40 + " is wrong (Not a directory)", "use another")

    assert guard(kit, prog=None, any_error=True) == EXIT_USAGE
    line = capsys.readouterr().err.rstrip("\n")
    assert len(line) == 200 and "\n" not in line, line
    assert line.startswith("error: XpukitError: the loader at /very/long"), line
    assert "..." in line and line.endswith(" is wrong (Not a directory) (fix: use another)"), line
    assert guard(lambda: int("x" * 300), prog=None, any_error=True) == EXIT_USAGE
    line = capsys.readouterr().err.rstrip("\n")
    assert len(line) <= 200 and line.startswith("error: ValueError: invalid literal for int()"), line


def test_a_long_fix_is_never_cut():
    """The fix is what the user does next: a message is shortened to make room for it, never the fix."""
    fix = "run `invoke pins --lock` " + "with a much longer explanation " * 8
    line = error_line(XpukitError("x" * 400 + " END", fix))
    assert line.endswith(f"(fix: {fix})") and " END" in line and "..." in line, line


@given(st.text(alphabet=st.sampled_from("ab/ .:()"), max_size=600), st.text(alphabet="xyz ", max_size=80))
def test_an_error_line_fits_and_keeps_its_fix(message, fix):
    """Any message: the line is at most 200 characters unless the fix alone needs more, and ends with
    the whole fix."""
    line = error_line(XpukitError(message, fix))
    head = "xpukit: error: "
    assert line.startswith(head) and "\n" not in line
    tail = f" (fix: {fix})" if fix else ""
    assert line.endswith(tail)
    assert len(line) <= max(200, len(head) + 40 + len(tail)), line
