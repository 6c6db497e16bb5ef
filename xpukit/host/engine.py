"""The container engine (Docker or podman, both through the docker SDK): which one, its client, and
what a task asks it.

:class:`Engine` is resolved once per task from the ``engine`` setting (``auto``: Docker where
``DOCKER_HOST`` is set or Docker's socket answers, else podman where it is installed). Docker
builds go through a docker CLI with BuildKit, podman builds through ``podman build``
(:mod:`xpukit.host.build_cli`); containers run through :mod:`xpukit.host.processes`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from xpukit.errors import XpukitError
from xpukit.host import podman as podman_mod
from xpukit.host import processes
from xpukit.host.build_cli import BuildCli, pick_cli, podman_cli

if TYPE_CHECKING:  # the SDK is imported where it is used: `invoke --list` must not need it
    from docker import DockerClient

START_ENGINE_FIX = "start one (`sudo systemctl start docker` or `sudo dockerd &`) or set DOCKER_HOST"
ENGINE_CHOICES = ("auto", "docker", "podman")
DOCKER_DEFAULT_SOCKET = "unix:///var/run/docker.sock"


class EngineError(XpukitError):
    """No engine answers, or it refused a request."""


# A ping answers at once or never: a hung socket is given up on quickly, the requests after it
# (pulls, pushes, container logs) keep the long timeout.
PING_TIMEOUT = 30


def client(docker_host: str = "", timeout: int = 600) -> DockerClient:
    """A docker SDK client that has answered (Docker's API, or podman's compatible one)."""
    return connect(docker_host, timeout)[0]


def connect(docker_host: str = "", timeout: int = 600) -> tuple[DockerClient, dict[str, Any]]:
    """A docker SDK client and the engine's ``/version`` answer, from one round trip: the answer
    proves the engine is up (no separate ping), names the API version to speak (the SDK's "auto"
    would ask again) and whether podman serves it (:func:`_components_name_podman`)."""
    try:
        import docker
        import docker.constants
    except ImportError:
        raise EngineError(
            "the docker SDK for Python is not installed",
            "pip install --require-hashes -r env/lock/host.txt",
        ) from None
    where = docker_host or os.environ.get("DOCKER_HOST", "") or DOCKER_DEFAULT_SOCKET
    try:
        probe = docker.APIClient(base_url=where, timeout=timeout, version=docker.constants.DEFAULT_DOCKER_API_VERSION)
        try:
            info = probe.version(api_version=False)
        finally:
            probe.close()
        # Given a version, the SDK asks nothing when it is made; the first request reuses nothing
        # of the probe but a unix socket's connect.
        sdk = docker.DockerClient(base_url=where, timeout=timeout, version=str(info["ApiVersion"]))
    except Exception as exc:
        raise EngineError(f"no Docker engine answers at {where} ({short_reason(exc, 60)})", START_ENGINE_FIX) from None
    return sdk, info


def short_reason(exc: BaseException, limit: int = 160) -> str:
    """The first line of an exception; the docker SDK nests whole urllib3 reprs, so the tail is cut."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    # "... (Caused by NewConnectionError(...: Failed to establish ...: [Errno 2] No such file...'))"
    # or "('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))": keep the OS's words.
    errno = re.search(r"\[Errno \d+\] ([^'\")]+)", first) or re.search(r"\w+Error\(\d+, '([^']+)'\)", first)
    if errno:
        first = errno.group(1).strip()
    return first if len(first) <= limit else first[: limit - 3] + "..."


def image_exists(sdk: DockerClient, reference: str) -> bool:
    import docker

    try:
        sdk.images.get(reference)
    except docker.errors.ImageNotFound:
        return False
    return True


def remove_volume(sdk: DockerClient, name: str) -> str:
    """Remove a named volume; say what happened."""
    import docker

    try:
        sdk.volumes.get(name).remove()
    except docker.errors.NotFound:
        return f"no volume {name}"
    return f"removed volume {name}"


def answers_at(endpoint: str) -> bool:
    """Whether an engine's API answers at ``endpoint``."""
    try:
        client(endpoint, timeout=5).close()
    except EngineError:
        return False
    return True


@dataclasses.dataclass
class Engine:
    """The engine a task uses, owned by its context (:class:`xpukit.host.settings.Context`): its
    kind, the API endpoint, the CLI that builds, and the one SDK client of the task, opened on
    first use and closed once at the task's end (:meth:`close`).

    A dry run asks the engine read-only questions where one answers (:meth:`connect_if_present`);
    where none does, the engine is *absent*: an explicit state (:attr:`present` False), in which
    the plan takes configured values and prints a plain command, never a client of ``None``."""

    kind: str  # docker | podman
    api: str = ""  # the Docker-compatible API endpoint; "" for podman: found or started on first use
    why: str = ""
    docker_cli: str = "auto"
    say: Callable[[str], None] = print
    _service: podman_mod.Service | None = dataclasses.field(default=None, repr=False)
    _client: DockerClient | None = dataclasses.field(default=None, repr=False)
    _version: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)  # the client's /version answer
    _absent: str = dataclasses.field(default="", repr=False)  # why no engine answers, once asked
    _closed: bool = dataclasses.field(default=False, repr=False)

    @property
    def cli_name(self) -> str:
        """The command a user types for this engine (dry-run lines)."""
        return self.kind

    @property
    def rootless(self) -> bool:
        return self.kind == "podman" and podman_mod.rootless()

    def endpoint(self) -> str:
        """The API endpoint; for podman with no running service, one is started for the task."""
        if self.api or self.kind == "docker":
            return self.api
        for candidate in podman_mod.socket_candidates(os.environ):
            if answers_at(candidate):
                self.api = candidate
                return candidate
        podman = podman_mod.find_podman()
        if podman is None:
            raise EngineError("podman is not installed", podman_mod.INSTALL_FIX)
        self._service = podman_mod.Service(podman, self.say)
        self._service.wait_ready(answers_at)
        self.api = self._service.endpoint
        return self.api

    # ---- the task's one SDK client

    def client(self) -> DockerClient:
        """The task's SDK client, opened (and pinged) on first use; raises :class:`EngineError`
        when no engine answers, every time it is asked (the reason is kept, not re-probed)."""
        if self._client is not None:
            return self._client
        if self._closed:
            raise EngineError("the task's engine client is already closed", "open a new task context")
        if self._absent:
            raise EngineError(self._absent, START_ENGINE_FIX)
        try:
            sdk, self._version = connect(self.endpoint(), timeout=PING_TIMEOUT)
        except XpukitError as exc:
            self._absent = exc.message
            raise
        sdk.api.timeout = 600  # pulls, pushes and long container runs
        self._client = sdk
        return sdk

    def connect_if_present(self) -> bool:
        """Open the client where an engine answers; False (the engine is absent) where none does.
        For podman this starts its API service for the task when none runs (stopped at exit)."""
        try:
            self.client()
        except XpukitError:
            return False
        return True

    @property
    def present(self) -> bool:
        """Whether the task has an open client (False before it was asked, and when absent)."""
        return self._client is not None

    @property
    def absent_reason(self) -> str:
        return self._absent

    def close(self) -> None:
        """Close the task's client, once (a second call does nothing)."""
        if self._client is not None:
            self._client.close()
        self._client = None
        self._closed = True

    def answers(self) -> tuple[bool, str]:
        if self.connect_if_present():
            return True, f"{self.kind} answers"
        return False, self._absent

    # ---- questions and runs through the client

    def image_exists(self, reference: str) -> bool:
        return image_exists(self.client(), reference)

    def run(self, image: str, command: list[str], options: Mapping[str, Any]) -> int:
        """Run a container with its output streamed (see :func:`xpukit.host.processes.run_container`); the equivalent
        CLI line is recorded like every command a task executes."""
        processes.record(shlex.join(processes.format_run_cli(self.cli_name, image, command, options)))
        return processes.run_container(self.client(), image, command, **options)

    def run_collecting(self, image: str, command: list[str], options: Mapping[str, Any]) -> tuple[int, str]:
        """Run a container to its end: (exit code, stdout); see :func:`xpukit.host.processes.run_collecting`."""
        try:
            sdk = self.client()
        except EngineError as exc:
            raise processes.ContainerUnavailable(exc.message) from None
        return processes.run_collecting(sdk, image, command, options)

    def version_line(self) -> tuple[bool, str]:
        """(answers, "Docker 20.10.24" / "podman 4.3.1" or why not): the doctor's engine line."""
        try:
            self.client()
            info = self._version or self.client().version()
        except XpukitError as exc:
            return False, exc.message
        except Exception as exc:
            return False, short_reason(exc)
        served_by = "podman" if _components_name_podman(info) else "Docker"
        return True, f"{served_by} {info.get('Version', '?')}"

    def builder_line(self) -> tuple[bool, str]:
        """(can build, what builds): BuildKit through a docker CLI, or podman (buildah)."""
        try:
            cli = self.build_cli()
        except XpukitError as exc:
            return False, exc.message
        if cli.kind == "podman":
            return True, f"podman builds ({cli.path} {cli.version}, buildah; no BuildKit needed)"
        how = "buildx plugin" if cli.via_buildx else "DOCKER_BUILDKIT=1"
        return True, f"BuildKit through {cli.path} {cli.version} ({how})"

    def build_cli(self) -> BuildCli:
        if self.kind == "podman":
            path = podman_mod.find_podman()
            if path is None:
                raise EngineError("podman is not installed", podman_mod.INSTALL_FIX)
            return podman_cli(path)
        return pick_cli(self.docker_cli)

    def build_env(self) -> dict[str, str]:
        """Environment for the build CLI, so it builds where the SDK looks."""
        if self.kind == "docker" and self.api:
            return {"DOCKER_HOST": self.api}
        return {}

    def run_options(self) -> dict[str, Any]:
        """Options every container of this engine needs: under a podman service the kit started,
        that service's own limits (see :func:`xpukit.host.podman.process_ulimits`)."""
        if self.kind == "podman":
            self.endpoint()
        return {"ulimits": self._service.ulimits()} if self._service is not None else {}


def _components_name_podman(version: Mapping[str, Any]) -> bool:
    return any("podman" in str(c.get("Name", "")).lower() for c in version.get("Components") or [])


def resolve_engine(
    setting: str,
    docker_host: str,
    docker_cli: str = "auto",
    say: Callable[[str], None] = print,
    which: Callable[[str], str | None] = shutil.which,
) -> Engine:
    """The engine for ``setting`` (auto | docker | podman), with the reason it was chosen."""
    if setting not in ENGINE_CHOICES:
        raise XpukitError(f"unknown engine {setting!r}", f"set XPUKIT_ENGINE to one of: {', '.join(ENGINE_CHOICES)}")
    if setting == "docker":
        return Engine("docker", docker_host, "XPUKIT_ENGINE=docker", docker_cli, say)
    if setting == "podman":
        # DOCKER_HOST may name podman's socket; otherwise the service is found or started.
        return Engine("podman", docker_host, "XPUKIT_ENGINE=podman", docker_cli, say)
    if docker_host:
        try:
            sdk, info = connect(docker_host, timeout=10)
        except EngineError:
            return Engine("docker", docker_host, "DOCKER_HOST is set", docker_cli, say)
        kind = "podman" if _components_name_podman(info) else "docker"
        sdk.api.timeout = 600
        # The client (and the answer) that told the kind is the task's: one round trip for both.
        why = f"DOCKER_HOST serves {kind}'s API"
        return Engine(kind, docker_host, why, docker_cli, say, _client=sdk, _version=info)
    try:
        sdk, info = connect(DOCKER_DEFAULT_SOCKET, timeout=5)
    except EngineError:
        pass
    else:
        sdk.api.timeout = 600
        # The client (and the answer) that found Docker's socket is the task's: one round trip, not two.
        return Engine("docker", "", "Docker's socket", docker_cli, say, _client=sdk, _version=info)
    if not which("podman"):
        return Engine("docker", "", "Docker's socket", docker_cli, say)
    return Engine("podman", "", "no Docker engine answers and podman is installed", docker_cli, say)
