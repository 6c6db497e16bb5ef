"""Build once, share by digest: the tasks' side of :mod:`xpukit.host.image.registry`.

An image is found, in this order: on the engine by its content tag; by the digest
``env/lock/images.toml`` records for that content tag; in the configured registry
(``--registry`` / ``XPUKIT_REGISTRY`` / invoke.yaml ``registry``) under the content tag. Only when
none has it does a task build. A registry that cannot be reached costs one warning, then the
local build.
"""

from __future__ import annotations

from pathlib import Path

from xpukit.errors import XpukitError
from xpukit.host import ui
from xpukit.host.engine import Engine
from xpukit.host.image import registry
from xpukit.host.image.build import CacheSource
from xpukit.host.image.plan import ImagePlan
from xpukit.host.settings import Context
from xpukit.host.versions import lock as lock_mod


def _tag_part(plan: ImagePlan) -> str:
    return plan.tag.rsplit(":", 1)[1]


def _pull_as(eng: Engine, entry: registry.LockedImage, plan: ImagePlan, auth: dict[str, str] | None) -> str:
    image = registry.pull(eng.client(), entry, auth)
    repo, tag = plan.tag.rsplit(":", 1)
    image.tag(repo, tag)
    ui.say(f"image: pulled {entry.reference} as {plan.tag} (built once, shared; no build)")
    return plan.tag


def shared_image(ctx: Context, plan: ImagePlan, lock_path: Path | None = None) -> str | None:
    """The plan's image from the lock's digest or the configured registry, pulled; None if nobody has it.
    The lock's entry is the one the plan read (``lock_path``: another lock file, read here)."""
    tag = _tag_part(plan)
    entry = plan.locked if lock_path is None else registry.locked_image(plan.profile.name, lock_path)
    try:
        auth = registry.credentials()
        if entry is not None and entry.same_content(tag):
            return _pull_as(ctx.engine, entry, plan, auth)
        if ctx.settings.registry:
            where = registry.Registry.parse(ctx.settings.registry)
            digest = registry.remote_digest(ctx.engine.client(), f"{where.repository()}:{tag}", auth, str(where))
            if digest:
                entry = registry.lock_entry(where, tag, digest, plan.profile.fingerprint(), plan.base)
                return _pull_as(ctx.engine, entry, plan, auth)
    except registry.RegistryError as exc:
        ui.warn(f"{exc.one_line()}; building locally instead")
    return None


def push(ctx: Context, plan: ImagePlan, lock_path: Path | None = None) -> str:
    """Push the plan's image to the configured registry and record its digest in the lock."""
    if not ctx.settings.registry:
        raise XpukitError("no registry configured", "pass --registry HOST:PORT/NAMESPACE or set XPUKIT_REGISTRY")
    where = registry.Registry.parse(ctx.settings.registry)
    tag = _tag_part(plan)
    registry.locked_image(plan.profile.name, lock_path)  # a broken lock fails here, before anything is pushed
    ui.say(f"push: {plan.tag} -> {where.repository()}:{tag}")
    sdk = ctx.engine.client()
    digest = registry.push(sdk, plan.tag, where, tag, registry.credentials())
    base_id = lock_mod.base_content_id(sdk, plan.base)
    entry = registry.lock_entry(where, tag, digest, plan.profile.fingerprint(), plan.base, base_id)
    written = registry.record_image(plan.profile.name, entry, lock_path)
    ui.say(f"push: {where.repository()}@{digest} recorded in {written.name}")
    return digest


def pull(ctx: Context, plan: ImagePlan, lock_path: Path | None = None) -> str:
    """Pull the digest the lock records for this profile (whatever the checkout's content tag)."""
    entry = registry.locked_image(plan.profile.name, lock_path)
    if entry is None:
        raise XpukitError(
            f"{(lock_path or registry.LOCK_PATH).name} records no {plan.profile.name} image",
            "run `invoke push` where the image was built, and commit env/lock/images.toml",
        )
    image = registry.pull(ctx.engine.client(), entry, registry.credentials())
    repo = plan.tag.rsplit(":", 1)[0]
    image.tag(repo, entry.tag)
    ui.say(f"pull: {entry.reference} as {repo}:{entry.tag}")
    if not entry.same_content(plan.tag):
        ui.warn(f"the lock's image ({entry.tag}) was built from other inputs than this checkout ({_tag_part(plan)})")
    return entry.digest


def cache_for(ctx: Context, content_tag: str, lock_path: Path | None = None) -> CacheSource:
    """What a build of ``content_tag`` shares through the registry, decided before its plan is made
    (:func:`xpukit.host.image.plan.make_plan`): BuildKit's inline cache written into the image (so a push
    shares it), and the last shared image's layers as a cache source (the lock's digest, else the
    configured registry's tag).

    podman builds have no inline cache: said in one line when a shared source exists, and skipped."""
    if ctx.engine.kind == "podman":
        if ctx.settings.registry or registry.locked_image(ctx.profile, lock_path):
            ui.say("build: a registry build cache is BuildKit-only; podman reuses only this machine's layers")
        return CacheSource()
    entry = registry.locked_image(ctx.profile, lock_path)
    if entry is not None:
        return CacheSource(True, entry.reference)
    if ctx.settings.registry:
        where = registry.Registry.parse(ctx.settings.registry)
        return CacheSource(True, f"{where.repository()}:{content_tag}")
    return CacheSource(True, "")
