"""The kit's output: progress lines on stdout, warnings and errors on stderr, each prefixed `xpukit:`.

A task whose stdout is data (``kernel-report --format json``) sends its progress, build logs
included, to stderr instead (:func:`progress_on_stderr`), so its stdout stays parseable.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TextIO

from xpukit.errors import XpukitError

MAX_ERROR_CHARS = 200
_progress_on_stderr = False


def progress_stream() -> TextIO:
    """Where progress goes now: stdout, or stderr inside :func:`progress_on_stderr`."""
    return sys.stderr if _progress_on_stderr else sys.stdout


@contextlib.contextmanager
def progress_on_stderr(enabled: bool = True) -> Iterator[None]:
    global _progress_on_stderr
    before, _progress_on_stderr = _progress_on_stderr, enabled or _progress_on_stderr
    try:
        yield
    finally:
        _progress_on_stderr = before


def say(message: str) -> None:
    print(f"xpukit: {message}", file=progress_stream(), flush=True)


def warn(message: str) -> None:
    print(f"xpukit: warning: {message}", file=sys.stderr, flush=True)


def error_line(exc: XpukitError) -> str:
    """The one line an error prints (the fix is kept whole; a long message is cut first)."""
    line = f"xpukit: error: {exc.one_line()}"
    if len(line) <= MAX_ERROR_CHARS:
        return line
    fix = f" (fix: {exc.fix})" if exc.fix else ""
    room = max(40, MAX_ERROR_CHARS - len("xpukit: error: ") - len(fix) - 3)
    return f"xpukit: error: {exc.message.strip().splitlines()[0][:room]}...{fix}"[:MAX_ERROR_CHARS]
