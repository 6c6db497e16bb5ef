"""A kernel cache shared between machines: ``XPUKIT_KERNEL_CACHE=redis://HOST:PORT[/DB]``.

Triton's compiled kernels go through the kit's cache manager (``xpukit.runtime.triton_cache``,
selected with Triton's ``TRITON_CACHE_MANAGER`` hook) and the kit's native binaries through
:class:`SharedProgramCache`: what one machine compiled is a cache hit on every other machine that
points at the same Redis, after the same checks as a local entry. Counters (:func:`stats`) say how
many files were hits, misses and stores; ``XPUKIT_KERNEL_CACHE_DEBUG=1`` logs each lookup.

Redis down or unreachable: one warning, then the local cache alone; nothing fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import urllib.parse
from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime.program_cache import ProgramCache

log = logging.getLogger("xpukit.kernel_cache")
ENV = "XPUKIT_KERNEL_CACHE"
_PREFIX = "xpukit:"


class KernelCacheConfigError(XpukitError):
    """XPUKIT_KERNEL_CACHE names something the kit cannot use."""


@dataclasses.dataclass
class Stats:
    hits: int = 0  # files found in the shared cache
    misses: int = 0  # files asked for and not there
    stores: int = 0
    errors: int = 0


class RemoteStore:
    """Bytes by key in Redis, failing soft: the first error warns once and turns the store off."""

    def __init__(self, url: str) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "redis" or not parsed.hostname:
            raise KernelCacheConfigError(
                f"{ENV}={url!r} is not a redis://HOST:PORT[/DB] URL", f"set {ENV}=redis://127.0.0.1:6379, or unset it"
            )
        try:
            db = int(parsed.path.lstrip("/") or 0)
            port = parsed.port or 6379
        except ValueError:
            raise KernelCacheConfigError(
                f"{ENV}={url!r} has a bad port or database number", "use redis://HOST:PORT/DB with integers"
            ) from None
        self.url = url
        self.stats = Stats()
        self.down = False
        self._lock = threading.Lock()
        try:
            import redis
        except ImportError:
            raise KernelCacheConfigError(
                f"{ENV} is set but the redis package is missing", "pip install redis (the kit's image has it)"
            ) from None
        self._errors = (redis.RedisError, OSError)
        self._client = redis.Redis(
            host=parsed.hostname, port=port, db=db, socket_connect_timeout=2, socket_timeout=5, retry_on_timeout=False
        )

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self.stats.errors += 1
            if not self.down:
                self.down = True
                log.warning("xpukit: kernel cache %s unavailable (%s); using the local cache only", self.url, exc)

    def get(self, keys: list[str]) -> dict[str, bytes]:
        if self.down or not keys:
            return {}
        try:
            values = self._client.mget([_PREFIX + k for k in keys])
        except self._errors as exc:
            self._failed(exc)
            return {}
        found = {k: v for k, v in zip(keys, values, strict=True) if v is not None}
        with self._lock:
            self.stats.hits += len(found)
            self.stats.misses += len(keys) - len(found)
        if os.environ.get("XPUKIT_KERNEL_CACHE_DEBUG") == "1":
            for k in keys:
                log.warning("xpukit: kernel cache %s %s", "hit" if k in found else "miss", k)
        return found

    def put(self, key: str, data: bytes) -> None:
        if self.down:
            return
        try:
            self._client.set(_PREFIX + key, data)
        except self._errors as exc:
            self._failed(exc)
            return
        with self._lock:
            self.stats.stores += 1


_STORE: RemoteStore | None = None
_STORE_URL = ""
_STORE_LOCK = threading.Lock()


def remote_store() -> RemoteStore | None:
    """The process's shared store from XPUKIT_KERNEL_CACHE, or None when it is unset."""
    global _STORE, _STORE_URL
    url = os.environ.get(ENV, "").strip()
    with _STORE_LOCK:
        if url != _STORE_URL:
            _STORE = RemoteStore(url) if url else None
            _STORE_URL = url
        return _STORE


def stats() -> Stats:
    """Counters of the shared store (all zero when none is configured)."""
    store = remote_store()
    return dataclasses.replace(store.stats) if store is not None else Stats()


def install() -> bool:
    """Check XPUKIT_KERNEL_CACHE now (a bad URL is one clear error before anything compiles);
    Triton's cache manager (xpukit.runtime.triton_cache) and the program cache then share through
    it. Returns whether sharing is on."""
    return remote_store() is not None


class SharedProgramCache(ProgramCache):
    """The native-binary program cache with a shared copy in the store: a local miss asks the store
    for the entry (binary and its metadata), which then passes the very checks a local entry
    passes (checksum, device, driver, SPIR-V); every new local entry is also shared. Keys already
    name device, driver and UR release, so machines only ever share what they could load."""

    def __init__(self, store: RemoteStore, directory: str | os.PathLike[str] | None = None) -> None:
        super().__init__(directory)
        self.store = store

    def read(self, key: str, device: Any, spirv_sha256: str) -> bytes | None:
        data = super().read(key, device, spirv_sha256)
        if data is not None:
            return data
        names = [f"program:{key}.bin", f"program:{key}.json"]
        found = self.store.get(names)
        if len(found) != 2:
            return None
        bin_path, meta_path = self._paths(key)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            bin_path.write_bytes(found[names[0]])
            meta_path.write_bytes(found[names[1]])
        except OSError:
            return None  # nowhere to materialise it: build from SPIR-V as without a store
        self.events.append(("shared-hit", key))
        return super().read(key, device, spirv_sha256)  # a bad shared entry is caught like a local one

    def write(self, key: str, device: Any, spirv_sha256: str, data: bytes) -> bool:
        stored = super().write(key, device, spirv_sha256, data)
        if stored:
            bin_path, meta_path = self._paths(key)
            with contextlib.suppress(OSError):
                self.store.put(f"program:{key}.json", meta_path.read_bytes())
                self.store.put(f"program:{key}.bin", bin_path.read_bytes())
        return stored


def program_cache(directory: str | os.PathLike[str] | None = None) -> ProgramCache:
    """The program cache to use: shared through XPUKIT_KERNEL_CACHE when set, else local only."""
    store = remote_store()
    return SharedProgramCache(store, directory) if store is not None else ProgramCache(directory)
