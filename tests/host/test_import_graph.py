"""The package's import graph, read from the source with ast: no cycles, and the runtime library
never imports the host kit. Every import counts, including those inside functions, so a cycle
cannot hide behind a function-level import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.unit
PACKAGE = REPO_ROOT / "xpukit"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str], name: str = "") -> set[str]:
    """The package modules ``path`` imports (``from a import b`` counts b when b is a module)."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from pkg import mod` is an edge to pkg.mod; to pkg only for names that are not modules.
            subs = [f"{base}.{alias.name}" for alias in node.names]
            targets = [sub if sub in modules else base for sub in subs]
        else:
            continue
        for target in targets:
            # `import xpukit.host.versions.pins` also runs the packages above it; the module itself is the edge
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    files = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
    modules = {module_name(p) for p in files}
    return {module_name(p): imports_of(p, modules) for p in files}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle as a path (first node repeated at the end), or [] when the graph has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return []


def test_the_cycle_finder_finds_a_cycle_and_accepts_a_tree():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_sees_function_level_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import os\n\ndef f():\n    from xpukit import n\n    import xpukit.o.p\n    from . import q\n")
    modules = {"xpukit", "xpukit.m", "xpukit.n", "xpukit.o", "xpukit.o.p", "xpukit.q"}
    assert imports_of(source, modules, "xpukit.m") == {"xpukit.n", "xpukit.o.p", "xpukit.q"}
    graph = import_graph()
    # zebin_stage.install used to import tritonc inside a function; tritonc imports zebin_stage.
    assert "xpukit.runtime.triton.zebin_stage" in graph["xpukit.runtime.triton.tritonc"]
    assert "xpukit.runtime.triton.tritonc" not in graph["xpukit.runtime.triton.zebin_stage"]


def test_triton_on_ur_depends_one_way():
    """xpukit.runtime.triton in layers, each importing only what is below it: the compile side
    (zebin_stage, the caches, tritonc), the seam (what the C reads), the compiled dispatch's switch
    (dispatch), the launch door (launch), then state -> bench, binder -> driver -> fast_table ->
    activate (state imports nothing of the package)."""
    graph = import_graph()
    below: dict[str, set[str]] = {"state": set(), "bench": set(), "pointer_params": set()}
    below["program_cache"] = set()
    below["seam"] = set()
    below["dispatch"] = {"seam"}
    below["kernel_cache"] = {"program_cache"}
    below["triton_cache"] = {"kernel_cache"}
    below["debug_locations"] = set()
    below["zebin_stage"] = {"debug_locations"}
    below["tritonc"] = {"debug_locations", "kernel_cache", "triton_cache", "zebin_stage"}
    below["launch"] = {"dispatch", "kernel_cache", "program_cache", "tritonc"}
    below["binder"] = {"state"}
    below["driver"] = {"state", "bench", "launch", "kernel_cache", "tritonc"}
    below["fast_table"] = {"state", "dispatch", "driver", "launch", "pointer_params", "seam", "tritonc"}
    below["activate"] = {"state", "bench", "binder", "driver", "fast_table"}
    files = {p.stem for p in (PACKAGE / "runtime" / "triton").glob("*.py") if p.stem != "__init__"}
    assert files == set(below), f"a module of xpukit.runtime.triton has no layer here: {sorted(files ^ set(below))}"
    for layer in below:
        inside = {m.rpartition(".")[2] for m in graph[f"xpukit.runtime.triton.{layer}"] if ".triton." in m}
        assert inside <= below[layer], f"xpukit.runtime.triton.{layer} imports {sorted(inside - below[layer])}"


def test_unified_runtime_in_floors():
    """xpukit.runtime.ur in floors, each importing only what is below it: the binding (_api, errors,
    loader, launcher, seam), the USM ledger, the interop floor (everything that meets dpnp/dpctl,
    SYCL and DLPack: ur/interop/), device discovery, the objects a session owns, the session (core). The interop floor
    knows neither objects nor sessions (it takes them as arguments), and nothing below it imports it.
    Every module of xpukit/runtime/ur/ has a floor here, so a new one is placed."""
    graph = import_graph()
    binding = {"_api", "errors", "loader", "launcher", "seam"}
    interop = {
        f"interop.{p.stem}" for p in (PACKAGE / "runtime" / "ur" / "interop").glob("*.py") if p.stem != "__init__"
    }
    below: dict[str, set[str]] = {m: binding for m in binding}
    below["discovery"] = binding | {"interop.sycl"}  # a session over native handles releases those UR did not take
    below["usm"] = binding
    below.update({m: binding | interop for m in interop})
    below["objects"] = binding | interop | {"usm"}
    below["core"] = binding | interop | {"discovery", "objects", "usm"}
    ur = PACKAGE / "runtime" / "ur"
    files = {str(p.relative_to(ur).with_suffix("")).replace("/", ".") for p in ur.rglob("*.py")}
    files -= {"__init__", "interop.__init__"}
    assert files == set(below), f"a module of xpukit.runtime.ur has no floor here: {sorted(files ^ set(below))}"
    assert interop >= {"interop.memory", "interop.arrays", "interop.state", "interop.sycl", "interop.export"}
    for floor in below:
        inside = {m.removeprefix("xpukit.runtime.ur.") for m in graph[f"xpukit.runtime.ur.{floor}"]}
        inside = {m for m in inside if not m.startswith("xpukit.")}
        assert inside <= below[floor], f"xpukit.runtime.ur.{floor} imports {sorted(inside - below[floor])}"


def test_the_runtime_subjects_depend_one_way():
    """ground (scratch, cache_auth, interrupts) <- ur, offline <- triton, image <- kernels. Offline tools
    (ocloc, the zebin and ISA readers) need no Triton and import only the ground; the kernel-file
    front ends (kernels: compile, kernel_report) are the one subject above Triton; the binding knows
    nothing above it. No module is let through by name."""
    graph = import_graph()
    ground = {"xpukit.runtime.scratch", "xpukit.runtime.cache_auth", "xpukit.runtime.interrupts"}
    allowed = {
        "ground": set(),
        "ur": {"ur"},
        "offline": {"offline", "ground"},
        "image": {"image", "ur", "offline", "ground"},
        "triton": {"triton", "ur", "offline", "ground"},
        "kernels": {"kernels", "triton", "ur", "offline", "ground"},
    }

    def subject(module: str) -> str:
        return "ground" if module in ground else module.split(".")[2]

    for name, targets in graph.items():
        if not name.startswith("xpukit.runtime.") or name.count(".") < 2:
            continue
        for target in targets:
            if not target.startswith("xpukit.runtime.") or target == name:
                continue
            assert subject(target) in allowed[subject(name)], f"{name} imports {target}"
    subjects = {p.name for p in (PACKAGE / "runtime").iterdir() if (p / "__init__.py").exists()}
    assert subjects | {"ground"} == set(allowed), f"a subpackage of xpukit.runtime with no layer: {sorted(subjects)}"


def test_no_import_cycles():
    graph = import_graph()
    assert len(graph) > 20, sorted(graph)
    cycle = find_cycle(graph)
    assert not cycle, " -> ".join(cycle)


def test_runtime_never_imports_the_host_kit():
    graph = import_graph()
    offenders = {
        name: sorted(t for t in targets if t == "xpukit.host" or t.startswith("xpukit.host."))
        for name, targets in graph.items()
        if name.startswith("xpukit.runtime")
    }
    assert not {k: v for k, v in offenders.items() if v}


# xpukit.host in layers: the core (modules directly in xpukit/host/), then the subjects, each importing
# the core and the subjects of a lower rank (never one of its own rank), then the task bodies.
HOST_CORE = {"engine", "build_cli", "processes", "podman", "settings", "ui", "gpu", "inputs"}
HOST_RANKS = {"versions": 1, "image": 3, "run": 4, "doctor": 5, "matrix": 5, "verify": 5, "commands": 6}


def host_layer(module: str) -> tuple[str, int]:
    """(layer, rank) of a module of xpukit.host: ("core", 0) or (subpackage, its rank)."""
    part = module.split(".")[2] if module.count(".") >= 2 else ""
    if part in HOST_CORE or not part:
        return "core", 0
    return part, HOST_RANKS[part]


def host_layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import inside xpukit.host that goes sideways or up: ``a -> b`` where b's rank is not below
    a's (a subject's own modules may import each other, as the core's may)."""
    found = []
    for name, targets in sorted(graph.items()):
        if not name.startswith("xpukit.host."):
            continue
        layer, rank = host_layer(name)
        for target in sorted(targets):
            if not target.startswith("xpukit.host."):
                continue
            other, other_rank = host_layer(target)
            if other != layer and other_rank >= rank:
                found.append(f"{name} ({layer}) -> {target} ({other})")
    return found


def test_the_host_layer_check_catches_an_edge_up_or_sideways():
    graph = {
        "xpukit.host.engine": {"xpukit.host.versions.pins"},  # core -> subject: up
        "xpukit.host.verify.rebuild": {"xpukit.host.matrix.cells", "xpukit.host.verify.compare"},  # sideways
        "xpukit.host.run.testing": {"xpukit.host.image.plan", "xpukit.host.ui"},  # down: fine
    }
    assert host_layer_violations(graph) == [
        "xpukit.host.engine (core) -> xpukit.host.versions.pins (versions)",
        "xpukit.host.verify.rebuild (verify) -> xpukit.host.matrix.cells (matrix)",
    ]


def test_the_host_kit_depends_one_way():
    """core < versions < image < run < doctor, matrix, verify < commands < tasks.py: each imports
    only the layers below it. Every module of xpukit/host/ has a layer here, so a new one is placed."""
    graph = import_graph()
    host = PACKAGE / "host"
    assert {p.stem for p in host.glob("*.py")} - {"__init__"} == HOST_CORE
    assert {p.name for p in host.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(HOST_RANKS)
    assert not host_layer_violations(graph), "\n".join(host_layer_violations(graph))


# Folder names that tools skip by default: pytest's norecursedirs, ruff's default excludes, and what
# .gitignore conventions (this checkout's among them) leave out, which ripgrep, fd and editors honour.
SKIPPED_BY_TOOLS = {"build", "dist", "out", "node_modules", "venv", "_build", "buck-out", "site-packages", "target"}
SOURCE_TREES = ("xpukit", "tests", "scripts", "benchmarks", "examples")


def folders_tools_skip(root: Path) -> list[str]:
    """Folders of the source trees that some tool would not look into: a name in SKIPPED_BY_TOOLS, or
    one a .gitignore folder pattern matches (a ``!`` re-include in .gitignore hides it from git only)."""
    ignore = root / ".gitignore"
    lines = ignore.read_text().splitlines() if ignore.exists() else []
    patterns = [line.strip().strip("/") for line in lines if line.strip() and line[0] not in "#!"]
    names = SKIPPED_BY_TOOLS | {p for p in patterns if "/" not in p and "*" not in p}
    found = []
    for tree in SOURCE_TREES:
        for folder in sorted((root / tree).rglob("*")) if (root / tree).is_dir() else []:
            if folder.is_dir() and "__pycache__" not in folder.parts and folder.name in names:
                found.append(folder.relative_to(root).as_posix())
    reincluded = [line for line in lines if line.startswith("!") and line[1:].split("/")[0] in SOURCE_TREES]
    return found + [f".gitignore re-includes {line[1:]}" for line in reincluded]


def test_no_folder_of_the_source_is_one_tools_skip():
    """ripgrep, pytest and ruff skip folders named build/, dist/, node_modules/ ... by default: a module
    there is invisible to a search. The image's build code lives in xpukit/host/image/, the pins' in
    xpukit/host/versions/."""
    assert folders_tools_skip(REPO_ROOT) == [], "rename these folders (one name per question, not build/)"


def test_the_skipped_folder_check_catches_build_and_a_reinclude(tmp_path):
    (tmp_path / "xpukit" / "host" / "build").mkdir(parents=True)
    (tmp_path / "tests" / "cache_dir").mkdir(parents=True)
    (tmp_path / "tests" / "builds").mkdir(parents=True)
    (tmp_path / ".gitignore").write_text("# caches\ncache_dir/\n*.pyc\n!xpukit/host/build/\n")
    assert folders_tools_skip(tmp_path) == [
        "xpukit/host/build",
        "tests/cache_dir",
        ".gitignore re-includes xpukit/host/build/",
    ]


def test_tasks_py_calls_the_task_bodies_and_the_core_only():
    """tasks.py parses options (the core: settings, inputs) and calls xpukit.host.commands, nothing else of the kit."""
    modules = set(import_graph())
    targets = imports_of(REPO_ROOT / "tasks.py", modules, "tasks")
    kit = {t for t in targets if t.startswith("xpukit.host.")}
    assert any(t.startswith("xpukit.host.commands.") for t in kit)
    assert all(host_layer(t)[0] in ("core", "commands") for t in kit), sorted(kit)
    assert {t for t in targets if not t.startswith("xpukit.host")} <= {"xpukit.errors"}, sorted(targets)


def test_targets_is_ground_level():
    """xpukit.targets holds the presets every layer shares: it imports nothing of the kit but errors."""
    assert import_graph()["xpukit.targets"] <= {"xpukit.errors", "xpukit"}
