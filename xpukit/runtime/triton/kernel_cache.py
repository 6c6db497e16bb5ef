"""A kernel cache shared between machines: ``XPUKIT_KERNEL_CACHE=redis://HOST:PORT[/DB]`` (or
``rediss://`` for TLS).

Triton's compiled kernels go through the kit's cache manager (``xpukit.runtime.triton.triton_cache``,
selected with Triton's ``TRITON_CACHE_MANAGER`` hook) and the kit's native binaries through
:class:`SharedProgramCache`: what one machine compiled is a cache hit on every other machine that
points at the same Redis, after the same checks as a local entry. Counters (:func:`stats`) say how
many files were hits, misses, stores and rejected entries; ``XPUKIT_KERNEL_CACHE_DEBUG=1`` logs
each lookup.

Who may write it: with ``XPUKIT_KERNEL_CACHE_KEY_FILE`` (a file of 16+ random bytes, mode 600)
every value is sealed with HMAC-SHA256 over its name and content (``xpukit.runtime.cache_auth``)
and lives under a prefix named by the key's id; a value that does not open under this key (changed,
sealed with another key, copied from another entry's name, or not sealed at all) is dropped from
Redis with one warning and rebuilt here. Without a key the cache works as before (checksums only,
under the plain ``xpukit:`` prefix, never mixed with keyed entries), and the process says once that
anyone who can write to that Redis can put code into it.

``XPUKIT_KERNEL_CACHE_PASSWORD_FILE`` holds the Redis password (``requirepass`` or an ACL user's,
with ``redis://USER@HOST``), ``XPUKIT_KERNEL_CACHE_CA_FILE`` the CA that signed a ``rediss://``
server's certificate (else the system's trust store). A password in the URL is refused.

Redis down, unreachable, or refusing the password: one warning, then the local cache alone.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from typing import Any, cast

from xpukit.runtime import cache_auth
from xpukit.runtime.cache_auth import KernelCacheConfigError, MacKey
from xpukit.runtime.triton.program_cache import ProgramCache, entry_meta, entry_problems
from xpukit.runtime.ur.errors import ProgramCacheCorrupt

__all__ = ["ENV", "KernelCacheConfigError", "RemoteStore", "SharedProgramCache", "Stats", "program_cache", "stats"]

log = logging.getLogger("xpukit.kernel_cache")
ENV = cache_auth.URL_ENV
_PREFIX = "xpukit:"


@dataclasses.dataclass
class Stats:
    hits: int = 0  # files found in the shared cache (and, with a key, opened)
    misses: int = 0  # files asked for and not there (or rejected)
    stores: int = 0
    errors: int = 0
    rejected: int = 0  # entries dropped: not sealed with this process's key for their name


class RemoteStore:
    """Bytes by name in Redis, sealed with the team's key when there is one; failing soft: the
    first error warns once and turns the store off."""

    def __init__(
        self, url: str, key: MacKey | None = None, password: str | None = None, ca_file: str | None = None
    ) -> None:
        target = cache_auth.parse_url(url)
        self.url = url
        self.key = key
        self.prefix = _PREFIX if key is None else f"{_PREFIX}k{key.key_id}:"
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
        tls: dict[str, Any] = {"ssl": True, "ssl_ca_certs": ca_file, "ssl_check_hostname": True} if target.tls else {}
        self._client = redis.Redis(
            host=target.host,
            port=target.port,
            db=target.db,
            username=target.username,
            password=password,
            socket_connect_timeout=2,
            socket_timeout=5,
            retry_on_timeout=False,
            **tls,
        )

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self.stats.errors += 1
            if not self.down:
                self.down = True
                log.warning("xpukit: kernel cache %s unavailable (%s); using the local cache only", self.url, exc)

    def get(self, names: list[str]) -> dict[str, bytes]:
        """The values found, opened with the key. Values that do not open are dropped from Redis
        with one warning (per call: one entry's files are asked for together)."""
        if self.down or not names:
            return {}
        try:
            # bytes or None: the client decodes nothing (redis-py types replies as bytes or str)
            values = cast("list[bytes | None]", self._client.mget([self.prefix + n for n in names]))
        except self._errors as exc:
            self._failed(exc)
            return {}
        found: dict[str, bytes] = {}
        rejected: list[tuple[str, str]] = []
        for name, value in zip(names, values, strict=True):
            if value is None:
                continue
            if self.key is None:
                found[name] = value
                continue
            try:
                found[name] = self.key.open(name, value)
            except cache_auth.AuthFailure as exc:
                rejected.append((name, str(exc)))
        with self._lock:
            self.stats.hits += len(found)
            self.stats.misses += len(names) - len(found)
            self.stats.rejected += 1 if rejected else 0
        if rejected:
            name, why = rejected[0]
            log.warning("xpukit: shared kernel cache entry %s rejected: %s; dropped, rebuilt here", name, why)
            self.delete([n for n, _ in rejected])
        if os.environ.get(cache_auth.DEBUG_ENV) == "1":
            for n in names:
                log.warning("xpukit: kernel cache %s %s", "hit" if n in found else "miss", n)
        return found

    def put(self, name: str, data: bytes) -> None:
        if self.down:
            return
        value = data if self.key is None else self.key.seal(name, data)
        try:
            self._client.set(self.prefix + name, value)
        except self._errors as exc:
            self._failed(exc)
            return
        with self._lock:
            self.stats.stores += 1

    def delete(self, names: list[str]) -> None:
        if self.down or not names:
            return
        try:
            self._client.delete(*[self.prefix + n for n in names])
        except self._errors as exc:
            self._failed(exc)


_STORE: RemoteStore | None = None
_STORE_CONFIG: tuple[str, ...] = ()
_STORE_LOCK = threading.Lock()
_NO_KEY_WARNED = False
_CONFIG_ENVS = (ENV, cache_auth.KEY_FILE_ENV, cache_auth.PASSWORD_FILE_ENV, cache_auth.CA_FILE_ENV)


def _new_store(url: str) -> RemoteStore:
    global _NO_KEY_WARNED
    cache_auth.parse_url(url)  # a bad URL is reported before the files are read
    key = cache_auth.configured_key()
    store = RemoteStore(url, key, cache_auth.configured_password(), cache_auth.configured_ca_file())
    if key is None and not _NO_KEY_WARNED:
        _NO_KEY_WARNED = True
        log.warning(
            "xpukit: kernel cache %s has no key (%s unset): entries are checksummed, not authenticated, "
            "so whoever can write to it can run code here (see docs/team.md)",
            url,
            cache_auth.KEY_FILE_ENV,
        )
    return store


def remote_store() -> RemoteStore | None:
    """The process's shared store from XPUKIT_KERNEL_CACHE (and its files), None when unset;
    :class:`KernelCacheConfigError` for a bad URL or a key or password file the kit refuses."""
    global _STORE, _STORE_CONFIG
    config = tuple(os.environ.get(name, "").strip() for name in _CONFIG_ENVS)
    with _STORE_LOCK:
        if config != _STORE_CONFIG:
            _STORE = _new_store(config[0]) if config[0] else None
            _STORE_CONFIG = config
        return _STORE


def stats() -> Stats:
    """Counters of the shared store (all zero when none is configured)."""
    store = remote_store()
    return dataclasses.replace(store.stats) if store is not None else Stats()


def install() -> bool:
    """Check XPUKIT_KERNEL_CACHE and its files now (a bad setting is one clear error before anything
    compiles); Triton's cache manager (xpukit.runtime.triton.triton_cache) and the program cache then share
    through it. Returns whether sharing is on."""
    return remote_store() is not None


class SharedProgramCache(ProgramCache):
    """The native-binary program cache with a shared copy in the store: a local miss asks the store
    for the entry (its record and binary in one value, sealed with the team's key), which then
    passes the very checks a local entry passes (checksum, device, driver, SPIR-V) before it is
    used and written locally (with the local folder's own authenticator); every new local entry is
    also shared. Keys already name device, driver and UR release, so machines only ever share what
    they could load."""

    def __init__(self, store: RemoteStore, directory: str | os.PathLike[str] | None = None) -> None:
        super().__init__(directory)
        self.store = store

    def read(self, key: str, device: Any, spirv_sha256: str) -> bytes | None:
        data = super().read(key, device, spirv_sha256)
        if data is not None:
            return data
        name = f"program:{key}"
        value = self.store.get([name]).get(name)
        if value is None:
            return None
        record, _, data = value.partition(b"\n")
        try:
            meta = json.loads(record)
        except ValueError:
            meta = None
        problems = entry_problems(meta, data, device, spirv_sha256) if meta is not None else ["record"]
        if problems:
            raise ProgramCacheCorrupt(
                f"shared program cache entry {key} fails its {', '.join(problems)} check", "it is rebuilt from SPIR-V"
            )
        self.events.append(("shared-hit", key))
        self._write(key, meta, data)  # the local copy (best effort: nowhere to write costs only a rebuild)
        return data

    def write(self, key: str, device: Any, spirv_sha256: str, data: bytes) -> bool:
        stored = super().write(key, device, spirv_sha256, data)
        if stored:
            record = json.dumps(entry_meta(device, spirv_sha256, data)).encode()
            self.store.put(f"program:{key}", record + b"\n" + data)
        return stored

    def drop(self, key: str) -> None:
        super().drop(key)
        self.store.delete([f"program:{key}"])


def program_cache(directory: str | os.PathLike[str] | None = None) -> ProgramCache:
    """The program cache to use: shared through XPUKIT_KERNEL_CACHE when set, else local only."""
    store = remote_store()
    return SharedProgramCache(store, directory) if store is not None else ProgramCache(directory)
