"""Timing on a queue from UR event profiling: the pieces :meth:`URDriver.do_bench` is made of.
Takes what it needs as arguments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xpukit.errors import XpukitError


def quantile(sorted_times: list[float], q: float) -> float:
    pos = q * (len(sorted_times) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_times) - 1)
    return sorted_times[lo] + (sorted_times[hi] - sorted_times[lo]) * (pos - lo)


def time_once(fn: Callable[[], Any], stream: Any) -> float:
    """One call of ``fn``: (end of its last launch - start of its first) in ms, from UR events."""
    events = stream.events
    assert events is not None
    release_events(stream)
    fn()
    if not events:
        raise XpukitError(
            "the benchmarked call launched no kernel through xpukit's UR driver",
            "benchmark a call that launches Triton kernels inside activate(session)",
        )
    events[-1].wait()
    start, _ = events[0].profile()
    _, end = events[-1].profile()
    release_events(stream)
    return (end - start) / 1e6


def release_events(stream: Any) -> None:
    events = stream.events
    if not events:
        return
    for ev in events:
        ev.close()
    events.clear()
