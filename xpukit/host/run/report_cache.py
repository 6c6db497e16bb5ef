"""The kernel report's persistent cache: a hit prints the stored report with no container at all.

A report depends on the kernel's code, the options of the report, the toolchain that compiled it
and the kit's code that counted it. The key is a SHA-256 over all four, computed on the host:

- the kernel's file and every local module it imports, transitively (their bytes: an edit to a
  ``@triton.jit`` helper in another file of the project changes the key; installed packages such
  as Triton itself are the toolchain's part);
- the function, the targets, every ``--config``, ``--signature`` and ``--constexpr``;
- the toolchain: the image's ID (a rebuilt or pulled image is a new ID) and the ocloc and IGC
  versions its labels pin or, on the host, the interpreter, the installed Triton's version and
  location, the compiler's identity (``xpukit.runtime.offline.compiler_id``: ocloc's version, the
  IGC it loads, by version and build ID), and the environment variables Triton and IGC read;
- the kit's report code (``xpukit/targets.py`` and ``xpukit/runtime/kernels``, ``xpukit/runtime/offline``,
  ``xpukit/runtime/triton``).

Reports live in ``<checkout>/.xpukit/kernel-reports/<key>.json`` with the time they were made;
``history/<kernel id>.json`` lists the keys of one kernel's reports, newest last, for ``--diff``;
a kernel keeps its newest HISTORY_KEEP reports.
A report with a failed cell is not stored (the next run retries it).

A stored report is never trusted as it is read: a flipped bit in a count would be printed as the
kernel's count, with nothing to say so. So an entry is two lines: a header (the format, the key,
the SHA-256 and the length of the report's bytes) and those bytes, the report's JSON. Loading
checks the header, the checksum and every field against the report's records (:func:`schema_problem`); any
failure removes the entry and is a miss (the caller says so in one line and compiles again).
Keys and kernel ids are hex digests: anything else read from disk (a history entry) is refused,
never made into a path. Temporary files a killed run left behind are swept (:meth:`ReportCache.sweep`).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from xpukit.runtime.offline import compiler_id
from xpukit.runtime.offline.report_model import Report, ReportSchemaError
from xpukit.runtime.scratch import write_whole

# 2: occupancy, spills, GRF rule, --lines; 3: entries carry a checksum header, file fields are host paths;
# 4: the report's records (report_model) with their schema
KEY_VERSION = "kernel-report/4"
CACHE_DIR = ".xpukit"
REPORTS = "kernel-reports"
TRITON_CACHE = "triton-cache"  # Triton's own cache for the caller-run tasks (compile, kernel-report)
HISTORY_KEEP = 20
KEY_RE = re.compile(r"[0-9a-f]{64}")  # a report key: SHA-256 hex, the only name a stored report has
KERNEL_ID_RE = re.compile(r"[0-9a-f]{24}")
# What a run leaves while it writes: scratch.write_whole's `.<name>.<pid>.tmp`, the run's `.<key>.<pid>.run.json`
# (and the writer's own temporary beside that one). The pid says whose it is.
_TEMP_RE = re.compile(r"\..+\.(\d+)\.(tmp|run\.json)")
# A temporary file lives while one file is written or one report is read back: one older than this
# whose process is gone is a killed run's. Younger ones are left alone, whatever their pid says (a
# run in another pid namespace sharing the folder, e.g. XPUKIT_CACHE_DIR on a shared disk).
SWEEP_AFTER_S = 60.0
SWEEP_ANY_AFTER_S = 3600.0  # past this, swept even if its pid is alive (a reused pid)
# Code whose change changes every report: the target table, the counting and the compile path.
KIT_CODE = (
    "xpukit/targets.py",
    "xpukit/errors.py",
    "xpukit/runtime/kernels",
    "xpukit/runtime/offline",
    "xpukit/runtime/triton",
)
# Environment a host-side compile reads (the image's environment is part of the image ID).
_HOST_ENV_PREFIXES = ("TRITON_", "IGC_", "XPUKIT_OCLOC", "XPUKIT_IGA", "OCL_ICD", "LD_LIBRARY_PATH")


def cache_root(checkout: Path) -> Path:
    return checkout / CACHE_DIR


def local_sources(kernel_file: Path, search: Sequence[Path]) -> list[Path]:
    """The kernel's file and the local modules it imports, transitively: every ``import x`` or
    ``from x import y`` (``from . import``, too) that resolves to a ``.py`` file or package under
    the kernel's folder or one of ``search``. Unreadable or unparsable files are still hashed."""
    seen: dict[Path, None] = {}
    todo = [kernel_file.resolve()]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen[path] = None
        try:
            tree = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        roots = [path.parent, *search]
        for node in ast.walk(tree):
            names: list[tuple[str, int]] = []
            if isinstance(node, ast.Import):
                names = [(alias.name, 0) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                names = [(base, node.level)] + [(f"{base}.{a.name}".strip("."), node.level) for a in node.names]
            for name, level in names:
                found = _resolve(name, level, path, roots)
                if found is not None and found not in seen:
                    todo.append(found)
    return sorted(seen)


def _resolve(name: str, level: int, importer: Path, roots: Sequence[Path]) -> Path | None:
    parts = [p for p in name.split(".") if p]
    if level:
        base = importer.parent
        for _ in range(level - 1):
            base = base.parent
        candidates = [base]
    else:
        candidates = list(roots)
    for root in candidates:
        stem = root.joinpath(*parts) if parts else root
        for option in (stem.with_suffix(".py") if parts else None, stem / "__init__.py"):
            if option is not None and option.is_file():
                return option.resolve()
    return None


def _hash_files(paths: Iterable[Path], relative_to: Path | None = None) -> str:
    digest = hashlib.sha256()
    for path in paths:
        name = str(path.relative_to(relative_to)) if relative_to else str(path)
        digest.update(name.encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError as exc:
            digest.update(f"unreadable: {exc}".encode())
        digest.update(b"\0")
    return digest.hexdigest()


def kit_code_hash(checkout: Path) -> str:
    files: list[Path] = []
    for item in KIT_CODE:
        path = checkout / item
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return _hash_files([f for f in files if "__pycache__" not in f.parts], checkout)


def host_toolchain() -> str:
    """What a compile on the host depends on besides the kernel: a changed install is a new key."""
    parts = [f"python {sys.executable} {sys.version}"]
    for dist in ("triton-xpu", "triton"):
        try:
            found = metadata.distribution(dist)
            parts.append(f"{dist} {found.version} {found.locate_file('')}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist} absent")
    parts.append(compiler_id.current_key())
    parts += sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith(_HOST_ENV_PREFIXES))
    return "\n".join(parts)


@dataclasses.dataclass(frozen=True)
class ReportKey:
    key: str
    kernel_id: str  # one kernel (file and function) across configs and toolchains, for --diff
    sources: tuple[str, ...]


def report_key(
    kernel_file: Path,
    function: str,
    options: dict[str, Any],
    toolchain: str,
    checkout: Path,
) -> ReportKey:
    """The content key of one report (see the module's docstring for what goes in)."""
    kernel_file = kernel_file.resolve()
    sources = local_sources(kernel_file, [checkout])
    material = {
        "version": KEY_VERSION,
        "function": function,
        "options": options,
        "sources": _hash_files(sources),
        "toolchain": toolchain,
        "kit": kit_code_hash(checkout),
    }
    key = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()
    kernel_id = hashlib.sha256(f"{kernel_file}:{function}".encode()).hexdigest()[:24]
    return ReportKey(key, kernel_id, tuple(map(str, sources)))


def is_key(text: object) -> bool:
    """A report key as the cache writes it: 64 lowercase hex digits, nothing a path could climb with."""
    return isinstance(text, str) and KEY_RE.fullmatch(text) is not None


def schema_problem(report: object) -> str | None:
    """What is wrong with a stored report's shape, or None: every field checked against the
    report's records (``xpukit.runtime.offline.report_model``), its schema, and what a stored one needs."""
    try:
        parsed = Report.from_dict(report)
    except ReportSchemaError as exc:
        return exc.message
    if parsed.stored_at is None:
        return "stored_at is missing"
    if parsed.failed:
        return "a failed cell (never stored)"
    if not all(row.ok for row in parsed.rows):
        return "a row without counts"
    return None


class DamagedEntry(Exception):
    """A stored entry that cannot be trusted; the message says why (one line)."""


def encode_entry(key: str, report: dict[str, Any]) -> bytes:
    """The stored form: a header line, then the report's JSON bytes, which the header's SHA-256 covers."""
    body = json.dumps(report, separators=(",", ":")).encode()
    header = {"format": KEY_VERSION, "key": key, "sha256": hashlib.sha256(body).hexdigest(), "size": len(body)}
    return json.dumps(header).encode() + b"\n" + body + b"\n"


def decode_entry(key: str, data: bytes) -> Report:
    """The report stored under ``key``, checked; DamagedEntry says what does not hold."""
    head, newline, rest = data.partition(b"\n")
    try:
        header = json.loads(head) if newline else None
    except (ValueError, RecursionError):  # RecursionError: brackets nested past the parser's depth
        header = None
    if not isinstance(header, dict):
        raise DamagedEntry("no header line")
    if header.get("format") != KEY_VERSION or header.get("key") != key:
        raise DamagedEntry("its header names another format or key")
    size, digest = header.get("size"), header.get("sha256")
    if not isinstance(size, int) or len(rest) != size + 1 or not rest.endswith(b"\n"):
        raise DamagedEntry("its length is not the one its header gives (cut short or grown)")
    body = rest[:-1]
    if hashlib.sha256(body).hexdigest() != digest:
        raise DamagedEntry("its SHA-256 is not the one its header gives")
    try:
        report = json.loads(body)
    except (ValueError, RecursionError):
        raise DamagedEntry("the report is not JSON") from None
    problem = schema_problem(report)
    if problem:
        raise DamagedEntry(problem)
    return Report.from_dict(report)


def rewrite_paths(report: Report, change: Callable[[str], str]) -> Report:
    """Apply ``change`` to every file path the report names (``source``, ``kernel_source.file``, each
    line's ``file``), in place: the line view matches rows to the kernel by these, so they change
    together (the host's paths for a container's run, the paths as the user gave them to print)."""
    report.source = change(report.source)
    if report.kernel_source is not None:
        report.kernel_source.file = change(report.kernel_source.file)
    for row in report.rows:
        for entry in row.lines or []:
            if entry.file is not None:
                entry.file = change(entry.file)
    return report


def host_path(path: str, checkout: Path, workspace: str) -> str:
    """A path a container printed, as the host names it: the checkout is mounted at ``workspace``;
    every other path the kit mounts is mounted at its own path (xpukit.host.run.containers)."""
    if path == workspace or path.startswith(workspace + "/"):
        return str(checkout.resolve() / path[len(workspace) :].lstrip("/"))
    return path


class ReportCache:
    """Stored reports by key, and each kernel's history of keys.

    ``notes``: what went wrong that the user should hear of in one line (a damaged history, a
    report that could not be stored); the task prints them. Nothing here raises on a bad folder."""

    def __init__(self, root: Path) -> None:
        self.folder = root / REPORTS
        self.notes: list[str] = []

    def path(self, key: str) -> Path:
        if not is_key(key):  # a name read from disk never becomes a path (`../../x`)
            raise ValueError(f"not a report key: {key!r}")
        return self.folder / f"{key}.json"

    def run_file(self, key: str) -> Path:
        """Where one run's report comes back (written by the run, read once, removed; swept when left)."""
        return self.path(key).with_name(f".{key}.{os.getpid()}.run.json")

    def lookup(self, key: str) -> tuple[Report | None, str | None]:
        """(report, None) on a hit, (None, None) on a miss, (None, why) for a damaged entry, which
        is removed: the next store replaces it, and until then nothing reads it again."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):  # no entry, or no folder (a file in its place)
            return None, None
        except OSError as exc:
            return None, f"it cannot be read ({exc.strerror or exc})"
        try:
            return decode_entry(key, data), None
        except DamagedEntry as exc:
            self.discard(key)
            return None, str(exc)

    def load(self, key: str) -> Report | None:
        """The report stored under ``key`` when it is there and whole, else None."""
        return self.lookup(key)[0]

    def discard(self, key: str) -> None:
        try:
            self.path(key).unlink(missing_ok=True)
        except OSError as exc:
            self.notes.append(f"{self.path(key)} cannot be removed ({exc.strerror or exc})")

    def store(self, key: ReportKey, report: Report) -> Report:
        """Keep a complete report (one with no failed cell) and add it to its kernel's history. A
        folder that cannot be written is a note, not an error: the report is still shown."""
        report.stored_at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        if report.failed:
            return report
        data = report.to_dict()
        problem = schema_problem(data)
        if problem:  # stored, it would be refused on every load: say so once, here
            self.notes.append(f"the report is not stored: it lacks what a stored report needs ({problem})")
            return report
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_whole(self.path(key.key), encode_entry(key.key, data))
        except OSError as exc:
            self.notes.append(f"the report cannot be stored in {self.folder} ({exc.strerror or exc}); it is not kept")
            return report
        self.remember(key)
        return report

    def remember(self, key: ReportKey) -> None:
        """Make ``key`` the kernel's newest report; reports beyond the newest HISTORY_KEEP are deleted
        (a key names one kernel, so no other kernel's history holds them)."""
        history = [k for k in self.history(key.kernel_id) if k != key.key] + [key.key]
        try:
            (self.folder / "history").mkdir(parents=True, exist_ok=True)
            write_whole(self._history_path(key.kernel_id), (json.dumps(history[-HISTORY_KEEP:]) + "\n").encode())
            for old in history[:-HISTORY_KEEP]:
                self.path(old).unlink(missing_ok=True)
        except OSError as exc:
            self.notes.append(f"the history of this kernel cannot be kept ({exc.strerror or exc})")

    def history(self, kernel_id: str) -> list[str]:
        """The kernel's keys, oldest first. Entries that are not keys are refused (and said once):
        they are never joined to the folder, so a history cannot name a file outside it."""
        try:
            keys = json.loads(self._history_path(kernel_id).read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError, RecursionError):
            keys = None
        if not isinstance(keys, list):
            self.notes.append(f"{self._history_path(kernel_id)} is damaged; --diff starts a new history")
            return []
        good = [k for k in keys if is_key(k)]
        if len(good) != len(keys):
            bad = len(keys) - len(good)
            self.notes.append(f"{self._history_path(kernel_id)}: {bad} entries are not report keys; ignored")
        return good

    def previous(self, key: ReportKey) -> Report | None:
        """The newest stored report of the same kernel made under another key."""
        for older in reversed(self.history(key.kernel_id)):
            if older != key.key and (report := self.load(older)) is not None:
                return report
        return None

    def sweep(self) -> int:
        """Remove the temporary files of runs that were killed (a write or a report never
        renamed or read back); returns how many. A file another run may still be using is left."""
        now, swept = time.time(), 0
        for folder in (self.folder, self.folder / "history"):
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                found = _TEMP_RE.fullmatch(name)
                if not found:
                    continue
                path = folder / name
                try:
                    age = now - path.lstat().st_mtime
                    if age > SWEEP_ANY_AFTER_S or (age > SWEEP_AFTER_S and not _alive(int(found.group(1)))):
                        path.unlink()
                        swept += 1
                except OSError:
                    continue  # gone already (another run swept it), or not ours to remove
        return swept

    def _history_path(self, kernel_id: str) -> Path:
        if KERNEL_ID_RE.fullmatch(kernel_id) is None:
            raise ValueError(f"not a kernel id: {kernel_id!r}")
        return self.folder / "history" / f"{kernel_id}.json"


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs here (one of another user counts: it may be writing)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, OSError):
        return False
    return True
