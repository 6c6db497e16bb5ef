"""The image plan, computed once per task: profile pins, base, build args, content tag, BuildKit command.

The build, its dry run, `test`, `demo-ur`, `shell`, `compile` and `zebin-info` all take their tag
from one :class:`ImagePlan`, so a dry run prints the tag a real run uses. The plan is a value: the
checks that need no network come first (pins, lock files), then everything that adds to the build
(the engine's environment, the base, the shared cache) is decided before the plan is made, and
nothing edits it afterwards. The build command itself (the build CLI's probe, git for the labels)
is made from those when first asked: a run whose image is on the engine never asks.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from collections.abc import Callable

from xpukit import layout
from xpukit.errors import XpukitError
from xpukit.host import build_cli, engine, processes, ui
from xpukit.host.image import build as build_mod
from xpukit.host.image import buildlog, registry, trust
from xpukit.host.settings import Context
from xpukit.host.versions import lock as lock_mod
from xpukit.host.versions import pins as pins_mod


@dataclasses.dataclass(frozen=True)
class ImagePlan:
    profile: pins_mod.Profile
    base: str
    # the build, or what makes it when first asked (:attr:`build`)
    planned: build_mod.BuildPlan | Callable[[], build_mod.BuildPlan]
    ca_description: str
    base_missing: str = ""  # why the base is not on the engine (only a build needs it)
    # env/lock/images.toml's entry for the profile, read once when the plan is made (None: none shared)
    locked: registry.LockedImage | None = None
    tags: tuple[str, ...] = ()  # the content tag first (build_mod.content_tags); () = the build's

    @functools.cached_property
    def build(self) -> build_mod.BuildPlan:
        """The build command, made when first asked: a run whose image is on the engine never asks,
        so it probes no build CLI and runs no git (the labels'). Its tags are :attr:`tags`."""
        return self.planned if isinstance(self.planned, build_mod.BuildPlan) else self.planned()

    @property
    def tag(self) -> str:
        """The content tag: names exactly what the image was built from."""
        return (self.tags or self.build.tags)[0]


def load_profile(name: str) -> pins_mod.Profile:
    profile = pins_mod.load().profile(name)
    for message in profile.warnings:
        ui.warn(message)
    return profile


def _base(
    ctx: Context, profile: pins_mod.Profile, locked: registry.LockedImage | None, required: bool = True
) -> tuple[str, str]:
    """(the base a build uses, why it is missing or ""): asking the engine (pulling only in a real
    run that needs it), or as configured where none is present (a dry run without an engine).
    ``required`` False: a run that only needs the base's name for the content tag; a missing base
    is reported when a build is really needed. ``locked``: the lock's image entry (its base names
    the shared image's)."""
    requested = ctx.settings.base_image
    eng = ctx.engine
    if not eng.present:
        return requested or profile.base_reference, ""
    pull = None
    if not (ctx.dry_run or not required):
        pull = functools.partial(build_mod.pull_with_progress, eng.client(), say=ui.say)
    try:
        return build_mod.choose_base(profile, requested, eng.image_exists, pull, ui.say), ""
    except XpukitError as exc:
        if required and not ctx.dry_run:
            raise
        shared = "" if requested or locked is None else locked.base
        if shared:
            # The tag hashes the base's name: take the one the shared image was built from,
            # so this engine finds (and pulls) that image instead of building another.
            ui.say(f"base: {shared} is not here; the content tag uses it, as the shared image did")
        elif ctx.dry_run:
            ui.say(f"base: {requested or profile.base_reference} is not present; a real build would try to pull it")
        return requested or shared or profile.base_reference, exc.one_line()


def make_plan(
    ctx: Context,
    variant: build_mod.Variant | None = None,
    github_token: str = "",
    base_required: bool = True,
    cache: Callable[[str], build_mod.CacheSource] | None = None,
) -> ImagePlan:
    """The plan for the context's profile, on the context's engine.

    First what needs no network: the pins (read and checked) and the lock files against them, in
    dry runs too. Then the engine: a real run needs one (its absence is an error); a dry run asks
    one where it answers and otherwise plans with the configured names. ``base_required`` False:
    the base may be absent (a run that may find the image shared). ``cache``: given the content
    tag, what the build shares through a registry (:func:`xpukit.host.image.sharing.cache_for`)."""
    profile = load_profile(ctx.profile)
    build_mod.ensure_lock_current(profile, layout.REPO_ROOT)
    profile = build_mod.with_base(profile, (variant or build_mod.Variant()).base)
    locked = registry.locked_image(profile.name)  # the plan's one reading of the lock's image entry
    if ctx.dry_run:
        ctx.engine.connect_if_present()
    else:
        ctx.engine.client()
    base, base_missing = _base(ctx, profile, locked, base_required)
    variant = dataclasses.replace(variant or build_mod.Variant(), layer=ctx.settings.layer)
    settings, eng, dry_run = ctx.settings, ctx.engine, ctx.dry_run  # as they are now, for the build
    tags = build_mod.content_tags(layout.REPO_ROOT, profile, base, settings.image, variant, settings.ocloc_mirror)
    progress = "plain" if (os.environ.get("CI") or not sys.stdout.isatty()) else "auto"
    ca = trust.ca_bundle(ctx)

    def build() -> build_mod.BuildPlan:
        try:
            cli: build_cli.BuildCli | None = eng.build_cli()
        except XpukitError:
            if not dry_run:
                raise
            cli = None  # a dry run still prints the plan, with a plain `docker`
        return build_mod.plan(
            layout.REPO_ROOT,
            profile,
            base,
            settings.image,
            cli,
            ca.path,
            github_token,
            variant,
            progress,
            settings.build_network,
            engine_env=eng.build_env(),  # the CLI must build on the engine the SDK talks to
            cache=cache,
            ocloc_mirror=settings.ocloc_mirror,
            tags=tags,
        )

    return ImagePlan(profile, base, build, ca.describe().removeprefix("ca-bundle: "), base_missing, locked, tags)


def run_build(plan: ImagePlan) -> str:
    """Run the plan's build command as it is; on failure say what the log shows, in one line."""
    ui.say(f"building {', '.join(plan.build.tags)}")
    if plan.build.reproducible:
        ui.say(plan.build.reproducible)
    code, tail = processes.stream_keeping_tail(plan.build.command, plan.build.env)
    if code != 0:
        found = buildlog.diagnose(tail, plan.ca_description)
        if found:
            raise XpukitError(f"the image build failed: {found.cause} ({found.evidence}); log above", found.fix)
        raise XpukitError(f"the image build failed (exit {code}); its log is above", "fix the failing step and rerun")
    return plan.tag


def check_base(plan: ImagePlan, eng: engine.Engine) -> None:
    """A pinned base (with its digest) whose tag moved upstream is refused before a build."""
    sdk = eng.client()
    if plan.base == plan.profile.base_reference:
        lock_mod.check_base_not_moved(plan.profile, lambda ref: sdk.images.get_registry_data(ref).id)
    entry = plan.locked
    if entry is None or entry.base != plan.base:
        return
    if not entry.base_id:
        ui.say(f"base: the lock's {plan.profile.name} image records no base content (an older push); not compared")
        return
    note = lock_mod.base_difference(plan.base, entry.base_id, lock_mod.base_content_id(sdk, plan.base))
    if note:
        ui.warn(note)


def print_build_if_missing(ctx: Context, plan: ImagePlan) -> None:
    """A dry run's share of :func:`ensure_image`: print the build command the real run would run
    first, where the engine answers and lacks the image and the lock shares no image of this
    content tag (a configured registry is asked only by the real run, which then may pull instead)."""
    eng = ctx.engine
    if not eng.present or plan.base_missing or eng.image_exists(plan.tag):
        return
    entry = plan.locked
    if entry is not None and entry.same_content(plan.tag):
        return  # the real run pulls the shared image by its digest
    print(plan.build.printable())


def ensure_image(plan: ImagePlan, eng: engine.Engine, shared: Callable[[], str | None] | None = None) -> str:
    """The plan's content tag: on the engine, else from ``shared`` (a teammate's push, pulled by
    digest), else built here."""
    if eng.image_exists(plan.tag):
        return plan.tag
    if shared is not None:
        found = shared()
        if found:
            return found
    check_base(plan, eng)
    if plan.base_missing:
        raise XpukitError(
            f"image {plan.tag} is neither here nor shared, and building it needs the base: {plan.base_missing}",
            "build a local base with `invoke base`, or pull the image a teammate pushed (invoke pull)",
        )
    ui.say(f"image {plan.tag} is missing; building it")
    return run_build(plan)
