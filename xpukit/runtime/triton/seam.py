"""What Triton's compiled dispatch (``_xpukit_dispatch``, ``triton/_dispatch*.c``) reads from Python
objects, declared once (see :mod:`xpukit.runtime.ur.seam` for the scheme): handed to the C by
``_xpukit_dispatch.bind(table())`` when :mod:`xpukit.runtime.triton.dispatch` loads it, and checked
against the owner classes by ``tests/host/test_seam.py`` (the kit's classes) and
``tests/image/test_seam.py`` (Triton's too). The table of compiled launches' entries, :class:`Hit`,
is a record whose field positions the C takes from here, never from a tuple layout of its own.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from xpukit.runtime.ur.seam import Read

_STATE = "xpukit.runtime.triton.state:Active"
_DRIVER = "xpukit.runtime.triton.driver"
_JIT = "triton.runtime.jit:JITFunction"
_CK = "triton.compiler:CompiledKernel"


class Hit(NamedTuple):
    """One recorded launch of the compiled-launch table (``_FastTable.hits``: (table key, fast key)
    -> Hit), read by ``kernel[grid]`` in C (``Dispatch``) and by its Python twin ``PyDispatch``."""

    session: Any  # the session it was recorded on: another session's call takes the Python door
    submit: Any  # the loaded kernel's launch door (BoundKernel.submit)
    positions: tuple[int, ...] | None  # where the kernel's arguments are in the call (None: all of them, in order)
    kernel: Any  # Triton's CompiledKernel, what kernel[grid] returns
    entry: Any  # the table's _FastEntry: entry.meta(args, kwargs) for a grid callable


DISPATCH_READS: tuple[Read, ...] = (
    Read("ACTIVE_SESSION", _STATE, "session", "the calling context's session (read once per activation)"),
    Read("ACTIVE_STREAM", _STATE, "stream", "its Triton stream"),
    Read("ACTIVE_TABLE_KEY", _STATE, "table_key", "the first half of a hit's key (device, TRITON_DEBUG)"),
    Read("ACTIVE_DRIVER", _STATE, "driver", "the driver whose stats count launches"),
    Read("DRIVER_STATS", f"{_DRIVER}:URDriver", "stats", "the counters"),
    Read("STATS_LAUNCHES", f"{_DRIVER}:DriverStats", "launches", "incremented per launch from C"),
    Read("SESSION_ALLOCATIONS", "xpukit.runtime.ur.core:Session", "allocations", "the AllocTable keys are built on"),
    Read("SESSION_CLOSED", "xpukit.runtime.ur.core:Session", "closed", "true: the Python door raises the kit's error"),
    Read("STREAM_EVENTS", f"{_DRIVER}:Stream", "events", "not None while benchmarking: the Python door"),
    Read("STREAM_QUEUE", f"{_DRIVER}:Stream", "queue", "the Queue launched on"),
    Read("QUEUE_HANDLE", "xpukit.runtime.ur.objects:Queue", "raw_handle", "the queue's UR handle (None: closed)"),
    Read("QUEUE_CLOSED", "xpukit.runtime.ur.objects:Queue", "closed", "true: bk.launch takes the Python method"),
    Read("JIT_PRE_RUN_HOOKS", _JIT, "pre_run_hooks", "non-empty: Triton's path"),
    Read("JIT_USED_GLOBALS", _JIT, "used_global_vals", "non-empty: Triton's path (globals may have changed)"),
    Read("JIT_RUN", _JIT, "run", "the Python door, looked up per call (activate() swaps it)"),
    Read("RUN_GRID", f"{_JIT}.run", "grid", "the door's keyword for the grid"),
    Read("RUN_WARMUP", f"{_JIT}.run", "warmup", "the door's keyword, False"),
    Read("HOOK_ENTER", _CK, "launch_enter_hook", "a class attribute; not None: Triton's path"),
    Read("HOOK_EXIT", _CK, "launch_exit_hook", "a class attribute; not None: Triton's path"),
    Read("ENTRY_META", "xpukit.runtime.triton.fast_table:_FastEntry", "meta", "what a grid callable is given"),
)

# Fields of Hit the C reads, by position (Hit._fields says where).
HIT_READS: tuple[Read, ...] = (
    Read("HIT_SESSION", f"{__name__}:Hit", "session", "compared with the calling session by identity"),
    Read(
        "HIT_SUBMIT",
        f"{__name__}:Hit",
        "submit",
        "the launch door called (or, when it is the checked launcher's own launch, the launcher run in place)",
    ),
    Read("HIT_POSITIONS", f"{__name__}:Hit", "positions", "which call arguments are the kernel's"),
    Read("HIT_KERNEL", f"{__name__}:Hit", "kernel", "returned by the call"),
    Read("HIT_ENTRY", f"{__name__}:Hit", "entry", "its meta() for a grid callable"),
)

READS = DISPATCH_READS + HIT_READS


def table() -> dict[str, str | int]:
    """What ``_xpukit_dispatch.bind`` takes: role -> attribute name, or a Hit field's position."""
    out: dict[str, str | int] = {r.role: r.name for r in DISPATCH_READS}
    out.update({r.role: Hit._fields.index(r.name) for r in HIT_READS})
    return out


__all__ = ["DISPATCH_READS", "HIT_READS", "READS", "Hit", "table"]
