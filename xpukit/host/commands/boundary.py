"""The task bodies' one boundary: the kit's errors become one line and an exit code, the context is closed."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from xpukit.errors import guard
from xpukit.host.settings import Context

F = TypeVar("F", bound=Callable[..., int])


def guarded(func: F) -> F:
    """Run a command; a kit error prints one line and exits non-zero, Ctrl-C exits 130. The task's
    engine client, if one was opened, is closed once at the end."""

    @functools.wraps(func)
    def wrapper(ctx: Context, *args: Any, **kwargs: Any) -> int:
        def body() -> int:
            try:
                return func(ctx, *args, **kwargs)
            finally:
                ctx.close()

        return guard(body, debug=ctx.debug)  # the kit's one error boundary (xpukit/errors.py)

    return wrapper  # type: ignore[return-value]
