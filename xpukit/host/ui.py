"""The kit's output: progress lines on stdout, warnings and errors on stderr, each prefixed `xpukit:`.

A task whose stdout is data (``kernel-report --format json``) sends its progress, build logs
included, to stderr instead (:func:`progress_on_stderr`), so its stdout stays parseable.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TextIO

from xpukit.errors import MAX_ERROR_CHARS, error_line  # noqa: F401  (the host's names for them)

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
