"""The shared kernel cache in the kit's containers: ``XPUKIT_KERNEL_CACHE`` and its files, forwarded.

:func:`forwarding` computes, from the host's environment, what a container needs to use the same
cache as the host: the variables, a read-only mount of the key, password and CA files, and a
network that reaches Redis. ``containers.container_options`` applies it to every container a task
starts (compile, kernel-report, zebin-info, demo-ur, test, shell, and matrix cells built on it);
the devcontainer takes the same pieces, and a script that writes its own ``docker run`` /
``podman run`` line takes :meth:`Forwarding.cli_flags`.

Files: the originals are checked as the runtime checks them (mode 600, one line naming ``chmod``),
then copied into ``~/.cache/xpukit/container-secrets`` (a folder only this user can enter) with a
mode the image's user can read whatever its uid (10001, or the caller's for compile), and each copy
is mounted read-only under ``/run/xpukit/secrets`` (file by file: a mount of the folder would
carry its mode 700 into the container). The runtime accepts those copies there
without the mode check (``xpukit.runtime.cache_auth.CONTAINER_SECRETS``); a bind mount of the 600
original would be unreadable to the image's user.

Network: a cache on the host's loopback (``127.0.0.1``, ``localhost``, ``::1``) is reachable from a
container only on the host's network, so those containers run with ``--network host`` (Docker
20.10 and podman, rootful or rootless, both do this). Rewriting the URL to the host gateway would
need Redis listening on the bridge address too, and would break a ``rediss://`` certificate made
for ``localhost``. A cache elsewhere is reached through the engine's default network. A container
that still cannot reach it costs one warning from the runtime, which then uses the local cache.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xpukit.runtime import cache_auth
from xpukit.runtime.cache_auth import CONTAINER_SECRETS, KernelCacheConfigError

SECRETS_FOLDER = "container-secrets"
# setting -> the copy's name in the secrets folder
FILES = {
    cache_auth.KEY_FILE_ENV: "kernel-cache.key",
    cache_auth.PASSWORD_FILE_ENV: "kernel-cache.password",
    cache_auth.CA_FILE_ENV: "kernel-cache-ca.pem",
}


@dataclasses.dataclass
class Forwarding:
    """What a container needs for the host's shared kernel cache."""

    environment: dict[str, str]
    volumes: dict[str, dict[str, str]]  # host path -> {"bind": ..., "mode": "ro"}, as the docker SDK takes them
    network_mode: str | None  # "host", or None for the engine's default
    notes: list[str] = dataclasses.field(default_factory=list)  # warnings for the user, one line each

    def apply(self, options: dict[str, Any]) -> None:
        """Merge into docker SDK run options."""
        options.setdefault("environment", {}).update(self.environment)
        options.setdefault("volumes", {}).update(self.volumes)
        if self.network_mode:
            options["network_mode"] = self.network_mode

    def cli_flags(self) -> list[str]:
        """The same as ``docker run`` / ``podman run`` flags."""
        flags = ["--network", self.network_mode] if self.network_mode else []
        for host_path, spec in self.volumes.items():
            flags += ["-v", f"{host_path}:{spec['bind']}:{spec['mode']}"]
        for name, value in self.environment.items():
            flags += ["-e", f"{name}={value}"]
        return flags


def secrets_folder(environ: Mapping[str, str]) -> Path:
    home = environ.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".cache" / "xpukit" / SECRETS_FOLDER


def _read(setting: str, path: str) -> bytes:
    if setting == cache_auth.KEY_FILE_ENV:
        return cache_auth.read_secret_file(path, setting, min_bytes=cache_auth.MIN_KEY_BYTES)
    if setting == cache_auth.PASSWORD_FILE_ENV:
        return cache_auth.read_secret_file(path, setting)
    try:
        return Path(path).read_bytes()  # a CA certificate is public
    except OSError as exc:
        raise KernelCacheConfigError(
            f"cannot read {setting} {path}: {exc.strerror or exc}", "point it at the CA's PEM file"
        ) from None


def _write_copies(folder: Path, copies: dict[str, bytes]) -> None:
    """The copies, atomically, in a folder only this user can enter (checked, not assumed)."""
    try:
        folder.mkdir(parents=True, mode=0o700, exist_ok=True)
        st = folder.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            raise KernelCacheConfigError(f"{folder} is not a folder of this user", f"remove {folder}")
        if stat.S_IMODE(st.st_mode) != 0o700:
            folder.chmod(0o700)
        for name, data in copies.items():
            target = folder / name
            with contextlib.suppress(OSError):
                if target.read_bytes() == data:
                    continue
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.chmod(tmp, 0o444)  # the image's user reads it; the folder keeps everyone else out
                os.replace(tmp, target)  # a running container sees the old file or the new one
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
    except OSError as exc:
        raise KernelCacheConfigError(
            f"cannot copy the kernel cache's files into {folder} ({exc.strerror or exc})",
            "make ~/.cache writable, or unset XPUKIT_KERNEL_CACHE",
        ) from None


def forwarding(environ: Mapping[str, str] | None = None, engine_api: str = "", write: bool = True) -> Forwarding | None:
    """What a container needs for the host's ``XPUKIT_KERNEL_CACHE``; None when it is unset.

    ``engine_api``: the engine's endpoint (a remote one cannot reach this host's loopback).
    ``write``: refresh the copies of the files (False for a dry run: it only prints).
    :class:`KernelCacheConfigError` (one line) for a bad URL or a key or password file the
    runtime would refuse."""
    environ = os.environ if environ is None else environ
    url = environ.get(cache_auth.URL_ENV, "").strip()
    if not url:
        return None
    target = cache_auth.parse_url(url)
    env = {cache_auth.URL_ENV: url}
    if environ.get(cache_auth.DEBUG_ENV):
        env[cache_auth.DEBUG_ENV] = environ[cache_auth.DEBUG_ENV]
    copies = {}
    for setting, name in FILES.items():
        path = environ.get(setting, "").strip()
        if path:
            copies[name] = _read(setting, path)
            env[setting] = f"{CONTAINER_SECRETS}/{name}"
    folder = secrets_folder(environ)
    if copies and write:
        _write_copies(folder, copies)
    # File by file: a mount of the folder would carry its mode 700 and keep the image's user out.
    volumes = {str(folder / name): {"bind": f"{CONTAINER_SECRETS}/{name}", "mode": "ro"} for name in copies}
    notes = []
    remote_engine = engine_api.startswith(("tcp://", "ssh://", "http://", "https://"))
    if target.loopback and remote_engine:
        notes.append(
            f"{cache_auth.URL_ENV} names {target.host}, but the engine at {engine_api} runs containers on "
            "another machine: they reach that machine's loopback, not this one's (name the cache's real address)"
        )
    return Forwarding(env, volumes, "host" if target.loopback else None, notes)
