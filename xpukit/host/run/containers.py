"""How the kit runs things in its image: one set of container options for every task."""

from __future__ import annotations

import os
from typing import Any

from xpukit import layout
from xpukit.host import gpu, ui
from xpukit.host.settings import Context
from xpukit.host.share import shared_cache
from xpukit.host.versions import pins as pins_mod

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
            str(pins_mod.REPO_ROOT): {"bind": WORKSPACE, "mode": "ro"},
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
        relative = os.path.relpath(resolved, pins_mod.REPO_ROOT)
    except ValueError:
        return resolved
    return resolved if relative.startswith("..") else f"{WORKSPACE}/{relative}".removesuffix("/.")
