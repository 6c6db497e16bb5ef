"""What the launch benchmarks share: the timing loop, pyopencl on the same CPU device, the machine."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def per_call_us(fn: Callable[[], Any], reps: int) -> float:
    """Mean wall time of one call over ``reps`` calls, in microseconds."""
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps * 1e6


def pyopencl_on(runtime: Path, tmp: Path) -> tuple[Any, Any, Any, Any]:
    """(pyopencl module, context, queue, device) on the Intel CPU OpenCL runtime UR uses."""
    vendors = tmp / "vendors"
    vendors.mkdir()
    (vendors / "intel-cpu.icd").write_text(str(runtime) + "\n")
    os.environ["OCL_ICD_VENDORS"] = str(vendors)  # pyopencl's bundled ICD loader reads this, not OCL_ICD_FILENAMES
    import pyopencl as cl

    plats = [p for p in cl.get_platforms() if p.get_devices(device_type=cl.device_type.CPU)]
    dev = plats[0].get_devices(device_type=cl.device_type.CPU)[0]
    ctx = cl.Context([dev])
    return cl, ctx, cl.CommandQueue(ctx), dev


def machine() -> dict[str, Any]:
    import numpy as np
    import pyopencl
    import triton

    cpu = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "triton": triton.__version__,
        "pyopencl": pyopencl.VERSION_TEXT,
        "numpy": np.__version__,
    }


def report(result: dict[str, Any], path: Path | None) -> None:
    """Print the result as JSON, and write it to ``path`` too when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if path:
        path.write_text(text + "\n")


_CALLGRIND_REF = re.compile(r"\((\d+)\)(?: (.*))?")


def callgrind_calls(path: str | Path) -> tuple[int, list[tuple[str, str, int]]]:
    """One callgrind dump read: its total instructions, and each call as (caller, callee,
    inclusive cost), names resolved through the dump's compressed ``(id) name`` references."""
    names: dict[str, str] = {}

    def name(text: str) -> str:
        m = _CALLGRIND_REF.match(text.strip())
        if not m:
            return text.strip()
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), "?")

    fn, cfn, call, total = "", "", False, 0
    calls: list[tuple[str, str, int]] = []
    with open(path) as fh:
        for line in fh:
            c = line[:1]
            if c.isdigit() or c in "+-*":
                if call:  # the cost line after calls= is the call's inclusive cost
                    call = False
                    calls.append((fn, cfn, int(line.split()[-1])))
            elif line.startswith("fn="):
                fn = name(line[3:])
            elif line.startswith("cfn="):
                cfn = name(line[4:])
            elif line.startswith("calls="):
                call = True
            elif line.startswith(("summary:", "totals:")):
                total = int(line.split()[-1])
    return total, calls
