"""Source locations for the instructions Triton's LLVM IR leaves without one (DPAS above all).

triton-xpu 3.3 lowers ``tl.dot`` to calls of ``intel_sub_group_*_matrix_mad_*`` that carry no
``!dbg`` (none of the 64 of a pvc matmul), while the instructions building their operands carry the
``tl.dot`` line. LLVM's loop passes drop the location of what they hoist out of a loop (a block
load's address set-up: 18 instructions of a pvc matmul, in the loop's preheader). IGC's line table
then puts each such instruction on whatever row precedes it after scheduling (a ``for``, a
``tl.load``), and it hops between lines from one edit to the next. The kit owns the compile
pipeline (its zebin stage), so before the SPIR-V is made:

- a call (or a store, a branch: what defines no value) gets the location of the op it came from:
  that of its operands' definitions (the accumulator first: the last operand), else the last
  located instruction of its basic block;
- a value with no location gets that of the first located instruction that uses it (hoisted address
  arithmetic goes with the block load it feeds);
- a location borrowed from inside an inlined function (``tl.sum``'s body) is its call site's, the
  kernel's own line: what LLVM moved is outside the inlined ranges IGC records, where the report
  could not fold a library line into its call site;
- whatever is still without one gets line 0 in its function's scope, DWARF's "no source location",
  which the report shows as its own row instead of counting it on a neighbour.

Phis are left alone (their moves belong to the edges, not to a line). Only functions that have debug
info are touched (a location is valid only in its own function's scope). Text-level on purpose: the
IR is Triton's ``llir`` string stage, and each edit is one metadata attachment appended to a line
(and, for line 0, one ``!DILocation`` node per function at the end).
"""

from __future__ import annotations

import re

VERSION = "llir-locations/2"  # part of the report compile's cache key (tritonc)

_DEFINE = re.compile(r"^define\b.*\s!dbg\s+(![0-9]+)")
_ASSIGN = re.compile(r"^\s+(%[-\w.$]+)\s*=\s*(.*)$")
_DBG = re.compile(r",\s*!dbg\s+(![0-9]+)")
_OPERAND = re.compile(r"%[-\w.$]+")
_LABEL = re.compile(r"^[-\w.$]+:")
_METADATA = re.compile(r"^!([0-9]+)\s*=")
_INLINED_AT = re.compile(r"^(![0-9]+)\s*=\s*(?:distinct\s+)?!DILocation\(.*\binlinedAt:\s*(![0-9]+)")
# Lines that take no location: phis (edge moves) and what carries no code of its own.
_NO_CODE = ("phi", "unreachable")


def locate_calls(llir: str) -> tuple[str, int]:
    """``llir`` with a ``!dbg`` on each instruction that had none (see the module docstring), and
    how many were given one."""
    lines = llir.splitlines()
    call_sites = _call_sites(lines)
    given = 0
    next_node = 1 + max((int(m.group(1)) for m in map(_METADATA.match, lines) if m), default=-1)
    nodes: list[str] = []
    start = None
    scope = None
    for index, line in enumerate(lines):
        if line.startswith("define"):
            match = _DEFINE.match(line)
            start, scope = (index + 1, match.group(1)) if match else (None, None)
        elif line.startswith("}") and start is not None and scope is not None:
            body = range(start, index)
            given += _locate_calls(lines, body, call_sites) + _locate_values(lines, body, call_sites)
            unknown = f"!{next_node}"
            left = _give_rest(lines, body, unknown)
            if left:
                nodes.append(f"{unknown} = !DILocation(line: 0, scope: {scope})")
                next_node += 1
                given += left
            start = None
    text = "\n".join(lines + nodes)
    return (text + "\n" if llir.endswith("\n") or nodes else text), given


def _instruction(line: str) -> tuple[str | None, str] | None:
    """(the value it defines or None, its text after ``=``) of an instruction line; None otherwise."""
    if not line.startswith("  "):
        return None
    assign = _ASSIGN.match(line)
    return (assign.group(1), assign.group(2)) if assign else (None, line.strip())


def _takes_location(body: str) -> bool:
    return body.split(None, 1)[0] not in _NO_CODE if body else False


def _call_sites(lines: list[str]) -> dict[str, str]:
    """Each inlined location's outermost call site (``inlinedAt`` followed to the kernel's own scope)."""
    parent = {m.group(1): m.group(2) for m in map(_INLINED_AT.match, lines) if m}
    out = {}
    for location in parent:
        site, seen = location, set()
        while site in parent and site not in seen:
            seen.add(site)
            site = parent[site]
        out[location] = site
    return out


def _locate_calls(lines: list[str], body: range, call_sites: dict[str, str]) -> int:
    """Calls and what defines no value (a store, a branch): their operands' definitions' location
    (the last operand first), else the block's last."""
    located: dict[str, str] = {}
    block_last: str | None = None
    given = 0
    for index in body:
        line = lines[index]
        if _LABEL.match(line):
            block_last = None
            continue
        parsed = _instruction(line)
        if parsed is None:
            continue
        name, text = parsed
        found = _DBG.search(line)
        if found is None and (_is_call(text) or name is None) and _takes_location(text):
            origin = next((located[o] for o in reversed(_OPERAND.findall(text)) if o in located), block_last)
            if origin is not None:
                lines[index] = line = f"{line}, !dbg {call_sites.get(origin, origin)}"
                found = _DBG.search(line)
                given += 1
        if found is not None:
            block_last = found.group(1)
            if name:
                located[name] = found.group(1)
    return given


def _locate_values(lines: list[str], body: range, call_sites: dict[str, str]) -> int:
    """Values: the location of their first located user, latest definitions first so that a chain
    of hoisted values takes its consumer's."""
    users: dict[str, list[int]] = {}
    defined: list[tuple[int, str]] = []
    for index in body:
        parsed = _instruction(lines[index])
        if parsed is None:
            continue
        name, text = parsed
        for operand in set(_OPERAND.findall(_DBG.sub("", text))):
            users.setdefault(operand, []).append(index)
        if name and _DBG.search(lines[index]) is None and _takes_location(text):
            defined.append((index, name))
    given = 0
    for index, name in reversed(defined):
        origin = next((m.group(1) for u in users.get(name, ()) if (m := _DBG.search(lines[u]))), None)
        if origin is not None:
            lines[index] += f", !dbg {call_sites.get(origin, origin)}"
            given += 1
    return given


def _give_rest(lines: list[str], body: range, unknown: str) -> int:
    """Line 0 (``unknown``) for every instruction still without a location that takes one."""
    given = 0
    for index in body:
        parsed = _instruction(lines[index])
        if parsed is None or _DBG.search(lines[index]) is not None or not _takes_location(parsed[1]):
            continue
        lines[index] += f", !dbg {unknown}"
        given += 1
    return given


def _is_call(body: str) -> bool:
    words = body.split(None, 2)
    return bool(words) and (words[0] == "call" or (words[0] in ("tail", "musttail", "notail") and len(words) > 1))
