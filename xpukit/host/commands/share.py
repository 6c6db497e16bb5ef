"""Task bodies for sharing the image: push and pull by digest (registry), archives (export) and the
editors' devcontainer."""

from __future__ import annotations

from pathlib import Path

from xpukit import layout
from xpukit.errors import UsageError
from xpukit.host import ui
from xpukit.host.commands.boundary import guarded
from xpukit.host.image import registry, sharing
from xpukit.host.image.plan import make_plan
from xpukit.host.run import containers
from xpukit.host.run.in_image import plan_for_run
from xpukit.host.settings import Context


@guarded
def push(ctx: Context) -> int:
    """Push the profile's image (built when missing) and record its digest in env/lock/images.toml."""
    plan = plan_for_run(ctx)
    if ctx.dry_run:
        print(f"would push {plan.tag} to {ctx.settings.registry or '(no registry configured)'}")
        return 0
    sharing.push(ctx, plan)
    return 0


@guarded
def pull(ctx: Context) -> int:
    """Pull the digest env/lock/images.toml records for the profile, checked."""
    if ctx.dry_run:
        print(f"would pull the {ctx.profile} digest recorded in {registry.LOCK_PATH.name}")
        return 0
    sharing.pull(ctx, make_plan(ctx, base_required=False))
    return 0


@guarded
def export(ctx: Context, fmt: str, out: str) -> int:
    """The profile's image as an oci-archive or docker-archive file, with its manifest alongside."""
    from xpukit.host.image import export as export_mod

    if fmt not in export_mod.FORMATS:
        raise UsageError(f"unknown --format {fmt!r}", f"use one of: {', '.join(export_mod.FORMATS)}")
    plan = plan_for_run(ctx)
    if ctx.dry_run:
        print(f"would write {plan.tag} as {fmt} to {Path(out).absolute()}")
        return 0
    export_mod.export_image(ctx.engine.client(), plan.tag, fmt, Path(out), ctx.engine.api, ui.say, ctx.engine.kind)
    return 0


@guarded
def devcontainer(ctx: Context, out: str = ".devcontainer/devcontainer.json") -> int:
    """Write the devcontainer for the profile: the recorded digest (else the profile's tag), the
    cache volume, and on an Intel GPU host the GPU options `invoke shell` uses."""
    from xpukit.host.run import devcontainer as devcontainer_mod

    entry = registry.locked_image(ctx.profile)
    image = entry.reference if entry else f"{ctx.settings.image}:{ctx.profile}"
    gpu_options = containers.gpu_options(ctx) if ctx.profile == "xpu" else None  # the shell's, exactly
    cache = containers.kernel_cache_options(ctx)  # XPUKIT_KERNEL_CACHE as every task's container gets it
    content = devcontainer_mod.config(image, ctx.profile, ctx.settings.cache_volume, gpu_options, cache)
    path = Path(out) if Path(out).is_absolute() else layout.REPO_ROOT / out
    if ctx.dry_run:
        print(devcontainer_mod.render(content), end="")
        return 0
    changed = devcontainer_mod.write(path, content)
    ui.say(f"devcontainer: {path} {'written' if changed else 'unchanged'} (image {image})")
    return 0
