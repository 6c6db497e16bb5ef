"""A session's record of its USM memory: the live ranges every pointer argument is checked against,
the recently freed ones (so an argument error can say "freed"), and the frees deferred while a
DLPack consumer still holds the memory. The session (:mod:`xpukit.runtime.ur.core`) owns one.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

from xpukit.runtime.ur import launcher as _launcher


class UsmLedger:
    """Live USM ranges (``table``, the AllocTable launchers check pointers against: each free bumps
    its generation, after which launchers set pointer arguments again), the last freed ones, and
    ``deferred``: allocations closed while exported, not freed yet (changed under
    ``objects._EXPORT_LOCK``)."""

    def __init__(self) -> None:
        self.table = _launcher.AllocTable()
        self._freed: collections.deque[tuple[int, int]] = collections.deque(maxlen=1024)
        self.deferred = 0

    def track(self, ptr: int, nbytes: int) -> None:
        """A new allocation: launches accept pointers into it."""
        self.table.add(ptr, nbytes)

    def untrack(self, ptr: int, nbytes: int) -> None:
        """An allocation is being freed: launches refuse it from here on (as freed, by name)."""
        if self.table.remove(ptr):
            self._freed.append((ptr, nbytes))

    def holds(self, value: int) -> bool:
        """Whether ``value`` points into a live allocation."""
        return self.table.find(value) is not None

    def explain(self, value: Any, others: Iterable[UsmLedger]) -> str:
        """Why ``value`` is not a usable pointer here (``others``: the other open sessions' ledgers)."""
        try:
            addr = getattr(value, "ptr", value)
            addr = addr if isinstance(addr, int) else addr.__index__()
        except Exception:
            addr = None
        if value is None or addr == 0:
            return "it is null"
        if not isinstance(addr, int) or isinstance(addr, bool):
            return f"a {type(value).__name__} is not device memory"
        if self.holds(addr):
            return "it is live device memory"  # not an error: callers only ask on a failed check
        if any(other.holds(addr) for other in others):
            return f"{addr:#x} belongs to another session; each session's memory is its own"
        if any(start <= addr < start + size for start, size in self._freed):
            return f"{addr:#x} lies in an allocation of this session that was freed"
        return f"{addr:#x} is not in any live allocation of this session (host memory or a stale address)"


__all__ = ["UsmLedger"]
