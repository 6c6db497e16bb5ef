"""The kit's one error type, and the one error boundary every entry point goes through.

An entry point (`python -m xpukit`, each invoke task, the examples) calls :func:`guard`: a kit
error is one line on stderr naming the problem and the fix, Ctrl-C is one line and exit 130, and
only --debug shows a traceback. Ground level: imports only the standard library, so the runtime,
the host kit and the examples all reach it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

EXIT_USAGE = 2  # bad input a user typed (argparse's and invoke's code too)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C
MAX_ERROR_CHARS = 200  # an error line longer than this is cut (long words first; the fix is kept whole)


class XpukitError(Exception):
    """An error the user can act on. Printed as one line; no traceback unless --debug."""

    exit_code = 1

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def one_line(self) -> str:
        text = self.message.strip().splitlines()[0] if self.message.strip() else type(self).__name__
        return f"{text} (fix: {self.fix})" if self.fix else text

    def __str__(self) -> str:
        return f"{self.message} (fix: {self.fix})" if self.fix else self.message


class UsageError(XpukitError):
    """Bad input a user typed (an option's value, a setting): exit 2, like argparse's."""

    exit_code = EXIT_USAGE


def _prefix(prog: str | None) -> str:
    return f"{prog}: " if prog else ""


def error_line(exc: XpukitError, prog: str | None = "xpukit", max_chars: int | None = MAX_ERROR_CHARS) -> str:
    """The one line an error prints; the fix is kept whole. A long message loses the middles of
    its longest words first (a path's folders; its start and file name stay), and only then its
    end. ``max_chars`` None: never cut."""
    head = f"{_prefix(prog)}error: "
    line = head + exc.one_line()
    if max_chars is None or len(line) <= max_chars:
        return line
    fix = f" (fix: {exc.fix})" if exc.fix else ""
    room = max(40, max_chars - len(head) - len(fix))
    first = (exc.message.strip().splitlines() or [type(exc).__name__])[0]
    return f"{head}{_shortened(first, room)}{fix}"


def _shortened(message: str, room: int, keep: int = 24) -> str:
    """``message`` in at most ``room`` characters: the longest words' middles go first (each keeps
    ``keep`` characters around its "..."), then the end."""
    words = message.split(" ")
    excess = len(message) - room
    for i in sorted(range(len(words)), key=lambda i: -len(words[i])):
        if excess <= 0 or len(words[i]) <= keep + 3:
            break
        cut = min(excess + 3, len(words[i]) - keep)
        start = (len(words[i]) - cut) // 3  # a third before the cut, two thirds after: a file's name
        words[i] = f"{words[i][:start]}...{words[i][start + cut :]}"
        excess -= cut - 3
    text = " ".join(words)
    return text if len(text) <= room else f"{text[: room - 3]}..."


def interrupted(prog: str | None = "xpukit") -> int:
    """Say that Ctrl-C stopped the program, in one line; returns the exit code to use."""
    print(f"{_prefix(prog)}interrupted", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED


def guard(
    call: Callable[[], int | None],
    *,
    debug: bool = False,
    prog: str | None = "xpukit",
    any_error: bool = False,
    max_chars: int | None = MAX_ERROR_CHARS,
) -> int:
    """Run an entry point's body and return its exit code: a kit error prints one line and exits
    with its code, Ctrl-C prints one line and exits 130; with ``debug`` both raise (a traceback).

    ``any_error``: every other exception too becomes one line (its type named) and exit 2, for a
    user-run example, whose failures (a device, a driver) are the user's to read, not the kit's bugs.
    ``max_chars``: where the error line is cut (None: never, for messages made of the user's paths).
    """
    try:
        return call() or 0
    except KeyboardInterrupt:
        if debug:
            raise
        return interrupted(prog)
    except XpukitError as exc:
        if debug:
            raise
        if any_error:
            return _any_error(exc, prog, max_chars)
        print(error_line(exc, prog, max_chars), file=sys.stderr, flush=True)
        return exc.exit_code
    except Exception as exc:
        if debug or not any_error:
            raise
        return _any_error(exc, prog, max_chars)


def _any_error(exc: Exception, prog: str | None, max_chars: int | None) -> int:
    """``error: TYPE: PROBLEM (fix: ...)``, cut at ``max_chars`` like a kit error's line."""
    name = type(exc).__name__
    message, fix = (exc.message, exc.fix) if isinstance(exc, XpukitError) else (str(exc), "")
    text = (message.strip().splitlines() or [""])[0]
    text = text if text.startswith(name) else f"{name}: {text}" if text else name
    print(error_line(XpukitError(text, fix), prog, max_chars), file=sys.stderr, flush=True)
    return EXIT_USAGE
