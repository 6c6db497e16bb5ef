"""Triton's kernel cache, made to heal itself and to survive a read-only cache folder.

Stock Triton (3.3) serves whatever its cache folder holds: a truncated ``.spv`` is loaded as is and a
truncated metadata ``.json`` ends in a traceback, on every later run. :func:`install` selects
:class:`HealingCacheManager` through Triton's own ``TRITON_CACHE_MANAGER`` hook. It records a
SHA-256 per file in Triton's group file (an extra key stock Triton ignores) and, before Triton uses
an entry, checks every file: checksum, JSON that parses to an object, SPIR-V that walks cleanly to
its last word, an ELF zebin, UTF-8 IR text. Any failure drops the whole entry with one warning and
Triton recompiles it. A cache folder that cannot be written falls back to a private temporary one.

With ``XPUKIT_KERNEL_CACHE`` every file is also shared, and what comes back from the shared store is
opened with the team's key first (``xpukit.runtime.triton.kernel_cache``: each value is sealed over its
name, which holds Triton's hash of the kernel and its options, so an entry of another kernel or
another specialization copied under this name is rejected). The local folder itself is checked,
not authenticated: it is the user's own (a key per folder would also refuse a cache baked into an
image, which the kit serves read-only).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from triton.runtime.cache import FileCacheManager, default_cache_dir

from xpukit.runtime.offline import compiler_id, spirv
from xpukit.runtime.scratch import writable_cache_dir
from xpukit.runtime.triton import kernel_cache

log = logging.getLogger("xpukit.cache")

MANAGER = f"{__name__}:HealingCacheManager"
CHECKSUMS_KEY = "xpukit_sha256"
GROUP_PREFIX = "__grp__"
# What CompiledKernel reads from the metadata file before anything else.
METADATA_KEYS = ("name", "target", "cluster_dims")


class CorruptEntry(Exception):
    """One file of a cache entry fails its check; the message names the file and the reason."""


def install() -> bool:
    """Make Triton use :class:`HealingCacheManager`; False (and no change) when the user chose another."""
    current = os.environ.get("TRITON_CACHE_MANAGER", "").strip()
    if current and current != MANAGER:
        log.debug("xpukit: TRITON_CACHE_MANAGER=%s is the user's choice; not replacing it", current)
        return False
    os.environ["TRITON_CACHE_MANAGER"] = MANAGER
    return True


_COMPILER_MARK = "_xpukit_compiler_key"


def key_by_compiler(backend_cls: Any) -> None:
    """Put the compiler's identity (ocloc and IGC, ``xpukit.runtime.offline.compiler_id``) into Triton's
    cache key of every kernel compiled to native code: Triton 3.3's key has the source, the backend's
    properties and the options, not the ocloc that made the zebin, so switching ocloc under one cache
    returned the other compiler's zebin. Through ``XPUOptions.hash`` (part of the key), and only with
    ``generate_native_code``: SPIR-V does not depend on ocloc, and those builds pay no ocloc probe."""
    options_cls = backend_cls.__init__.__globals__.get("XPUOptions")
    if options_cls is None or getattr(options_cls.hash, _COMPILER_MARK, False):
        return
    original = options_cls.hash

    def hash(self: object) -> str:
        base = original(self)
        if not getattr(self, "generate_native_code", False):
            return base
        return hashlib.sha256(f"{base}|{compiler_id.current_key()}".encode()).hexdigest()

    setattr(hash, _COMPILER_MARK, True)
    options_cls.hash = hash


def check_file(name: str, data: bytes, *, metadata: bool = False) -> None:
    """Raise :class:`CorruptEntry` unless ``data`` is a well-formed file of its kind (by suffix)."""
    suffix = name.rpartition(".")[2]
    if suffix == "json":
        try:
            value = json.loads(data)
        except ValueError as exc:  # also UnicodeDecodeError
            raise CorruptEntry(f"{name} is not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise CorruptEntry(f"{name} holds a JSON {type(value).__name__}, not an object")
        missing = [k for k in METADATA_KEYS if k not in value] if metadata else []
        if missing:
            raise CorruptEntry(f"{name} lacks {', '.join(missing)}")
    elif suffix == "spv":
        try:
            spirv.parse(data)
        except spirv.SpirvError as exc:
            raise CorruptEntry(f"{name}: {exc.message}") from None
    elif suffix == "zebin":
        if not data.startswith(b"\x7fELF"):
            raise CorruptEntry(f"{name} is not an ELF file")
    else:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptEntry(f"{name} is not UTF-8 text ({exc.reason})") from None


class HealingCacheManager(FileCacheManager):
    """Triton's file cache with checksummed, checked entries and a fallback for unwritable folders."""

    def __init__(self, key: str, override: bool = False, dump: bool = False) -> None:
        self._sums: dict[str, str] = {}
        # XPUKIT_KERNEL_CACHE: every entry is also shared, and a local miss asks the shared store.
        self._store = None if (override or dump) else kernel_cache.remote_store()
        if override or dump:  # Triton's debugging folders: left exactly as Triton handles them
            super().__init__(key, override=override, dump=dump)
            return
        root = os.path.abspath(os.getenv("TRITON_CACHE_DIR", "").strip() or default_cache_dir())
        usable = writable_cache_dir(root, "Triton cache")
        self.key = key
        self.cache_dir = str(usable / key)
        # A read-only cache (one baked into an image, say) is still read; new entries go to the fallback.
        self.read_only_dir = None if str(usable) == root else os.path.join(root, key)
        self.lock_path = os.path.join(self.cache_dir, "lock")
        os.makedirs(self.cache_dir, exist_ok=True)

    def put(self, data: bytes | str, filename: str, binary: bool = True) -> str:
        path = super().put(data, filename, binary)
        # Hash what landed on disk: Triton writes text in the locale's encoding.
        written = Path(path).read_bytes()
        self._sums[filename] = hashlib.sha256(written).hexdigest()
        if self._store is not None:
            self._store.put(f"triton:{self.key}:{filename}", written)
        return path

    def put_group(self, filename: str, group: dict[str, str]) -> str:
        sums = {}
        for child, path in group.items():
            sums[child] = self._sums.get(child) or hashlib.sha256(Path(path).read_bytes()).hexdigest()
        contents = json.dumps({"child_paths": group, CHECKSUMS_KEY: sums})
        return self.put(contents, f"{GROUP_PREFIX}{filename}", binary=False)

    def get_group(self, filename: str) -> dict[str, str] | None:
        for folder in (self.cache_dir, self.read_only_dir):
            group_path = Path(folder, f"{GROUP_PREFIX}{filename}") if folder else None
            if group_path is None or not group_path.exists():
                continue
            children: dict[str, str] = {}
            try:
                return self._checked_group(group_path, filename, children)
            except CorruptEntry as exc:
                writable = folder == self.cache_dir
                log.warning(
                    "xpukit: Triton cache entry %s is corrupt (%s); %s, the kernel is recompiled",
                    folder,
                    exc,
                    "dropped" if writable else "skipped (read-only)",
                )
                if writable:
                    self._drop(group_path, children)
                return None
        return self._from_store(filename)

    def _from_store(self, filename: str) -> dict[str, str] | None:
        """The entry from the shared store, written locally, then checked like a local one."""
        if self._store is None:
            return None
        group_name = f"{GROUP_PREFIX}{filename}"
        found = self._store.get([f"triton:{self.key}:{group_name}"])
        if not found:
            return None
        raw = next(iter(found.values()))
        try:
            names = list(json.loads(raw).get("child_paths", {}))
        except (ValueError, AttributeError):
            return None
        keys = [f"triton:{self.key}:{n}" for n in names if Path(n).name == n]
        files = self._store.get(keys)
        if not names or len(files) != len(names):
            return None
        store, self._store = self._store, None  # what came from the store is not sent back to it
        try:
            for name in names:
                FileCacheManager.put(self, files[f"triton:{self.key}:{name}"], name, binary=True)
            group_path = Path(FileCacheManager.put(self, raw, group_name, binary=True))
        finally:
            self._store = store
        children: dict[str, str] = {}
        try:
            return self._checked_group(group_path, filename, children)
        except CorruptEntry as exc:
            log.warning("xpukit: shared Triton cache entry %s is corrupt (%s); the kernel is recompiled", filename, exc)
            self._drop(group_path, children)
            return None

    def _checked_group(self, group_path: Path, filename: str, children: dict[str, str]) -> dict[str, str]:
        """The entry's files after every check; ``children`` is filled as soon as they are known."""
        try:
            group = json.loads(group_path.read_bytes())
        except (OSError, ValueError) as exc:
            raise CorruptEntry(f"{group_path.name} is unreadable ({exc})") from None
        paths = group.get("child_paths") if isinstance(group, dict) else None
        if not isinstance(paths, dict) or not all(isinstance(p, str) for p in paths.values()):
            raise CorruptEntry(f"{group_path.name} has no child_paths object")
        bad_names = [child for child in paths if Path(child).name != child or child in (".", "..")]
        if bad_names:
            raise CorruptEntry(f"{group_path.name} lists {bad_names[0]!r}, not a file name")
        # Children live next to their group file; reading them there also serves a moved cache.
        children.update({child: str(group_path.parent / child) for child in paths})
        if filename not in paths:
            raise CorruptEntry(f"{group_path.name} does not list {filename}")
        sums = group.get(CHECKSUMS_KEY)
        sums = sums if isinstance(sums, dict) else {}  # entries written by stock Triton have none
        for child, path in children.items():
            try:
                data = Path(path).read_bytes()
            except OSError as exc:
                raise CorruptEntry(f"{child} is unreadable ({exc.strerror or exc})") from None
            expected = sums.get(child)
            if expected is not None and hashlib.sha256(data).hexdigest() != expected:
                raise CorruptEntry(f"{child} fails its checksum")
            check_file(child, data, metadata=child == filename)
        return dict(children)

    def _drop(self, group_path: Path, children: dict[str, str]) -> None:
        """Remove the entry's files; only those inside this entry's folder, whatever the group says."""
        here = Path(self.cache_dir).resolve()
        for path in (group_path, *map(Path, children.values())):
            with contextlib.suppress(OSError):
                if path.resolve().parent == here:
                    path.unlink()
