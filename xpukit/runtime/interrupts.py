"""Ctrl-C during start-up, made deterministic.

A SIGINT that lands while a C extension initialises (numpy's, say) comes out as
``ImportError: initialization failed``, and packages that import optional modules under
``except ImportError`` then carry on as if nothing happened: the interrupt is lost and the program
runs to the end. :func:`deferred_sigint` holds SIGINT over such imports and raises
``KeyboardInterrupt`` once they are complete.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def deferred_sigint() -> Iterator[None]:
    """Hold SIGINT inside the block; raise ``KeyboardInterrupt`` after it if one arrived.

    Only the main thread can set signal handlers; elsewhere the block runs unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt
