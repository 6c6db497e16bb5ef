"""How the kit runs things in its image: one set of container options for every task."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xpukit import layout
from xpukit.host import gpu, ui
from xpukit.host.run import shared_cache
from xpukit.host.settings import Context

if TYPE_CHECKING:  # the SDK is imported where it is used: `invoke --list` must not need it
    from docker import DockerClient

WORKSPACE = layout.WORKSPACE  # where the checkout is mounted (read-only) in the container
CACHE_MOUNT = layout.CACHE


def container_options(
    ctx: Context,
    extra_env: dict[str, str] | None = None,
    mounts: dict[str, str] | None = None,
    as_caller: bool = False,
) -> dict[str, Any]:
    """docker SDK run options: the checkout read-only, the Triton cache volume, GPU access (xpu),
    and the host's shared kernel cache (``XPUKIT_KERNEL_CACHE``, :func:`kernel_cache_options`).

    ``mounts``: more host paths, mounted at the same path with the given mode. ``as_caller``: run as
    the calling user, so files written to the host belong to them, not to the image's user.
    """
    options: dict[str, Any] = {
        "volumes": {
            str(layout.REPO_ROOT): {"bind": WORKSPACE, "mode": "ro"},
            ctx.settings.cache_volume: {"bind": CACHE_MOUNT, "mode": "rw"},
        },
        "working_dir": WORKSPACE,
        "environment": {**layout.CONTAINER_ENV, **(extra_env or {})},
        # A dry run asks the engine too (podman: a service for the task), so it prints the real line.
        **ctx.engine.run_options(),
    }
    for host_path, mode in (mounts or {}).items():
        options["volumes"][host_path] = {"bind": host_path, "mode": mode}
    if as_caller:
        options["user"] = f"{os.getuid()}:{os.getgid()}"
        options["environment"].update(layout.NO_HOME_ENV)  # the image has no home for an arbitrary uid
    cache = kernel_cache_options(ctx)
    if cache is not None:
        cache.apply(options)
    if ctx.profile == "xpu":
        found = gpu_options(ctx)
        for note in found.notes:
            ui.say(f"gpu: {note}")
        for key, value in found.docker_kwargs().items():
            if key == "volumes":
                options["volumes"].update(value)
            else:
                options[key] = value
    return options


def bytecode_cache(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the checkout's bytecode kept on the cache volume (``PYTHONPYCACHEPREFIX``)
    instead of written nowhere: the checkout is mounted read-only, so without it every run compiles
    the kit's modules from source again. One folder per checkout (its host path's hash), since
    Python checks a .pyc against its source's mtime and size, not its content."""
    import hashlib

    where = hashlib.sha256(str(layout.REPO_ROOT).encode()).hexdigest()[:12]
    env = options["environment"]
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = f"{layout.KIT_CACHE}/pycache/{where}"
    return options


def without_network(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with no network (``--network none``) for a container that needs none: the engine
    wires up no bridge for it (on Docker about 70 ms of every container's start). Left as it is where
    a network was asked for, or a shared kernel cache (XPUKIT_KERNEL_CACHE) may be reached over one."""
    if "network_mode" not in options and shared_cache.cache_auth.URL_ENV not in options["environment"]:
        options["network_mode"] = "none"
    return options


def kernel_cache_options(ctx: Context) -> shared_cache.Forwarding | None:
    """The host's XPUKIT_KERNEL_CACHE for a container (variables, read-only files, network), or
    None when unset: every task's container and the devcontainer take it from here."""
    api = ctx.engine.api if ctx.engine.kind == "docker" else ""
    found = shared_cache.forwarding(ctx.environ, api, write=not ctx.dry_run)
    for note in found.notes if found is not None else []:
        ui.warn(note)
    return found


def gpu_options(ctx: Context) -> gpu.GpuRunOptions:
    """The host's GPU passthrough in the engine's terms: `invoke shell`, the tests and the
    devcontainer all take it from here."""
    return gpu.gpu_run_options().for_engine(ctx.engine.kind, ctx.engine.rootless)


def container_path(path: str | os.PathLike[str]) -> str:
    """Where a host path appears in the container: under /workspace when inside the checkout."""
    resolved = os.path.realpath(path)
    try:
        relative = os.path.relpath(resolved, layout.REPO_ROOT)
    except ValueError:
        return resolved
    return resolved if relative.startswith("..") else f"{WORKSPACE}/{relative}".removesuffix("/.")


# ---------------------------------------------------------------- containers that must not outlive their invoke

# `kernel-report --watch` runs until stopped. Its container carries this label, valued with the
# invoke that started it (host, pid, the pid's start time); the next watch's start removes those
# whose invoke is gone (killed by SIGKILL, say, before it could remove its container).
WATCH_LABEL = "io.xpukit.watch"


def _process_start(pid: int) -> str:
    """The process's start time in clock ticks since boot (/proc/PID/stat's 22nd field), "" where
    /proc does not say: with the pid it names one process, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rpartition(")")[2].split()  # the command name, in parentheses, may hold spaces
    return fields[19] if len(fields) > 19 else ""


def watch_owner() -> str:
    """This process as the owner of a watch container: "host:pid:start"."""
    return f"{socket.gethostname()}:{os.getpid()}:{_process_start(os.getpid())}"


def owner_alive(owner: str) -> bool:
    """Whether the invoke a label names still runs. Another host's, or a label this code cannot
    read, counts as alive: only a watch known to be orphaned is removed."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return True
    pid_text, start = parts[1], parts[2]
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    now = _process_start(pid)
    return not start or not now or now == start


def sweep_watch_containers(sdk: DockerClient) -> list[str]:
    """Remove the watch containers (running or stopped) whose invoke is gone; their names."""
    import docker

    removed: list[str] = []
    for container in sdk.containers.list(all=True, filters={"label": WATCH_LABEL}):
        if owner_alive((container.labels or {}).get(WATCH_LABEL, "")):
            continue
        with contextlib.suppress(docker.errors.NotFound):  # removed meanwhile (by its own clean-up)
            container.remove(force=True)
            removed.append(container.name or container.id or "")
    return removed


def watch_labels() -> dict[str, str]:
    """The labels of a watch container: :data:`WATCH_LABEL` naming this invoke."""
    return {WATCH_LABEL: watch_owner()}


@contextlib.contextmanager
def lifeline() -> Iterator[dict[str, str]]:
    """A socket listening on 127.0.0.1 while the block runs; yields the environment that tells the
    watch where (``XPUKIT_WATCH_LIFELINE``). The watch connects and stops when the connection ends:
    the kernel ends it when this process dies, by any signal, SIGKILL too, so the watch and its
    container never outlive the invoke. The connection is never accepted: the backlog holds it."""
    from xpukit.runtime.kernels.watch_server import LIFELINE_ENV

    with socket.create_server(("127.0.0.1", 0), backlog=4) as listener:
        yield {LIFELINE_ENV: f"127.0.0.1:{listener.getsockname()[1]}"}


class _Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C's KeyboardInterrupt is."""


@contextlib.contextmanager
def signals_stop_like_ctrl_c() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal) raise KeyboardInterrupt in the main thread while the
    block runs, so the task stops its container on Ctrl-C's path instead of dying with it running."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise _Stopped(signal.Signals(signum).name)

    before = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
