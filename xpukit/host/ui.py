"""The kit's output: progress lines on stdout, warnings and errors on stderr, each prefixed `xpukit:`."""

from __future__ import annotations

import sys

from xpukit.errors import XpukitError

MAX_ERROR_CHARS = 200


def say(message: str) -> None:
    print(f"xpukit: {message}", flush=True)


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
