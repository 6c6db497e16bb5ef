"""Helpers the test_docs.py modules of several test folders share."""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import re
from pathlib import Path

from tests.support import ROOT


def normalise(line: str) -> str:
    """A printed line modulo what differs per machine and run: timings, counts, hashes, paths, the CPU."""
    line = re.sub(r"xpukit:(cpu|xpu)-[0-9a-f]{12}", r"xpukit:\1-<tag>", line)
    line = re.sub(r"/tmp/[\w.-]+", "<tmp>", line)
    line = re.sub(r" at /\S*ocloc\)", " at <ocloc>)", line)  # where ocloc lives: the image's or XPUKIT_OCLOC's
    line = re.sub(r"^device: .*? \[", "device: <device> [", line)
    line = re.sub(r"\d+(\.\d+)*", "<n>", line)
    return " ".join(line.split())


HOST_DEPENDENT = (
    "xpukit: ca-bundle:",
    "xpukit: warning:",
    "xpukit: base:",
    "xpukit: profile auto",
    "xpukit: image ",  # ... is missing; building it
    "xpukit: building",
    "xpukit: build:",
)


def assert_sample_matches(sample: list[str], printed: list[str]) -> None:
    """Every sample line is printed, in order (modulo normalise), and every kit line printed is shown;
    a host-dependent line only has to be printed somewhere (where settings are resolved varies)."""
    got = [normalise(ln) for ln in printed if ln.strip()]
    position = 0
    for line in sample:
        want = normalise(line)
        if line.startswith(HOST_DEPENDENT):
            assert want in got, f"the sample shows {line!r}, which the command does not print"
            continue
        assert want in got[position:], f"the sample shows {line!r}, which the command does not print:\n" + "\n".join(
            got
        )
        position = got.index(want, position) + 1
    shown = {normalise(ln) for ln in sample}
    for line in printed:
        if line.startswith("xpukit: ") and not line.startswith(HOST_DEPENDENT):
            assert normalise(line) in shown, f"the command prints {line!r}, which the sample leaves out"


def sample_after(doc: str, marker: str) -> list[str]:
    """The lines of the first fenced block after the line containing ``marker``."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    rest = text[text.index(marker) :]
    block = re.search(r"```\w*\n(.*?)```", rest, re.DOTALL)
    assert block, f"{doc}: no fenced block after {marker!r}"
    return block.group(1).splitlines()


# ---------------------------------------------------------------- names a doc gives: paths, modules, functions

DOC_FILES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
# What a repository path in a doc starts with: the checkout's own top-level entries.
TOP_LEVEL = tuple(sorted(p.name for p in ROOT.iterdir() if not p.name.startswith(".git")))
# Paths a doc may name before they exist: files the kit writes (and where it says so).
WRITTEN_BY_THE_KIT = {"env/lock/images.toml": "xpukit/host/image/registry.py"}
FENCE = re.compile(r"^\s*(```+|~~~+)")
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
PLACEHOLDER = re.compile(r"<[^>]*>|\{[^}]*\}|\*|\.\.\.|\b[A-Z][A-Z_]{2,}\b|\[|\$|~")
DOTTED = re.compile(r"^(xpukit|tests)(\.[A-Za-z_]\w*)+(\(\))?$")
CLASS_MEMBER = re.compile(r"^([A-Z][A-Za-z0-9]+)\.([a-z_]\w*)(\(\))?$")


@dataclasses.dataclass(frozen=True)
class Reference:
    doc: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def inline_spans(doc: Path) -> list[Reference]:
    """Every inline code span and link target outside fenced blocks, with its line."""
    found, inside = [], False
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if inside:
            continue
        found += [Reference(doc, number, m.group(1).strip()) for m in SPAN.finditer(line)]
        prose = SPAN.sub("", line)
        found += [Reference(doc, number, "link:" + m.group(1)) for m in LINK.finditer(prose)]
    return found


def _defined_names(tree: ast.AST) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            names |= {t.id: node for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names |= {(a.asname or a.name).split(".")[0]: node for a in node.names}
        elif isinstance(node, ast.If | ast.Try):  # names bound under `if TYPE_CHECKING`, `try: import`
            names |= _defined_names(node)
            for handler in getattr(node, "handlers", []):
                names |= _defined_names(handler)
            names |= _defined_names(ast.Module(body=getattr(node, "orelse", []), type_ignores=[]))
    if isinstance(tree, ast.ClassDef):  # attributes set in methods: self.NAME = ...
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.setdefault(node.attr, node)
    return names


@functools.cache
def _module_tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _module_file(dotted: str) -> Path | None:
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def check_dotted(text: str) -> str | None:
    """``xpukit.a.b[.Name[.member]]``: the longest prefix that is a module, then each name defined
    in it (or in the class before it). None when it all exists, else what is missing."""
    parts = text.removesuffix("()").split(".")
    for cut in range(len(parts), 0, -1):
        module = _module_file(".".join(parts[:cut]))
        if module is None and not (cut == len(parts) and ROOT.joinpath(*parts).is_dir()):
            continue
        if module is None:
            return None  # a folder (a namespace such as tests.support's parent)
        node: ast.AST = _module_tree(module)
        for name in parts[cut:]:
            names = _defined_names(node)
            if name not in names:
                return f"{'.'.join(parts[:cut])} has no {name!r}"
            node = names[name]
            if not isinstance(node, ast.ClassDef):
                break  # a function's or a value's attributes are not read
        return None
    return f"no module {parts[0]}"


@functools.cache
def classes() -> dict[str, list[ast.ClassDef]]:
    """Every class the kit defines (xpukit/, examples/), by name."""
    found: dict[str, list[ast.ClassDef]] = {}
    for path in [*(ROOT / "xpukit").rglob("*.py"), *(ROOT / "examples").glob("*.py")]:
        for node in ast.walk(_module_tree(path)):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(node)
    return found


def check_member(text: str) -> str | None:
    """``Class.member``: when the kit defines a class of that name, one of them has the member."""
    match = CLASS_MEMBER.match(text)
    if not match or match.group(1) not in classes():
        return None
    cls, member = match.group(1), match.group(2)
    return None if _has_member(cls, member, set()) else f"class {cls} has no {member!r}"


def _has_member(cls: str, member: str, seen: set[str]) -> bool:
    """Whether a kit class of that name, or a kit class it derives from, defines ``member``."""
    seen.add(cls)
    for node in classes().get(cls, []):
        if member in _defined_names(node):
            return True
        bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
        if any(b not in seen and b in classes() and _has_member(b, member, seen) for b in bases):
            return True
    return False


def check_path(text: str, doc: Path) -> str | None:
    """A checkout path (``dir/file``, ``file.py:function``), or a link to a file: it exists (and the
    function after ``:`` is defined in the file)."""
    if text.startswith("link:"):
        target = text.removeprefix("link:")
        if "://" in target or target.startswith("mailto:"):
            return None
        return None if (doc.parent / target).exists() else f"the link target {target} does not exist"
    path_text, _, function = text.replace("::", ":").partition(":")
    path_text = path_text.removeprefix("./")
    if path_text.split("/")[0] not in TOP_LEVEL or " " in path_text:
        return None
    if not (ROOT / path_text.rstrip("/")).exists():
        if path_text in WRITTEN_BY_THE_KIT:
            return None
        return f"{path_text} does not exist"
    named = function and path_text.endswith(".py") and re.fullmatch(r"[A-Za-z_]\w*", function)
    if named and function not in _defined_names(_module_tree(ROOT / path_text)):
        return f"{path_text} defines no {function!r}"
    return None


def check_reference(ref: Reference) -> str | None:
    """What is wrong with one name a doc gives (None: it exists, or it is no checkable name)."""
    text = ref.text
    if text.startswith("link:"):
        return check_path(text, ref.doc)
    if " " in text:  # a command line: each word that names a path or a module
        for word in text.split():
            if PLACEHOLDER.search(word) or word.startswith(("'", '"')):  # a value in a message
                continue
            problem = check_word(word.strip('",;()'), ref.doc)
            if problem:
                return problem
        return None
    return None if PLACEHOLDER.search(text) else check_word(text, ref.doc)


def check_word(text: str, doc: Path) -> str | None:
    if "/" in text or text in TOP_LEVEL:
        return check_path(text, doc)
    if DOTTED.match(text):
        return check_dotted(text)
    call = re.fullmatch(r"([a-z_]\w*)\(.*\)", text)
    if call and call.group(1) not in dir(builtins):  # a function of the kit's, called by its name
        return None if call.group(1) in function_names() else f"no function {call.group(1)} in the checkout"
    if re.fullmatch(r"[a-z_][\w]*\.py", text):  # a bare file name: some file of the checkout has it
        return None if text in python_file_names() else f"no file {text} in the checkout"
    return check_member(text)


@functools.cache
def function_names() -> frozenset[str]:
    """Every function and method the checkout defines, or calls on another library's object
    (``lib.urKernelSetArgLocal(...)``, ``triton_driver.reset_active()``), and UPSTREAM_FUNCTIONS."""
    names = set(UPSTREAM_FUNCTIONS)
    for path in ROOT.rglob("*.py"):
        if ".git" not in path.parts:
            for node in ast.walk(_module_tree(path)):
                if isinstance(node, ast.FunctionDef):
                    names.add(node.name)
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    names.add(node.func.attr)
    return frozenset(names)


# Functions of other projects a doc names that the kit's code never calls by that name.
UPSTREAM_FUNCTIONS = {"triton_key": "triton.compiler.compiler: part of every Triton cache key"}


@functools.cache
def python_file_names() -> frozenset[str]:
    return frozenset(p.name for p in ROOT.rglob("*.py") if ".git" not in p.parts)


def doc_references() -> list[Reference]:
    return [ref for doc in DOC_FILES for ref in inline_spans(doc)]


def module_table_problems() -> list[str]:
    """Rows of a doc table that name a module file first (``| `xpukit/runtime/ur/core.py` | ... |``):
    every class (CamelCase) or called function (``name()``) the row's other cells name in backticks
    is defined in one of the row's files."""
    problems = []
    for doc in DOC_FILES:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            cells = line.split(" | ")
            if not line.startswith("| `") or len(cells) < 2:
                continue
            files = [f for f in re.findall(r"`([\w/.-]+\.py)`", cells[0]) if (ROOT / f).is_file()]
            if not files:
                continue
            defined: set[str] = set()
            for f in files:
                tree = _module_tree(ROOT / f)
                defined |= set(_defined_names(tree))
                defined |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
            rest = " | ".join(cells[1:])
            for name, call in re.findall(r"`([A-Za-z_]\w*)(\([^`]*\))?`", rest):
                named = call or (name[0].isupper() and not name.isupper())
                if named and name not in defined:
                    problems.append(f"{doc.relative_to(ROOT)}:{number}: {', '.join(files)} defines no {name}")
    return problems
