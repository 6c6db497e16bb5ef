"""The native-binary program cache: what ``urProgramGetInfo(BINARIES)`` returned for a SPIR-V
program, reloaded with ``urProgramCreateWithBinary`` on the next run (keyed by device, driver, UR
release, build options and SPIR-V hash; on a GPU also the IGC the driver compiles with, by version
and build ID, ``compiler_id.driver_igc_key``: ocloc takes no part in these binaries). A stale,
corrupt or forged entry is rebuilt from SPIR-V, never trusted: every entry carries an HMAC-SHA256
(``xpukit.runtime.cache_auth``) over its metadata, the binary's SHA-256 and its own name, made with
the folder's private key, so a binary changed by anyone but this user's kit (checksum updated or
not) is dropped before the device sees it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
from hmac import compare_digest as hmac_equal
from pathlib import Path
from typing import Any, NamedTuple

from xpukit import layout
from xpukit.runtime import cache_auth
from xpukit.runtime.offline import compiler_id
from xpukit.runtime.scratch import writable_cache_dir
from xpukit.runtime.ur.core import Session
from xpukit.runtime.ur.errors import ProgramCacheCorrupt, UrError
from xpukit.runtime.ur.objects import Program

log = logging.getLogger("xpukit.launch")

# 2: entries carry an authenticator ("mac"). The format is part of every key, so format-1 entries
# are never looked up (no warning for each old entry): they are simply not this cache's.
CACHE_FORMAT = 2
MAC_DOMAIN = "program-cache"
_key_warned: set[str] = set()
_key_lock = threading.Lock()


class Loaded(NamedTuple):
    """What :meth:`ProgramCache.load` loaded: the built program, and whether it came from a cached
    native binary (``hit``) or was built from SPIR-V (a miss or a dropped corrupt entry)."""

    program: Program
    hit: bool


def default_cache_dir() -> Path:
    return layout.kit_cache_dir() / "ur-programs"


def entry_meta(device: Any, spirv_sha256: str, data: bytes) -> dict[str, Any]:
    """What an entry records about its binary (the shared cache sends the same record)."""
    return {
        "format": CACHE_FORMAT,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "device": device.cache_key(),
        "ur_release": device.ur_release,
        "spirv_sha256": spirv_sha256,
    }


def entry_problems(meta: Any, data: bytes, device: Any, spirv_sha256: str) -> list[str]:
    """The checks an entry's record fails against its binary and this device ([] when none)."""
    if not isinstance(meta, dict):
        return [f"JSON {type(meta).__name__} instead of an object"]
    problems = []
    if meta.get("format") != CACHE_FORMAT:
        problems.append("format")
    if meta.get("size") != len(data) or meta.get("sha256") != hashlib.sha256(data).hexdigest():
        problems.append("binary checksum")
    if meta.get("device") != device.cache_key() or meta.get("spirv_sha256") != spirv_sha256:
        problems.append("device/driver/SPIR-V")
    return problems


def _canonical(meta: dict[str, Any]) -> bytes:
    return json.dumps({k: v for k, v in meta.items() if k != "mac"}, sort_keys=True, separators=(",", ":")).encode()


class ProgramCache:
    """Native device binaries from ``urProgramGetInfo(BINARIES)``, reloaded with
    ``urProgramCreateWithBinary``. Each entry is ``<key>.bin`` plus ``<key>.json`` holding its
    SHA-256, size, device, driver and an HMAC of all that and the entry's name with the folder's
    key (``.xpukit-key``, made on first use, mode 600); any mismatch or a failed load means rebuild
    from SPIR-V.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory else default_cache_dir()
        self.events: list[tuple[str, str]] = []  # (event, key): hit, miss, corrupt, store, store-failed
        self._mac: tuple[Path, cache_auth.MacKey | None] | None = None

    def key(self, device: Any, spirv_sha256: str, options: str = "") -> str:
        text = f"{CACHE_FORMAT}|{device.cache_key()}|{device.ur_release}|{options}|{spirv_sha256}"
        if getattr(device, "type", "") == "gpu":
            # A GPU driver compiles with the system's IGC, a package of its own that can change under
            # one driver version (CPU OpenCL's compiler is part of its driver, named by cache_key).
            text += f"|{compiler_id.driver_igc_key()}"
        return hashlib.sha256(text.encode()).hexdigest()[:40]

    def _usable_directory(self) -> Path:
        # A read-only folder (docker run --read-only) means a private temporary one, with one warning.
        return writable_cache_dir(self.directory, "program cache")

    def mac_key(self) -> cache_auth.MacKey | None:
        """The folder's key; None (one warning per folder and process: the cache is off) when the
        key file there is not this user's private file."""
        directory = self._usable_directory()
        if self._mac is None or self._mac[0] != directory:
            try:
                self._mac = (directory, cache_auth.local_key(directory))
            except (cache_auth.KernelCacheConfigError, OSError) as exc:
                self._mac = (directory, None)
                text = exc.one_line() if isinstance(exc, cache_auth.KernelCacheConfigError) else str(exc)
                with _key_lock:
                    first = str(directory) not in _key_warned
                    _key_warned.add(str(directory))
                if first:
                    log.warning("xpukit: program cache off for this run: %s", text)
        return self._mac[1]

    def _mac_of(self, mac_key: cache_auth.MacKey, key: str, meta: dict[str, Any]) -> str:
        return mac_key.tag(MAC_DOMAIN, key, _canonical(meta)).hex()

    def _paths(self, key: str) -> tuple[Path, Path]:
        directory = self._usable_directory()
        return directory / f"{key}.bin", directory / f"{key}.json"

    def read(self, key: str, device: Any, spirv_sha256: str) -> bytes | None:
        """The cached binary, None when absent; :class:`ProgramCacheCorrupt` when it fails a check."""
        bin_path, meta_path = self._paths(key)
        if not meta_path.exists() and not bin_path.exists():
            return None
        mac_key = self.mac_key()
        if mac_key is None:
            return None
        try:
            meta = json.loads(meta_path.read_text())
            data = bin_path.read_bytes()
        except (OSError, ValueError) as exc:
            raise ProgramCacheCorrupt(f"program cache entry {key} unreadable: {exc}", "it is rebuilt") from None
        if not isinstance(meta, dict):
            raise ProgramCacheCorrupt(
                f"program cache entry {key}: {meta_path.name} holds a JSON {type(meta).__name__}, not an object",
                "it is rebuilt from SPIR-V",
            )
        problems = entry_problems(meta, data, device, spirv_sha256)
        # Checked on the record as read: a binary changed with its checksum updated fails here.
        mac = meta.get("mac")
        if not isinstance(mac, str) or not hmac_equal(mac, self._mac_of(mac_key, key, meta)):
            problems.insert(0, "authenticator")
        if problems:
            raise ProgramCacheCorrupt(
                f"program cache entry {key} fails its {', '.join(problems)} check",
                "it is rebuilt from SPIR-V",
            )
        return data

    def write(self, key: str, device: Any, spirv_sha256: str, data: bytes) -> bool:
        problem = self._write(key, entry_meta(device, spirv_sha256, data), data)
        if problem == "":  # no usable key: said once already (mac_key)
            self.events.append(("store-failed", key))
            return False
        if problem is not None:
            log.warning("xpukit: cannot write program cache %s (%s); continuing without it", self.directory, problem)
            self.events.append(("store-failed", key))
            return False
        self.events.append(("store", key))
        return True

    def _write(self, key: str, meta: dict[str, Any], data: bytes) -> str | None:
        """Write an entry with its authenticator; what went wrong ("": no usable key), or None."""
        bin_path, meta_path = self._paths(key)
        mac_key = self.mac_key()
        if mac_key is None:
            return ""
        meta = {**meta, "mac": self._mac_of(mac_key, key, meta)}
        directory = bin_path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for path, payload in ((bin_path, data), (meta_path, json.dumps(meta).encode())):
                fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
                try:
                    with os.fdopen(fd, "wb") as f:
                        f.write(payload)
                    os.replace(tmp, path)  # atomic: readers see the old entry or the new one
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                    raise
        except OSError as exc:
            return str(exc)
        return None

    def drop(self, key: str) -> None:
        for p in self._paths(key):
            with contextlib.suppress(OSError):
                p.unlink()

    def load(self, session: Session, spirv: bytes, options: str = "", spirv_sha256: str | None = None) -> Loaded:
        """A built program: from the cached native binary if valid, else from SPIR-V (then cached)."""
        sha = spirv_sha256 or hashlib.sha256(spirv).hexdigest()
        dev = session.device
        key = self.key(dev, sha, options)
        try:
            data = self.read(key, dev, sha)
            if data is not None:
                try:
                    prog = session.program_from_binary(data, options)
                except UrError as exc:
                    raise ProgramCacheCorrupt(
                        f"program cache entry {key} rejected by the device: {exc.result_name}",
                        "it is rebuilt",
                    ) from None
                self.events.append(("hit", key))
                return Loaded(prog, hit=True)
            self.events.append(("miss", key))
        except ProgramCacheCorrupt as exc:
            log.warning("xpukit: %s", exc)
            self.events.append(("corrupt", key))
            self.drop(key)
        prog = session.program_from_spirv(spirv, options)
        try:
            self.write(key, dev, sha, prog.binary())
        except UrError as exc:  # an adapter without binaries: still run, just uncached
            log.warning("xpukit: cannot read the program binary (%s); not caching", exc.result_name)
        return Loaded(prog, hit=False)
