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
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from xpukit.runtime.offline import compiler_id

KEY_VERSION = "kernel-report/2"  # 2: occupancy, spills, GRF rule, --lines
CACHE_DIR = ".xpukit"
REPORTS = "kernel-reports"
TRITON_CACHE = "triton-cache"  # Triton's own cache for the caller-run tasks (compile, kernel-report)
HISTORY_KEEP = 20
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


class ReportCache:
    """Stored reports by key, and each kernel's history of keys."""

    def __init__(self, root: Path) -> None:
        self.folder = root / REPORTS

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def load(self, key: str) -> dict[str, Any] | None:
        try:
            report = json.loads(self.path(key).read_text())
        except (OSError, ValueError):
            return None  # absent, or damaged: recomputed and rewritten
        return report if isinstance(report, dict) and isinstance(report.get("rows"), list) else None

    def store(self, key: ReportKey, report: dict[str, Any]) -> dict[str, Any]:
        """Keep a complete report (one with no failed cell) and add it to its kernel's history."""
        report = {**report, "stored_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
        if any(row.get("error") for row in report["rows"]):
            return report
        self.folder.mkdir(parents=True, exist_ok=True)
        _write_json(self.path(key.key), report)
        self.remember(key)
        return report

    def remember(self, key: ReportKey) -> None:
        """Make ``key`` the kernel's newest report; reports beyond the newest HISTORY_KEEP are deleted
        (a key names one kernel, so no other kernel's history holds them)."""
        history = [k for k in self.history(key.kernel_id) if k != key.key] + [key.key]
        (self.folder / "history").mkdir(parents=True, exist_ok=True)
        _write_json(self._history_path(key.kernel_id), history[-HISTORY_KEEP:])
        for old in history[:-HISTORY_KEEP]:
            self.path(old).unlink(missing_ok=True)

    def history(self, kernel_id: str) -> list[str]:
        try:
            keys = json.loads(self._history_path(kernel_id).read_text())
        except (OSError, ValueError):
            return []
        return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []

    def previous(self, key: ReportKey) -> dict[str, Any] | None:
        """The newest stored report of the same kernel made under another key."""
        for older in reversed(self.history(key.kernel_id)):
            if older != key.key and (report := self.load(older)) is not None:
                return report
        return None

    def _history_path(self, kernel_id: str) -> Path:
        return self.folder / "history" / f"{kernel_id}.json"


def _write_json(path: Path, data: Any) -> None:
    """Whole or not at all: a concurrent reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
