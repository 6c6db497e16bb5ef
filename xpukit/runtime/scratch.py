"""Private temporary folders that name their owner, and cache folders that may turn out unwritable.

A scratch folder is ``<tmp>/<prefix><pid>-<host>-<random>``: pid and host (a hash of the host name,
so containers sharing a temp dir leave each other's alone) say which process owns it, so a later
run removes the folders of processes that are gone (killed with SIGKILL, say) and never those of a
run still going. A cache folder that cannot be written (a read-only ``TRITON_CACHE_DIR``, ``docker
run --read-only`` without a cache volume) is swapped for a private temporary one, with one warning.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import os
import re
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from xpukit.errors import XpukitError

log = logging.getLogger("xpukit.cache")

# Folders kept on purpose (a failed ocloc run keeps its input for the repro command) hold this file.
KEEP_MARKER = "kept-for-repro"

_lock = threading.RLock()
_swept: set[str] = set()
_resolved: dict[str, Path] = {}
_fallback_root: Path | None = None


def host_tag() -> str:
    """Eight hex digits naming this host (container): pids mean nothing across hosts."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def remove_stale(prefix: str, directory: str | None = None) -> list[Path]:
    """Remove ``<prefix><pid>-<host>-*`` folders of this host and user whose process is gone."""
    base = Path(directory or tempfile.gettempdir())
    pattern = re.compile(re.escape(prefix) + r"(\d+)-" + re.escape(host_tag()) + r"-[^/]+")
    removed: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if not match or int(match.group(1)) == os.getpid():
            continue
        try:
            st = entry.lstat()
            if not entry.is_dir() or entry.is_symlink() or st.st_uid != os.getuid():
                continue
            if (entry / KEEP_MARKER).exists() or _pid_alive(int(match.group(1))):
                continue
        except OSError:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def make_scratch_dir(prefix: str) -> Path:
    """A new private folder ``<tmp>/<prefix><pid>-<host>-<random>``; stale ones are swept once per process."""
    with _lock:
        if prefix not in _swept:
            _swept.add(prefix)
            remove_stale(prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-{host_tag()}-"))


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    """A scratch folder removed on exit, also when the body is interrupted (Ctrl-C)."""
    path = make_scratch_dir(prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _probe(path: Path) -> str:
    """Why ``path`` cannot hold a cache ("" when it can): create it, then create and delete a file."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path, prefix=".xpukit-probe-")
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return ""


def _private_root() -> Path:
    global _fallback_root
    if _fallback_root is None:
        _fallback_root = make_scratch_dir("xpukit-cache-")
        root = _fallback_root
        atexit.register(shutil.rmtree, root, True)
    return _fallback_root


def writable_cache_dir(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` when a cache can be written there, else a private temporary folder for this process.

    Probed once per folder and process; the fallback is announced with one warning naming both.
    """
    wanted = Path(os.path.abspath(os.fspath(path)))
    key = str(wanted)
    with _lock:
        found = _resolved.get(key)
        if found is not None:
            return found
        problem = _probe(wanted)
        if not problem:
            _resolved[key] = wanted
            return wanted
        slug = re.sub(r"[^a-z0-9]+", "-", what.lower()).strip("-")
        try:
            fallback = _private_root() / slug
            fallback.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise XpukitError(
                f"{what} {wanted} is not writable ({problem}) and neither is the temporary folder "
                f"{tempfile.gettempdir()} ({exc.strerror or exc})",
                f"mount a writable folder at {wanted}, or a tmpfs at /tmp (docker run --tmpfs /tmp)",
            ) from None
        _resolved[key] = fallback
    log.warning(
        "xpukit: %s %s is not writable (%s); this run uses %s (fix: mount a writable folder there)",
        what,
        wanted,
        problem,
        fallback,
    )
    return fallback


def write_whole(path: Path, data: bytes) -> None:
    """Whole or not at all, through ``.<name>.<pid>.tmp`` and a rename: a concurrent reader never sees
    half a file, and an interrupt or a killed writer leaves at most that temporary file, never half
    of ``path``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
