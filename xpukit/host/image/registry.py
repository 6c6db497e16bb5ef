"""Share the kit's image through an OCI registry: push it, record its digest, pull it by digest.

``env/lock/images.toml`` records, per profile, what was pushed: registry, repository, tag, digest
and the pins fingerprint that built it. It is written only after the registry confirmed the digest
(read back through the distribution API), atomically, so an interrupted or failed push never leaves
a half-updated lock, and the local name of the pushed image is removed again when a push fails.

Credentials: ``XPUKIT_REGISTRY_USER`` with ``XPUKIT_REGISTRY_PASSWORD_FILE`` (a file, never the
password itself in the environment), else whatever ``docker login`` stored (the docker SDK reads
its config). They never reach a log line, an error or a dry run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import re
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xpukit import layout
from xpukit.errors import XpukitError

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.images import Image

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
# HOST[:PORT]/NAMESPACE: a host is recognisably one (a dot, a port or localhost), as Docker decides.
_HOST = r"localhost(:\d+)?|[A-Za-z0-9.-]+\.[A-Za-z0-9-]+(:\d+)?|[A-Za-z0-9.-]+:\d+|\[[0-9a-fA-F:]+\]:\d+"
_REGISTRY_RE = re.compile(rf"^(?P<host>{_HOST})(/(?P<namespace>[a-z0-9]+([._/-][a-z0-9]+)*))?$")
# Where the kit records what it pushed (profile -> entry), committed so teammates pull by digest.
LOCK_PATH = layout.REPO_ROOT / "env" / "lock" / "images.toml"


class RegistryError(XpukitError):
    """A registry refused, failed or could not be reached."""


@dataclasses.dataclass(frozen=True)
class LockedImage:
    """One profile's entry of env/lock/images.toml, checked when it is read (:func:`read_lock`): the
    image `invoke push` recorded, by digest."""

    registry: str  # HOST[:PORT]/NAMESPACE it was pushed to
    repository: str
    tag: str  # the content tag's tag part (the inputs that built it)
    digest: str  # sha256:<64 hex>, as the registry confirmed it
    pins: str  # the pins fingerprint that built it
    base: str  # the base image it was built FROM, by name (the content tag hashes it)
    pushed: str  # when, ISO 8601 UTC
    # The base by content (its image ID, or its registry digest when pulled by one); "" where a lock
    # from before it was recorded lacks it: unknown, never guessed.
    base_id: str = ""

    @property
    def reference(self) -> str:
        """``repository@digest``: what a pull or a cluster node fetches."""
        return f"{self.repository}@{self.digest}"

    def same_content(self, image_tag: str) -> bool:
        """Whether this is the image ``image_tag`` (``name:tag``, or the tag part alone) names: built
        from the same inputs."""
        return self.tag == image_tag.rpartition(":")[2]


LOCK_KEYS = tuple(f.name for f in dataclasses.fields(LockedImage) if f.name != "base_id")
OPTIONAL_LOCK_KEYS = ("base_id",)


@dataclasses.dataclass(frozen=True)
class Registry:
    """Where images go: ``HOST[:PORT]/NAMESPACE`` (``--registry``, ``XPUKIT_REGISTRY``, invoke.yaml)."""

    host: str
    namespace: str

    @classmethod
    def parse(cls, text: str) -> Registry:
        m = _REGISTRY_RE.match(text.strip())
        if not m:
            raise RegistryError(
                f"registry {text!r} is not HOST[:PORT]/NAMESPACE",
                "pass e.g. --registry 127.0.0.1:5000/team or registry.example.com/xpukit",
            )
        return cls(m.group("host"), m.group("namespace") or "")

    def repository(self, image: str = "xpukit") -> str:
        return "/".join(p for p in (self.host, self.namespace, image) if p)

    def __str__(self) -> str:
        return f"{self.host}/{self.namespace}" if self.namespace else self.host


def credentials(env: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """The auth config for the SDK from XPUKIT_REGISTRY_USER + XPUKIT_REGISTRY_PASSWORD_FILE, or
    None (the SDK then uses what ``docker login`` stored)."""
    env = os.environ if env is None else env
    user, path = env.get("XPUKIT_REGISTRY_USER", ""), env.get("XPUKIT_REGISTRY_PASSWORD_FILE", "")
    if not user and not path:
        return None
    if not user or not path:
        raise RegistryError(
            "XPUKIT_REGISTRY_USER and XPUKIT_REGISTRY_PASSWORD_FILE go together",
            "set both, or neither to use `docker login`'s stored credentials",
        )
    try:
        password = Path(path).read_text().strip()
    except OSError as exc:
        raise RegistryError(
            f"cannot read XPUKIT_REGISTRY_PASSWORD_FILE {path}: {exc.strerror}", "point it at a readable file"
        ) from None
    if not password:
        raise RegistryError(f"XPUKIT_REGISTRY_PASSWORD_FILE {path} is empty", "write the password into it")
    return {"username": user, "password": password}


def explain(message: str, registry: str, reference: str = "") -> RegistryError:
    """One line with its fix for what a registry or the engine said."""
    low = message.lower()
    what = reference or registry
    if any(s in low for s in ("unauthorized", "authentication required", "denied", "incorrect username")):
        return RegistryError(
            f"registry {registry} refused the credentials",
            f"run `docker login {registry}`, or set XPUKIT_REGISTRY_USER and XPUKIT_REGISTRY_PASSWORD_FILE",
        )
    if any(s in low for s in ("connection refused", "no such host", "dial tcp", "i/o timeout", "timeout", "eof")):
        return RegistryError(
            f"registry {registry} is unreachable", "start it, or check --registry / XPUKIT_REGISTRY and the network"
        )
    if any(s in low for s in ("no space left", "disk quota", "insufficient storage", "507")):
        return RegistryError(f"registry {registry} is full", "free space there (or garbage-collect it) and push again")
    if any(s in low for s in ("read-only", "readonly", "read only", "405", "method not allowed")):
        return RegistryError(
            f"registry {registry} is read-only", "push to a writable registry, or lift its read-only mode"
        )
    if any(s in low for s in ("manifest unknown", "not found", "name unknown")):
        return RegistryError(
            f"{what} is not in registry {registry}", "push it first (`invoke push` where it was built)"
        )
    first = message.strip().splitlines()[0] if message.strip() else "no reason given"
    return RegistryError(f"registry {registry}: {first[:150]}", "check the registry's log")


# --- the lock file -------------------------------------------------------------------------------


def read_lock(path: Path) -> dict[str, LockedImage]:
    """Profile -> entry; an absent file is an empty lock. Every entry is checked."""
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise RegistryError(f"{path} is not readable TOML ({exc})", f"restore it from git or delete {path}") from None
    out: dict[str, LockedImage] = {}
    for profile, entry in data.items():
        if (
            not isinstance(entry, dict)
            or not set(LOCK_KEYS) <= set(entry) <= set(LOCK_KEYS) | set(OPTIONAL_LOCK_KEYS)
            or not all(isinstance(v, str) for v in entry.values())
        ):
            raise RegistryError(
                f"{path}: [{profile}] must have exactly the string keys {', '.join(LOCK_KEYS)}",
                "restore it from git, or push again to rewrite it",
            )
        if not DIGEST_RE.match(entry["digest"]):
            raise RegistryError(f"{path}: [{profile}] digest {entry['digest']!r} is not sha256:<64 hex>", "push again")
        out[profile] = LockedImage(**entry)
    return out


def locked_image(profile: str, path: Path | None = None) -> LockedImage | None:
    """The image env/lock/images.toml records for ``profile`` (None when it records none): the one way
    the kit reads the lock's image entry, with one policy. A broken lock is an error wherever it is
    read (RegistryError: the file and the fix), so no task quietly skips a shared image it cannot read.
    ``path``: another lock file (tests); by default LOCK_PATH, read when called."""
    return read_lock(path or LOCK_PATH).get(profile)


def record_image(profile: str, entry: LockedImage, path: Path | None = None) -> Path:
    """Record ``entry`` as ``profile``'s image in the lock (the others kept); returns the lock's path."""
    path = path or LOCK_PATH
    entries = read_lock(path)
    entries[profile] = entry
    write_lock(path, entries)
    return path


def write_lock(path: Path, entries: Mapping[str, LockedImage]) -> None:
    """Write the whole lock atomically (a reader sees the old file or the new one)."""
    lines = [
        "# Written by `invoke push`: what each profile's image is in the shared registry.",
        "# `invoke pull` fetches these digests; edit by pushing again, not by hand.",
    ]
    for profile in sorted(entries):
        lines += ["", f"[{profile}]"]
        # JSON strings are valid TOML basic strings for these ASCII values.
        values = dataclasses.asdict(entries[profile])
        keys = [*LOCK_KEYS, *(k for k in OPTIONAL_LOCK_KEYS if values[k])]
        lines += [f"{key} = {json.dumps(values[key])}" for key in keys]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- push, pull, ask -----------------------------------------------------------------------------


def _stream_errors(
    lines: Iterable[dict[str, Any]], progress: Callable[[dict[str, Any]], None] | None
) -> tuple[str, str]:
    """(digest the engine reported, first error message) from a push stream."""
    digest, error = "", ""
    for line in lines:
        if progress is not None:
            progress(line)
        if "error" in line or "errorDetail" in line:
            error = error or str(line.get("error") or line.get("errorDetail", {}).get("message", ""))
        aux = line.get("aux") or {}
        if isinstance(aux, dict) and aux.get("Digest"):
            digest = str(aux["Digest"])
    return digest, error


def remote_digest(sdk: DockerClient, reference: str, auth: dict[str, str] | None, registry: str) -> str | None:
    """The digest ``reference`` has in its registry now, None if it is not there."""
    import docker.errors

    try:
        return str(sdk.images.get_registry_data(reference, auth_config=auth).id)
    except docker.errors.NotFound:
        return None
    except docker.errors.APIError as exc:
        err = explain(str(exc.explanation or exc), registry, reference)
        if "is not in registry" in err.message:
            return None
        raise err from None


def push(
    sdk: DockerClient,
    local: str,
    registry: Registry,
    tag: str,
    auth: dict[str, str] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> str:
    """Push the local image ``local`` as ``<registry>/xpukit:<tag>``; returns the digest the
    registry confirmed. The remote-named local tag is removed again if anything fails."""
    import docker.errors

    repository = registry.repository()
    remote = f"{repository}:{tag}"
    try:
        image = sdk.images.get(local)
    except docker.errors.ImageNotFound:
        raise RegistryError(f"image {local} does not exist on this engine", "build it first: invoke build") from None
    image.tag(repository, tag)
    ok = False
    try:
        try:
            lines = sdk.api.push(repository, tag=tag, stream=True, decode=True, auth_config=auth)
            digest, error = _stream_errors(lines, progress)
        except docker.errors.APIError as exc:
            raise explain(str(exc.explanation or exc), str(registry), remote) from None
        except OSError as exc:  # the engine's connection broke
            raise explain(str(exc), str(registry), remote) from None
        if error:
            raise explain(error, str(registry), remote)
        confirmed = remote_digest(sdk, remote, auth, str(registry))
        if not digest or confirmed != digest:
            raise RegistryError(
                f"registry {registry} reports {confirmed or 'nothing'} for {remote}; "
                f"the push reported {digest or 'nothing'}",
                "push again; if it persists, check that nobody else pushes the same tag",
            )
        ok = True
        return digest
    finally:
        if not ok:
            with contextlib.suppress(docker.errors.APIError):
                sdk.images.remove(remote, noprune=True)


def lock_entry(registry: Registry, tag: str, digest: str, pins: str, base: str = "", base_id: str = "") -> LockedImage:
    """``base``: the base image the pushed image was built FROM; an engine that lacks it still
    computes the same content tag from it (xpukit.host.image.plan). ``base_id``: that base's content
    (xpukit.host.versions.lock.base_content_id), so a build on another base says so before building."""
    pushed = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    return LockedImage(str(registry), registry.repository(), tag, digest, pins, base, pushed, base_id)


def pull(sdk: DockerClient, entry: LockedImage, auth: dict[str, str] | None = None) -> Image:
    """Pull ``repository@digest`` from a lock entry and check the engine got exactly that digest."""
    import docker.errors

    reference = entry.reference
    try:
        image = sdk.images.pull(entry.repository, tag=entry.digest, auth_config=auth)
    except docker.errors.APIError as exc:
        raise explain(str(exc.explanation or exc), entry.registry, reference) from None
    if reference not in (image.attrs.get("RepoDigests") or []):
        raise RegistryError(
            f"{reference} pulled as {str(image.id)[:19]} without that digest (it has {image.attrs.get('RepoDigests')})",
            "the registry served other content: do not use it; push again from a trusted build",
        )
    return image
