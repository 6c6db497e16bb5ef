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
import functools
import hashlib
import json
import logging
import os
import re
import sysconfig
from collections.abc import Callable
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


_KEY_MARK = "_xpukit_remembered"
# What triton_key() reads in the Triton it was read from (3.3: compiler/compiler.py, the compiler,
# backends and language packages, _C/libtriton): the folders under Triton's root and the library.
# Another Triton (the xpu profile's builds) keeps its own triton_key untouched.
KEY_TRITON = "3.3."
KEY_SOURCES = ("compiler", "backends", "language")
KEY_MEMO = "xpukit-triton-key"  # Triton names its entries by base32 digests: never this


def key_memo_dir() -> Path:
    """Next to the entries it keys, in Triton's cache folder: the image's cache volume for
    ``invoke demo-ur`` and the tests, the checkout's ``.xpukit/triton-cache`` for compile and
    kernel-report (whose containers keep no ``XPUKIT_CACHE_DIR`` between runs)."""
    return Path(os.getenv("TRITON_CACHE_DIR", "").strip() or default_cache_dir()) / KEY_MEMO


def install_stamp(root: Path) -> str | None:
    """A digest of every file ``triton_key()`` reads under Triton's ``root``, by path, size and
    modification time (what Python's own bytecode check trusts), with Triton's version; None when one
    cannot be read (then nothing is remembered)."""
    import triton

    files = [root / "_C" / f"libtriton.{sysconfig.get_config_var('EXT_SUFFIX').split('.')[-1]}"]
    for name in KEY_SOURCES:
        for folder, subfolders, names in os.walk(root / name):
            subfolders[:] = sorted(s for s in subfolders if s != "__pycache__")
            files += [Path(folder, n) for n in sorted(names)]
    digest = hashlib.sha256(f"{triton.__version__}|{root}\n".encode())
    try:
        for path in files:
            info = path.stat()
            digest.update(f"{path.relative_to(root)}|{info.st_size}|{info.st_mtime_ns}\n".encode())
    except OSError:
        return None
    return digest.hexdigest()


def well_formed_key(key: str) -> bool:
    """Triton 3.3's key: its version, then SHA-256 hex digests joined by dashes."""
    import triton

    rest = key[len(triton.__version__) :] if key.startswith(triton.__version__) else ""
    return bool(re.fullmatch(r"[0-9a-f]{64}(-[0-9a-f]{64})*", rest))


def remembered_key(compute: Callable[[], str], root: Path, memo_dir: Path) -> str:
    """``compute()`` (Triton's own ``triton_key``), remembered in ``memo_dir`` under
    :func:`install_stamp`: read back while no file it covers changed, computed and stored again
    when one did. A missing, unreadable or malformed memo is computed; a folder that cannot be
    written only costs the next process the same hashing."""
    stamp = install_stamp(root)
    if stamp is None:
        return compute()
    memo = memo_dir / f"{stamp}.key"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        key = memo.read_text(encoding="ascii")
        if well_formed_key(key):
            return key
    key = compute()
    with contextlib.suppress(OSError):
        memo_dir.mkdir(parents=True, exist_ok=True)
        partial = memo.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(key, encoding="ascii")
        os.replace(partial, memo)  # whole or not at all, for processes reading it meanwhile
    return key


def remember_triton_key() -> None:
    """Make Triton's ``triton_key()`` (part of every cache key) read a remembered value.

    Triton 3.3 (only that one: :data:`KEY_TRITON`) computes it once per process by hashing its
    compiler sources and the whole ``libtriton`` (~180 MB): ~0.25 s of every process that compiles or
    looks up a kernel, with the kernel in the cache or not. Installed Triton does not change between
    runs (in the image it is read-only), so the key is kept in Triton's cache folder
    (:func:`key_memo_dir`) under a stamp of the files it covers (:func:`remembered_key`);
    ``__wrapped__`` is Triton's own function."""
    import triton
    from triton.compiler import compiler

    original = getattr(compiler, "triton_key", None)
    if original is None or getattr(original, _KEY_MARK, False) or not triton.__version__.startswith(KEY_TRITON):
        return
    root = Path(triton.__file__).resolve().parent  # triton_key's TRITON_PATH

    @functools.cache
    def triton_key() -> str:
        return remembered_key(original, root, key_memo_dir())

    setattr(triton_key, _KEY_MARK, True)
    triton_key.__wrapped__ = original
    compiler.triton_key = triton_key


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
