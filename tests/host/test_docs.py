"""README.md and docs/**/*.md against the code: every `invoke ...` line they show runs, every setting
and error message they name exists, and every generated table matches env/pins.toml.

Commands run docker-free: DOCKER_HOST points at a socket that does not exist, and tasks that can run
in the image get ``--where container`` unless the line says otherwise, so a dry run prints the
``docker run`` line without asking an engine. Every command gets ``--dry-run``, or ``--help`` where
the task has no dry run or the line is a template (placeholders such as NAME); nothing is ever run
for real. A failure names the file and line of the doc.
"""

from __future__ import annotations

import ast
import concurrent.futures
import dataclasses
import functools
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support import docs as docs_support
from tests.support.docs import check_reference
from xpukit import layout
from xpukit.host import settings as config
from xpukit.host.versions import docs_tables, pins

pytestmark = pytest.mark.unit
ROOT = layout.REPO_ROOT
DOCS = docs_tables.doc_files(ROOT)
FENCE_RE = re.compile(r"^(```+|~~~+)")
INLINE_RE = re.compile(r"(`+)(.+?)\1", re.DOTALL)
# A token that stands for something the reader fills in: NAME, PATH, FILE, N, a|b alternatives, ...
PLACEHOLDER_RE = re.compile(r"^(?:[A-Z][A-Z_]*|.*\|.*|.*\.\.\..*)$")
CODE_DIRS = ("xpukit", "examples", "scripts", "tests", "benchmarks")
CODE_FILES = ("tasks.py", "Dockerfile", ".ci/run", "invoke.yaml")


@dataclasses.dataclass(frozen=True)
class DocLine:
    path: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _without_fences(text: str) -> tuple[str, list[DocLine]]:
    """The prose with fenced blocks blanked (line numbers kept), and the lines inside fences."""
    prose, fenced, inside = [], [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE_RE.match(line.strip()):
            inside = not inside
            prose.append("")
            continue
        prose.append("" if inside else line)
        if inside:
            fenced.append(DocLine(Path(), number, line))
    return "\n".join(prose), fenced


def invoke_lines() -> list[DocLine]:
    """Every `invoke ...` command a doc shows: in code blocks (``$ `` prompts allowed) and inline."""
    found = []
    for path in DOCS:
        prose, fenced = _without_fences(path.read_text(encoding="utf-8"))
        for item in fenced:
            line = item.text.strip().removeprefix("$ ")
            if line.startswith("invoke "):
                found.append(DocLine(path, item.line, line))
        for match in INLINE_RE.finditer(prose):
            span = " ".join(match.group(2).split())
            if span.startswith("invoke "):
                found.append(DocLine(path, prose.count("\n", 0, match.start()) + 1, span))
    return found


@dataclasses.dataclass(frozen=True)
class TaskInfo:
    flags: frozenset[str]  # every flag the task accepts, long and short
    switches: frozenset[str]  # the flags that take no value
    positional: tuple[str, ...]


@functools.cache
def task_info() -> dict[str, TaskInfo]:
    """What tasks.py itself declares. invoke is a host tool: the image has none, and runs no unit test."""
    pytest.importorskip("invoke", reason="invoke is a host tool")
    import tasks

    info = {}
    for name, task in tasks.ns.tasks.items():
        flags, switches = {"--help", "-h"}, {"--help", "-h"}
        for argument in task.get_arguments():
            for flag in argument.names:
                spelled = f"--{flag}" if len(flag) > 1 else f"-{flag}"
                flags.add(spelled)
                if argument.kind is bool:
                    switches.add(spelled)
        positional = tuple(a.name for a in task.get_arguments() if a.positional)
        info[name] = TaskInfo(frozenset(flags), frozenset(switches), positional)
    return info


LINES = invoke_lines()


def test_docs_show_invoke_lines():
    """The scan finds the quickstart and the reference; an empty scan would make the test below vacuous."""
    shown = {line.text for line in LINES}
    assert "invoke demo-ur" in shown and "invoke test" in shown
    assert {line.text.split()[1] for line in LINES} >= {"build", "compile", "base", "pins", "docs"}


@pytest.mark.parametrize("doc_line", LINES, ids=[f"{d.where()}" for d in LINES])
def test_invoke_line_names_a_task_and_its_options(doc_line):
    words = shlex.split(doc_line.text)
    if words[1].startswith("-"):  # invoke's own options: --list, --help TASK
        assert words[1] in ("--list", "-l", "--help", "-h"), f"{doc_line.where()}: {doc_line.text}"
        return
    task, known = words[1], task_info()
    assert task in known, f"{doc_line.where()}: `{doc_line.text}`: no task {task!r} (tasks: {', '.join(known)})"
    takes_value = False
    for word in words[2:]:
        if word == "--":
            break
        if takes_value:  # the value of the flag before it, e.g. --args "--launch explicit"
            takes_value = False
            continue
        flag = word.split("=", 1)[0]
        if flag.startswith("-") and not PLACEHOLDER_RE.match(flag):
            assert flag in known[task].flags, (
                f"{doc_line.where()}: `{doc_line.text}`: invoke {task} has no option {flag}"
            )
            takes_value = "=" not in word and flag not in known[task].switches


def _command(doc_line: DocLine) -> list[str]:
    """The documented line made safe: --dry-run where the task has one, else --help."""
    words = shlex.split(doc_line.text)[1:]
    if words[0].startswith("-"):  # invoke's own options; `invoke --help TASK` shows the help of every task
        return ["--list"] if any(PLACEHOLDER_RE.match(w) for w in words[1:]) else words
    if words[0] not in task_info():  # invoke itself says it knows no such task
        return ["--help", words[0]]
    task, flags = words[0], task_info()[words[0]].flags
    template = any(PLACEHOLDER_RE.match(w) for w in words[1:] if not w.startswith("-"))
    # Prose names a task ("`invoke compile`") without the argument it needs: only its help can run.
    needs_argument = task_info()[task].positional and (len(words) == 1 or words[1].startswith("-"))
    # A positional path that does not exist (e.g. the zebin an earlier line writes) fails any dry run.
    missing_input = any(
        "/" in w and not w.startswith("-") and not (ROOT / w.split(":")[0]).exists()
        for i, w in enumerate(words[1:], 1)
        if not words[i - 1].startswith("--")
    )
    if template or needs_argument or missing_input or "--dry-run" not in flags:
        # `invoke --help TASK`: after the task, --help would fill a positional argument instead.
        return ["--help", task]
    # The kit's own flags go before `--`: what follows it is passed on (to pytest).
    passed_on = words[words.index("--") :] if "--" in words else []
    words = words[: len(words) - len(passed_on)]
    if "--where" in flags and "--where" not in words and "-w" not in words:
        words += ["--where", "container"]
    return [*words, *([] if "--dry-run" in words else ["--dry-run"]), *passed_on]


def _run(doc_line: DocLine) -> tuple[DocLine, list[str], subprocess.CompletedProcess]:
    command = _command(doc_line)
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/xpukit-docs-test.sock", "XPUKIT_PROFILE": ""}
    env.pop("CI", None)
    result = subprocess.run(
        [sys.executable, "-m", "invoke", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return doc_line, command, result


def test_every_invoke_line_runs_as_a_dry_run():
    unique = {line.text: line for line in LINES}  # one run per distinct command (first place shown)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(_run, unique.values()))
    failures = []
    for doc_line, command, result in results:
        if result.returncode != 0 or "Traceback" in result.stderr:
            tail = (result.stderr.strip().splitlines() or result.stdout.strip().splitlines() or ["(no output)"])[-1]
            failures.append(f"{doc_line.where()}: `invoke {shlex.join(command)}` exited {result.returncode}: {tail}")
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------- settings


def _code_text() -> str:
    parts = []
    for folder in CODE_DIRS:
        for path in sorted((ROOT / folder).rglob("*")):
            # This file names settings only to check them; it does not count as reading them.
            wanted = path.is_file() and path.suffix in (".py", ".sh", "") and path.name != "test_docs.py"
            if wanted and "__pycache__" not in path.parts:
                parts.append(path.read_text(encoding="utf-8", errors="replace"))
    parts += [(ROOT / name).read_text(encoding="utf-8") for name in CODE_FILES if (ROOT / name).exists()]
    return "\n".join(parts)


CODE_TEXT = _code_text()


def test_every_documented_xpukit_variable_exists_in_the_code():
    failures = []
    for path in DOCS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in re.findall(r"\bXPUKIT_[A-Z][A-Z0-9_]*[A-Z0-9]\b", line):
                if name not in CODE_TEXT:
                    failures.append(f"{path.relative_to(ROOT)}:{number}: {name} is not read anywhere in the code")
    assert not failures, "\n".join(failures)


def _settings_rows() -> dict[str, tuple[int, str]]:
    """settings.md's table: invoke.yaml key -> (line, the row)."""
    rows = {}
    path = ROOT / "docs" / "settings.md"
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = re.match(r"^\| `([a-z_]+)` \|", line)
        if match:
            rows[match.group(1)] = (number, line)
    return rows


def test_settings_doc_and_config_name_the_same_settings_and_variables():
    rows = _settings_rows()
    undocumented = sorted(set(config.SETTINGS) - set(rows))
    assert not undocumented, f"docs/settings.md has no row for the setting(s) {', '.join(undocumented)}"
    for key, (number, row) in rows.items():
        assert key in config.SETTINGS, f"docs/settings.md:{number}: {key!r} is not an invoke.yaml key (config.SETTINGS)"
        env_name = config.SETTINGS[key]
        assert f"`{env_name}`" in row, f"docs/settings.md:{number}: the {key} row should name {env_name}"
        default = getattr(config.Settings(), key)  # the one default (settings.Settings)
        column = row.split("|")[4].strip()
        assert not default or column.startswith(f"`{default}`"), f"docs/settings.md:{number}: default is {default!r}"


def test_documented_yaml_and_the_checkout_invoke_yaml_use_known_keys():
    text = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
    assert blocks, "docs/settings.md shows no invoke.yaml example"
    for block in [*blocks, (ROOT / "invoke.yaml").read_text(encoding="utf-8")]:
        keys = set((yaml.safe_load(block) or {}).get("xpukit", {}))
        assert keys <= set(config.SETTINGS), f"unknown invoke.yaml key(s): {sorted(keys - set(config.SETTINGS))}"


# ---------------------------------------------------------------- error messages

ANY = None  # a formatted part of an f-string: matches what the doc shows for it


def _pattern(node: ast.AST) -> list[str | None] | None:
    """A string expression as characters and ANY slots; None when it is no string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return list(node.value)
    if isinstance(node, ast.JoinedStr):
        out: list[str | None] = []
        for value in node.values:
            out += list(value.value) if isinstance(value, ast.Constant) else [ANY]
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _pattern(node.left), _pattern(node.right)
        if left is None and right is None:
            return None
        return (left or [ANY]) + (right or [ANY])
    return None


def _code_patterns() -> list[tuple[list[str | None], str]]:
    """Every string expression in the kit's Python code, with its literal text for a quick filter."""
    found = []
    files = [ROOT / "tasks.py", *(ROOT / "xpukit").rglob("*.py"), *(ROOT / "examples").glob("*.py")]
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            pattern = _pattern(node)
            if pattern:
                found.append((pattern, "".join(c if c is not None else "\0" for c in pattern)))
    return found


PATTERNS = _code_patterns()


def _matches_inside(fragment: str, pattern: list[str | None]) -> bool:
    """Whether ``fragment`` is a stretch of ``pattern``; an ANY slot takes any run without spaces."""
    size = len(pattern)

    def closure(states: set[int]) -> set[int]:
        todo, seen = list(states), set(states)
        while todo:
            j = todo.pop()
            if j < size and pattern[j] is ANY and j + 1 not in seen:
                seen.add(j + 1)
                todo.append(j + 1)
        return seen

    states = closure(set(range(size + 1)))
    for char in fragment:
        nxt = set()
        for j in states:
            if j < size and pattern[j] == char:
                nxt.add(j + 1)
            elif j < size and pattern[j] is ANY and not char.isspace():
                nxt.update((j, j + 1))
        states = closure(nxt)
        if not states:
            return False
    return True


# What the doc shows for values: "...", quoted values, the fix's bracket, and the ": " joints.
SPLIT_RE = re.compile(r"\.\.\.|'[^']*'|\(fix: |: |\)$")
VALUE_RE = re.compile(r"^[\w.+-]*[/.][\w./+-]*$|^\d+$")  # paths, dotted keys, versions, numbers


def message_fragments(message: str) -> list[str]:
    pieces = [p.strip(" ()`,;") for p in SPLIT_RE.split(message)]
    return [p for p in pieces if len(p) >= 4 and not VALUE_RE.match(p)]


def fragment_in_code(fragment: str) -> bool:
    words = re.findall(r"[A-Za-z_]{4,}", fragment) or [fragment]
    # Quick filter: some word of the fragment is literal text of the string (values are not).
    return any(any(w in literal for w in words) and _matches_inside(fragment, pattern) for pattern, literal in PATTERNS)


def documented_errors() -> list[DocLine]:
    """The first column of every table row in docs/troubleshooting.md: the messages a user sees."""
    path = ROOT / "docs" / "troubleshooting.md"
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        cells = line.split(" | ")
        if not line.startswith("| ") or line.startswith("| error") or set(line) <= set("|-"):
            continue
        for match in re.finditer(r"``\s?(.+?)\s?``|`([^`]+)`", cells[0]):
            found.append(DocLine(path, number, match.group(1) or match.group(2)))
    return found


ERRORS = documented_errors()


def test_troubleshooting_lists_errors():
    assert len(ERRORS) >= 30, [e.text for e in ERRORS]


def test_every_documented_error_exists_in_the_code():
    failures = []
    for doc_line in ERRORS:
        missing = [f for f in message_fragments(doc_line.text) if not fragment_in_code(f)]
        if missing:
            failures.append(f"{doc_line.where()}: `{doc_line.text}`: no message in the code says {missing[0]!r}")
    assert not failures, "\n".join(failures)


def test_the_error_matcher_rejects_what_the_code_never_says():
    """The matcher is the check: it must refuse invented messages and accept real ones."""
    assert fragment_in_code("unknown profile")  # f"unknown {option} {value!r}"
    assert fragment_in_code("line 12")  # f"{shown}: line {line}: byte ..."
    assert not fragment_in_code("no GPU driver is loaded in the container")
    assert not fragment_in_code("unknown flavour of profile")
    # Paths, dotted keys and quoted values are the case's own; the words around them are the code's.
    fragments = message_fragments("env/pins.toml: cpu.pyton: unknown key (fix: did you mean 'python'? rename it)")
    assert fragments == ["unknown key", "did you mean", "? rename it"]


# ---------------------------------------------------------------- generated tables


def test_generated_tables_match_env_pins():
    stale = docs_tables.update(DOCS, check=True)
    assert not stale, (
        f"stale generated tables in {', '.join(str(p.relative_to(ROOT)) for p in stale)}: run `invoke docs`"
    )


def test_docs_carry_the_generated_regions():
    regions = {m.group(2) for path in DOCS for m in docs_tables.REGION_RE.finditer(path.read_text(encoding="utf-8"))}
    assert regions == set(docs_tables.GENERATORS)


def test_generator_rewrites_only_between_the_markers(tmp_path):
    loaded = pins.load()
    doc = tmp_path / "doc.md"
    doc.write_text("before\n<!-- generated:ur-matrix -->\nstale\n<!-- end -->\nafter `<!-- generated:x -->`\n")
    assert docs_tables.update([doc], check=True, pins=loaded) == [doc]
    assert "stale" in doc.read_text()  # --check writes nothing
    docs_tables.update([doc], check=False, pins=loaded)
    text = doc.read_text()
    assert text.startswith("before\n<!-- generated:ur-matrix -->\n| UR release |") and text.endswith(
        "after `<!-- generated:x -->`\n"
    )
    for version in loaded.profile("cpu")["ur"]["matrix"]:
        assert f"| {version} |" in text
    assert docs_tables.update([doc], check=True, pins=loaded) == []


def test_generator_refuses_unknown_and_unclosed_regions_and_writes_nothing(tmp_path):
    good = tmp_path / "a.md"
    good.write_text("<!-- generated:targets -->\n<!-- end -->\n")
    bad = tmp_path / "b.md"
    bad.write_text("<!-- generated:nope -->\n<!-- end -->\n")
    with pytest.raises(docs_tables.XpukitError, match="unknown generated region 'nope'"):
        docs_tables.update([good, bad], check=False)
    assert good.read_text() == "<!-- generated:targets -->\n<!-- end -->\n"
    bad.write_text("<!-- generated:targets -->\nno end\n")
    with pytest.raises(docs_tables.XpukitError, match="has no `<!-- end -->`"):
        docs_tables.update([bad], check=False)


def test_generated_table_follows_a_pin_change(tmp_path):
    """Change a pin and the profiles table changes with it: the tables really come from the pins."""
    text = pins.DEFAULT_PINS.read_text().replace('version = "3.3.0b1"', 'version = "3.3.1"', 1)
    changed = tmp_path / "pins.toml"
    changed.write_text(text)
    table = docs_tables.profiles_table(pins.load(changed))
    assert "`triton-xpu` 3.3.1 (PyPI)" in table and "3.3.0b1" not in table


# ---------------------------------------------------------------- every name a doc gives exists

REFERENCES = docs_support.doc_references()


def test_every_path_module_function_and_member_a_doc_names_exists():
    """Paths (``tests/host/test_x.py``, ``examples/kernels.py:scale_kernel``, pytest node ids), modules
    and their names (``xpukit.runtime.ur.core.Session``), ``Class.member`` of the kit's classes,
    ``function()`` calls and links between docs, in README.md and docs/ (tasks and flags: above)."""
    failures = [f"{ref.where()}: `{ref.text}`: {problem}" for ref in REFERENCES if (problem := check_reference(ref))]
    assert not failures, "\n".join(failures)


def test_module_tables_name_what_each_module_defines():
    problems = docs_support.module_table_problems()
    assert not problems, "\n".join(problems)


def test_test_paths_named_in_code_comments_exist():
    """Comments and docstrings of the kit, its scripts and CI name tests by path: those paths exist."""
    failures = []
    for folder in (*CODE_DIRS, ".ci"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".sh", "") or not path.is_file() or "__pycache__" in path.parts:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), 1):
                for named in re.findall(r"\btests/(?:host|engine|image|gpu|support)?/?[\w/]*?test_\w+\.py", line):
                    if path.name != "test_docs.py" and not (ROOT / named).exists():
                        failures.append(f"{path.relative_to(ROOT)}:{number}: {named} does not exist")
    for name in ("Dockerfile", "tasks.py"):
        for number, line in enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), 1):
            for named in re.findall(r"\btests/[\w/]*\.py", line):
                if not (ROOT / named).exists():
                    failures.append(f"{name}:{number}: {named} does not exist")
    assert not failures, "\n".join(failures)


def test_the_reference_check_finds_what_does_not_exist():
    """The check can fail: each invented name is refused, each real one of the same kind accepted."""
    doc = ROOT / "docs" / "tasks.md"
    wrong = {
        "tests/test_plan_value.py": "does not exist",  # a test file that moved to tests/host/
        "examples/kernels.py:no_such_kernel": "defines no 'no_such_kernel'",
        "xpukit.runtime.ur.core.NoSession": "has no 'NoSession'",
        "xpukit.runtime.ur.core.Session.no_method": "has no 'no_method'",
        "xpukit.runtime.nothing": "has no 'nothing'",
        "Queue.no_such_member": "class Queue has no 'no_such_member'",
        "compile_everything()": "no function compile_everything",
        "python -m pytest tests/host/test_nothing.py -q": "does not exist",
        "link:nothere.md": "does not exist",
    }
    for text, problem in wrong.items():
        found = check_reference(docs_support.Reference(doc, 1, text))
        assert found and problem in found, (text, found)
    right = [
        "tests/host/test_plan_value.py",
        "examples/kernels.py:scale_kernel",
        "tests/host/test_docs.py::test_links_between_docs_reach_a_heading",
        "xpukit.runtime.ur.core.Session",
        "Queue.launch",
        "USMAllocation.close()",  # inherited from Resource
        "compile_kernel(fn, signature)",
        "link:ur.md",
        "env/lock/images.toml",  # written by `invoke push`: it may not exist yet
        "NAME/PATH",  # a placeholder
    ]
    for text in right:
        assert check_reference(docs_support.Reference(doc, 1, text)) is None, text
    for path, owner in docs_support.WRITTEN_BY_THE_KIT.items():
        assert path in (ROOT / owner).read_text(encoding="utf-8"), f"{owner} does not write {path}"
    assert len(REFERENCES) > 1000  # the scan reads the docs (about 2,500 names)


# ---------------------------------------------------------------- length, headings and links

MAX_DOC_LINES = 500  # a longer doc is split by area, as docs/BENCHMARKS.md indexes docs/benchmarks/
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target), with an optional title; the target up to the first space or ')'.
LINK_RE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # https:, mailto:, ...


def _rendered_lines(text: str, code_spans: bool = False) -> list[tuple[int, str]]:
    """(line, text) of what GitHub renders as markdown: fenced and indented code blocks left out,
    inline code spans blanked unless ``code_spans`` (a `kernel[grid](...)` in backticks is no link)."""
    prose, _ = _without_fences(text)
    if not code_spans:
        prose = INLINE_RE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose)
    found, indented_code, previous_blank = [], False, True
    for number, line in enumerate(prose.splitlines(), 1):
        blank = not line.strip()
        indented = line.startswith(("    ", "\t"))
        indented_code = indented and (indented_code or previous_blank) if not blank else indented_code
        if not blank and not indented_code:
            found.append((number, line))
        previous_blank = blank
    return found


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: a link gives its text, code and emphasis marks go, then
    lower case, every character but letters, digits, ``_``, ``-`` and spaces dropped, spaces to dashes
    (so ``SOURCE_DATE_EPOCH`` keeps its underscores and ``kernel[grid]`` is ``kernelgrid``)."""
    parts = re.split(r"(`+[^`]+`+)", heading.strip())  # code spans keep their text as it is
    text = "".join(
        part.strip("`") if part.startswith("`") else re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", part).replace("*", "")
        for part in parts
    )
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


@functools.cache
def heading_anchors(path: Path) -> frozenset[str]:
    """The anchors GitHub gives a doc's headings; a repeated heading gets -1, -2, ... as on GitHub."""
    anchors: set[str] = set()
    for _, line in _rendered_lines(path.read_text(encoding="utf-8"), code_spans=True):
        match = HEADING_RE.match(line)
        if not match:
            continue
        slug = base = _slug(match.group(2))
        count = 0
        while slug in anchors:
            count += 1
            slug = f"{base}-{count}"
        anchors.add(slug)
    return frozenset(anchors)


def link_problems(docs: list[Path], root: Path = ROOT) -> list[str]:
    """Every relative link of the docs: its file exists inside the checkout, and an ``#anchor`` on a
    markdown file (or on the doc itself) is one of its headings."""
    problems = []
    for path in docs:
        for number, line in _rendered_lines(path.read_text(encoding="utf-8")):
            for target in LINK_RE.findall(line):
                if SCHEME_RE.match(target):
                    continue
                where = f"{path.relative_to(root)}:{number}: ({target})"
                file_part, _, anchor = target.partition("#")
                if not file_part and not anchor:
                    problems.append(f"{where}: a link to nothing")
                    continue
                doc = (path.parent / file_part).resolve() if file_part else path
                if not doc.is_relative_to(root.resolve()):
                    problems.append(f"{where}: leaves the checkout")
                elif not doc.exists():
                    problems.append(f"{where}: {file_part} does not exist")
                elif anchor and doc.suffix == ".md" and anchor not in heading_anchors(doc):
                    problems.append(f"{where}: #{anchor} is no heading of {doc.relative_to(root.resolve())}")
    return problems


def test_the_docs_scan_reads_every_doc_under_docs():
    """README.md and docs/**/*.md: the area files under docs/benchmarks/ are read like the others."""
    names = {str(p.relative_to(ROOT)) for p in DOCS}
    assert {"README.md", "docs/BENCHMARKS.md", "docs/benchmarks/launch.md"} <= names
    assert {str(p.relative_to(ROOT)) for p in docs_support.DOC_FILES} == names


def test_no_doc_is_longer_than_500_lines():
    """Short docs: one file per area, an index where an area has many (docs/BENCHMARKS.md)."""
    long = []
    for path in DOCS:
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_DOC_LINES:
            long.append(f"{path.relative_to(ROOT)}: {lines} lines (at most {MAX_DOC_LINES}: split it by area)")
    assert not long, "\n".join(long)


def test_headings_carry_no_issue_numbers():
    """A heading names a subject, not the issue that brought it (no changelog voice)."""
    for path in DOCS:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("#"):
                assert not re.search(r"\(issues? \d+", line), f"{path.name}: {line}"


def test_links_between_docs_reach_a_heading():
    """Every relative link in README.md and docs/**/*.md names a file that exists and, with an
    ``#anchor``, a heading of it (GitHub's slugs)."""
    problems = link_problems(DOCS)
    assert not problems, "\n".join(problems)


def test_the_link_check_finds_what_does_not_resolve(tmp_path):
    """The check can fail: each broken link is refused, each good one of the same kind accepted."""
    (tmp_path / "sub").mkdir()
    headings = ["# Other", "## SOURCE_DATE_EPOCH", "## `kernel[grid](...)`: a table", "## Again", "## Again"]
    (tmp_path / "other.md").write_text("\n\n".join(headings) + "\n")
    (tmp_path / "code.py").write_text("")
    doc = tmp_path / "sub" / "doc.md"
    good = [
        "[o](../other.md)",
        "[o](../other.md#source_date_epoch)",
        "[o](../other.md#kernelgrid-a-table)",
        "[o](../other.md#again-1)",
        "[c](../code.py#L1)",
        "[self](#doc)",
        "[web](https://example.com/x.md#nothing)",
        "`[in code](missing.md)`",
        "```\n[in a fence](missing.md)\n```",
        "    [in an indented block](missing.md)",
    ]
    doc.write_text("# Doc\n\n" + "\n\n".join(good) + "\n")
    assert link_problems([doc], root=tmp_path) == []
    bad = {
        "[o](../missing.md)": "missing.md does not exist",
        "[o](../other.md#sourcedateepoch)": "#sourcedateepoch is no heading of other.md",
        "[o](../other.md#again-2)": "#again-2 is no heading",
        "[self](#nothing)": "#nothing is no heading of sub/doc.md",
        "[up](../../outside.md)": "leaves the checkout",
        "kernel[grid](...)": "... does not exist",  # outside backticks GitHub renders it as a link
        "[x]()": "a link to nothing",
    }
    for text, problem in bad.items():
        doc.write_text(f"# Doc\n\n{text}\n")
        heading_anchors.cache_clear()
        found = link_problems([doc], root=tmp_path)
        assert len(found) == 1 and problem in found[0], (text, found)


# ---------------------------------------------------------------- sample outputs are what the commands print


# Lines whose presence depends on the host, not the code: the CA bundle found, an unpinned base's
# warning, which base exists, the GPU probe. The sample may show them or not; what it shows must be real.
