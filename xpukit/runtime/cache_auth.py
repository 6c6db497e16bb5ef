"""Who may write a kernel cache: HMAC-SHA256 authenticators, the key and password files, the URL.

A cache entry is native code the kit hands to the device, so a checksum is not enough: whoever can
write the cache could write a matching checksum. Entries carry an HMAC-SHA256 over their content
AND their name (an entry copied under another kernel's name fails), made with a key that only the
team has:

- the shared cache (``XPUKIT_KERNEL_CACHE``): the key is the bytes of the file named by
  ``XPUKIT_KERNEL_CACHE_KEY_FILE`` (``head -c 32 /dev/urandom > key; chmod 600 key``). The key is
  never read from the environment or the URL; only the file's path is.
- the local program cache: a key of its own, made on first use next to the entries
  (:func:`local_key`), so an entry changed by anything but this user's kit fails.

A secret file must be readable by its owner only (mode 600 or 400); one that group or others can
read is refused with one line naming ``chmod 600``. The one exception is the folder the kit mounts
read-only into its own containers (:data:`CONTAINER_SECRETS`): the kit checked the original on the
host, and the copy there is readable by the image's user, whatever its uid.

This module is standard library only: the host kit (which forwards the settings into containers)
checks files and URLs with the same code as the runtime.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import ipaddress
import os
import stat
import tempfile
import urllib.parse
from collections.abc import Mapping
from pathlib import Path

from xpukit.errors import XpukitError

URL_ENV = "XPUKIT_KERNEL_CACHE"
KEY_FILE_ENV = "XPUKIT_KERNEL_CACHE_KEY_FILE"
PASSWORD_FILE_ENV = "XPUKIT_KERNEL_CACHE_PASSWORD_FILE"
CA_FILE_ENV = "XPUKIT_KERNEL_CACHE_CA_FILE"
DEBUG_ENV = "XPUKIT_KERNEL_CACHE_DEBUG"
# Where the kit mounts its copies of the key, password and CA files in its containers (read-only).
CONTAINER_SECRETS = "/run/xpukit/secrets"
MIN_KEY_BYTES = 16
MAKE_KEY = "head -c 32 /dev/urandom > FILE; chmod 600 FILE"

MAGIC = b"XPKA1"  # sealed value: MAGIC, key id (8 bytes), HMAC-SHA256 (32 bytes), payload
_ID_BYTES = 8
_TAG_BYTES = 32
HEADER_BYTES = len(MAGIC) + _ID_BYTES + _TAG_BYTES


class KernelCacheConfigError(XpukitError):
    """XPUKIT_KERNEL_CACHE or one of its files names something the kit cannot use."""


class AuthFailure(Exception):
    """A sealed value that does not open: the message says why in a few words."""


def _exempt(path: str) -> bool:
    return os.path.abspath(path).startswith(CONTAINER_SECRETS + "/")


def read_secret_file(path: str, env_name: str, *, min_bytes: int = 1) -> bytes:
    """The bytes of a secret file only its owner can read; :class:`KernelCacheConfigError` otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise KernelCacheConfigError(
            f"cannot read {env_name} {path}: {exc.strerror or exc}", "point it at a readable file, or unset it"
        ) from None
    try:
        st = os.fstat(fd)  # the file opened, not a name that may since point elsewhere
        if not stat.S_ISREG(st.st_mode):
            raise KernelCacheConfigError(f"{env_name} {path} is not a regular file", "point it at a file")
        if st.st_mode & 0o077 and not _exempt(path):
            raise KernelCacheConfigError(
                f"{env_name} {path} can be read by group or others (mode {stat.S_IMODE(st.st_mode):04o})",
                f"chmod 600 {path}",
            )
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read()
    finally:
        os.close(fd)
    if len(data) < min_bytes:
        raise KernelCacheConfigError(
            f"{env_name} {path} holds {len(data)} bytes, fewer than {min_bytes}",
            f"make a key: {MAKE_KEY.replace('FILE', path)}" if min_bytes > 1 else "write the secret into it",
        )
    return data


@dataclasses.dataclass(frozen=True)
class MacKey:
    """An HMAC-SHA256 key; ``key_id`` (public: a hash of the key) names it in cache keys and errors."""

    secret: bytes = dataclasses.field(repr=False)
    source: str = ""

    @property
    def key_id(self) -> str:
        return hashlib.sha256(b"xpukit-cache-key-id\0" + self.secret).hexdigest()[: 2 * _ID_BYTES]

    def tag(self, domain: str, name: str, payload: bytes | memoryview) -> bytes:
        """HMAC over a domain (which cache), the entry's name (which kernel) and its content."""
        mac = hmac.new(self.secret, b"".join((domain.encode(), b"\0", name.encode(), b"\0")), hashlib.sha256)
        mac.update(payload)  # no copy of a large payload
        return mac.digest()

    def seal(self, name: str, payload: bytes, domain: str = "kernel-cache") -> bytes:
        return MAGIC + bytes.fromhex(self.key_id) + self.tag(domain, name, payload) + payload

    def open(self, name: str, value: bytes, domain: str = "kernel-cache") -> bytes:
        """The payload of a value :meth:`seal` made for ``name``; :class:`AuthFailure` otherwise."""
        if not value.startswith(MAGIC) or len(value) < HEADER_BYTES:
            raise AuthFailure("it carries no authenticator")
        key_id = value[len(MAGIC) : len(MAGIC) + _ID_BYTES].hex()
        if key_id != self.key_id:
            raise AuthFailure(f"it was sealed with another key ({key_id}, this process has {self.key_id})")
        payload = memoryview(value)[HEADER_BYTES:]
        if not hmac.compare_digest(value[len(MAGIC) + _ID_BYTES : HEADER_BYTES], self.tag(domain, name, payload)):
            raise AuthFailure("its authenticator does not match (content changed, or another entry's copy)")
        return payload.tobytes()


def configured_key(environ: Mapping[str, str] | None = None) -> MacKey | None:
    """The shared cache's key from XPUKIT_KERNEL_CACHE_KEY_FILE, None when that is unset."""
    environ = os.environ if environ is None else environ
    path = environ.get(KEY_FILE_ENV, "").strip()
    if not path:
        return None
    return MacKey(read_secret_file(path, KEY_FILE_ENV, min_bytes=MIN_KEY_BYTES), path)


def configured_password(environ: Mapping[str, str] | None = None) -> str | None:
    """The Redis password from XPUKIT_KERNEL_CACHE_PASSWORD_FILE (one trailing newline dropped)."""
    environ = os.environ if environ is None else environ
    path = environ.get(PASSWORD_FILE_ENV, "").strip()
    if not path:
        return None
    data = read_secret_file(path, PASSWORD_FILE_ENV)
    try:
        return data.decode().rstrip("\r\n")
    except UnicodeDecodeError:
        raise KernelCacheConfigError(f"{PASSWORD_FILE_ENV} {path} is not UTF-8 text", "write the password") from None


def configured_ca_file(environ: Mapping[str, str] | None = None) -> str | None:
    environ = os.environ if environ is None else environ
    path = environ.get(CA_FILE_ENV, "").strip()
    if path and not os.path.isfile(path):
        raise KernelCacheConfigError(f"{CA_FILE_ENV} {path} is not a file", "point it at the CA's PEM file")
    return path or None


@dataclasses.dataclass(frozen=True)
class Target:
    """Where the shared cache is: ``redis://`` or ``rediss://`` (TLS), ``[USER@]HOST:PORT[/DB]``."""

    url: str
    tls: bool
    host: str
    port: int
    db: int
    username: str | None

    @property
    def loopback(self) -> bool:
        """Whether the host is this machine's loopback (a container reaches it only on the host's network)."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_url(url: str) -> Target:
    """XPUKIT_KERNEL_CACHE checked: one line naming the problem, never echoing a password."""
    parsed = urllib.parse.urlsplit(url)
    shown = url
    if parsed.password is not None:
        shown = parsed._replace(netloc=parsed.netloc.replace(f":{parsed.password}@", ":***@")).geturl()
        raise KernelCacheConfigError(
            f"{URL_ENV}={shown} carries a password",
            f"put the password in a file (chmod 600) named by {PASSWORD_FILE_ENV}, and drop it from the URL",
        )
    if parsed.scheme not in ("redis", "rediss") or not parsed.hostname:
        raise KernelCacheConfigError(
            f"{URL_ENV}={shown!r} is not a redis://HOST:PORT[/DB] URL",
            f"set {URL_ENV}=redis://127.0.0.1:6379 (rediss:// for TLS), or unset it",
        )
    try:
        db = int(parsed.path.lstrip("/") or 0)
        port = parsed.port or 6379
    except ValueError:
        raise KernelCacheConfigError(
            f"{URL_ENV}={shown!r} has a bad port or database number", "use redis://HOST:PORT/DB with integers"
        ) from None
    username = urllib.parse.unquote(parsed.username) if parsed.username else None
    return Target(url, parsed.scheme == "rediss", parsed.hostname, port, db, username)


# ---------------------------------------------------------------- the local program cache's own key

LOCAL_KEY_NAME = ".xpukit-key"


def local_key(directory: Path) -> MacKey:
    """The key of a local cache folder, made (32 random bytes, mode 600) when the folder has none.

    The file must belong to this user and be private; :class:`KernelCacheConfigError` otherwise
    (someone else's file in a shared folder is not a key to trust)."""
    path = directory / LOCAL_KEY_NAME
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-key-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(32))
            try:
                os.link(tmp, path)  # atomic, and never replaces: readers see a whole key or none
            except FileExistsError:
                pass  # another process made it first: use theirs
            except OSError:  # a file system without hard links
                with contextlib.suppress(FileExistsError), open(path, "xb") as f:
                    os.chmod(path, 0o600)
                    f.write(Path(tmp).read_bytes())
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    st = path.lstat()
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        raise KernelCacheConfigError(
            f"program cache key {path} is not a file of this user", f"remove {path} (a new key is made)"
        )
    return MacKey(read_secret_file(str(path), "program cache key", min_bytes=MIN_KEY_BYTES), str(path))
