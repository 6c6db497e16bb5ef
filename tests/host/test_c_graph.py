"""The compiled launch path's C calls only downward, read from the sources with regular expressions
(our own C, written in one style): no #include cycle among xpukit's C files, and no cycle among the
.c files through the functions and globals each defines for the others. A file uses another when
it names a non-static function or global that file defines (a call, or its address in a table);
``ur->launch_core(...)`` counts too, so the dispatch's calls through the launcher's capsule are
edges from the dispatch's parts to the launcher's."""

from __future__ import annotations

import re
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.unit
RUNTIME = ROOT / "xpukit" / "runtime"

INCLUDE = re.compile(r'^#include\s+"([^"]+)"', re.M)
COMMENT_OR_STRING = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
# a definition starts at column 0 (the style of every C file here); static ones stay in their file
NOT_SHARED = r"^(?!static\b|extern\b|typedef\b|return\b|#)"
FUNCTION_DEF = re.compile(NOT_SHARED + r"[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\s*\([^;{]*\)\s*\{", re.M)
GLOBAL_DEF = re.compile(NOT_SHARED + r"[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*(?=[=;,])", re.M)
MORE_GLOBALS = re.compile(r",\s*\*?\s*([A-Za-z_]\w*)")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def c_files(root: Path = RUNTIME) -> list[Path]:
    return sorted(p for ext in ("*.c", "*.h") for p in root.rglob(ext))


def code(path: Path) -> str:
    """The source without comments and string literals (a name in either is no use)."""
    return COMMENT_OR_STRING.sub(" ", path.read_text(encoding="utf-8"))


def include_graph(files: list[Path], root: Path = RUNTIME) -> dict[str, set[str]]:
    """file -> the files of ours it includes (found beside it, or by name among ours)."""
    by_name = {p.name: p for p in files}
    graph: dict[str, set[str]] = {}
    for path in files:
        targets = INCLUDE.findall(path.read_text(encoding="utf-8"))
        graph[rel(path, root)] = {rel(by_name[t], root) for t in targets if t in by_name}
    return graph


def definitions(text: str) -> set[str]:
    """The non-static functions and globals a .c file defines at file scope."""
    names = set(FUNCTION_DEF.findall(text))
    for m in GLOBAL_DEF.finditer(text):
        line_end = text.find("\n", m.end())
        rest = text[m.end() : line_end if line_end >= 0 else len(text)]
        names.add(m.group(1))
        if rest.lstrip().startswith(","):  # `PyTypeObject *usm_type, *device_array_type;`
            names.update(MORE_GLOBALS.findall(rest.split(";")[0].split("=")[0]))
    return names


def use_graph(files: list[Path], root: Path = RUNTIME) -> dict[str, set[str]]:
    """.c file -> the .c files whose non-static functions or globals it names."""
    sources = [p for p in files if p.suffix == ".c"]
    texts = {rel(p, root): code(p) for p in sources}
    owner: dict[str, str] = {}
    for name, text in texts.items():
        for symbol in definitions(text):
            assert symbol not in owner, f"{symbol} is defined in both {owner[symbol]} and {name}"
            owner[symbol] = name
    return {
        name: {owner[i] for i in set(IDENTIFIER.findall(text)) if i in owner and owner[i] != name}
        for name, text in texts.items()
    }


def rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle as a path (its first file repeated at the end), or [] when there is none."""
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as e:
        return list(reversed(e.args[1]))
    return []


def test_the_readers_find_what_the_sources_hold():
    """The regular expressions see the definitions and edges that exist (a reader that finds
    nothing would pass the cycle tests below without checking anything)."""
    files = c_files()
    uses = use_graph(files)
    includes = include_graph(files)
    assert "ur/_launcher.h" in includes["triton/_dispatch.h"]
    assert "triton/_dispatch.h" in includes["triton/_dispatch_grid.c"]
    grid = definitions(code(RUNTIME / "triton" / "_dispatch_grid.c"))
    assert {"DispatchType", "GridCallType"} <= grid
    assert "gridcall_call" not in grid  # static
    assert {"usm_type", "device_array_type", "launcher_names"} <= definitions(code(RUNTIME / "ur" / "_launcher_args.c"))
    assert {"launch_prepare", "arg_error", "convert"} <= definitions(code(RUNTIME / "ur" / "_launcher_args.c"))
    parts = {"triton/_dispatch_key.c", "triton/_dispatch_shared.c"}
    assert uses["triton/_dispatch_grid.c"] >= parts
    assert "ur/_launcher_args.c" in uses["ur/_launcher.c"]
    assert "ur/_launcher_args.c" in uses["triton/_dispatch_key.c"]  # ur->own_address: through the capsule


def test_cycles_are_found(tmp_path):
    """A call back up is caught: two files that name each other's functions, and two headers that
    include each other."""
    (tmp_path / "a.c").write_text('#include "b.h"\nint up(void) { return down(); }\n')
    (tmp_path / "b.c").write_text('#include "a.h"\nint down(void) { return up() - 1; }\n')
    (tmp_path / "a.h").write_text('#include "b.h"\n')
    (tmp_path / "b.h").write_text('#include "a.h"\n')
    files = c_files(tmp_path)
    assert cycle(use_graph(files, tmp_path)) in (["a.c", "b.c", "a.c"], ["b.c", "a.c", "b.c"])
    assert cycle(include_graph(files, tmp_path)) in (["a.h", "b.h", "a.h"], ["b.h", "a.h", "b.h"])
    (tmp_path / "b.c").write_text("int down(void) { return 1; }\n")  # the call back up removed
    assert cycle(use_graph(c_files(tmp_path), tmp_path)) == []


def test_no_include_cycle():
    found = cycle(include_graph(c_files()))
    assert not found, "C include cycle: " + " -> ".join(found)


def test_no_call_cycle_between_c_files():
    found = cycle(use_graph(c_files()))
    assert not found, (
        "C files that call each other: " + " -> ".join(found) + " (move what both use into a file below them)"
    )
