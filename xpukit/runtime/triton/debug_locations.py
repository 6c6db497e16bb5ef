"""Source locations for the calls Triton's LLVM IR leaves without one (DPAS above all).

triton-xpu 3.3 lowers ``tl.dot`` to calls of ``intel_sub_group_*_matrix_mad_*`` that carry no
``!dbg`` (none of the 64 of a pvc matmul), while the instructions building their operands carry the
``tl.dot`` line. IGC's line table then puts each DPAS on whatever row precedes it after scheduling
(a ``for``, a ``tl.load``), and it hops between lines from one edit to the next. The kit owns the
compile pipeline (its zebin stage), so before the SPIR-V is made each such call gets the location
of the op it came from: that of its operands' definitions (the accumulator first: the last
operand), else the last located instruction of its basic block. Only calls, and only in functions
that have debug info (a location is valid only in its own function's scope).

Text-level on purpose: the IR is Triton's ``llir`` string stage, and the edit is one metadata
attachment appended to a line.
"""

from __future__ import annotations

import re

VERSION = "llir-call-locations/1"  # part of the report compile's cache key (tritonc)

_DEFINE = re.compile(r"^define\b.*\s!dbg\s+(![0-9]+)")
_ASSIGN = re.compile(r"^\s+(%[-\w.$]+)\s*=\s*(.*)$")
_DBG = re.compile(r",\s*!dbg\s+(![0-9]+)")
_OPERAND = re.compile(r"%[-\w.$]+")
_LABEL = re.compile(r"^[-\w.$]+:")


def locate_calls(llir: str) -> tuple[str, int]:
    """``llir`` with a ``!dbg`` on each call that had none and whose origin is known; and how many."""
    out: list[str] = []
    located: dict[str, str] = {}
    block_last: str | None = None
    in_function = False
    given = 0
    for line in llir.splitlines():
        if line.startswith("define"):
            in_function = _DEFINE.match(line) is not None
            located, block_last = {}, None
        elif line.startswith("}"):
            in_function = False
        elif in_function and _LABEL.match(line):
            block_last = None
        elif in_function and line.startswith("  "):
            found = _DBG.search(line)
            assign = _ASSIGN.match(line)
            body = assign.group(2) if assign else line.strip()
            if found is None and _is_call(body):
                origin = next((located[o] for o in reversed(_OPERAND.findall(body)) if o in located), block_last)
                if origin is not None:
                    line += f", !dbg {origin}"
                    found = _DBG.search(line)
                    given += 1
            if found is not None:
                block_last = found.group(1)
                if assign:
                    located[assign.group(1)] = found.group(1)
        out.append(line)
    text = "\n".join(out)
    return (text + "\n" if llir.endswith("\n") else text), given


def _is_call(body: str) -> bool:
    words = body.split(None, 2)
    return bool(words) and (words[0] == "call" or (words[0] in ("tail", "musttail", "notail") and len(words) > 1))
