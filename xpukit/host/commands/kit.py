"""What each invoke task does. tasks.py only parses options and calls these with a :class:`Context`.

Modules only some tasks need (doctor, report cache, export, devcontainer, docs tables) are imported
inside those tasks: every task starts by importing this module, and `invoke demo-ur` should not pay
for the doctor's.

Every command returns an exit code. ``guarded`` (boundary.py) turns the kit's errors into one line on stderr
and a non-zero exit (a traceback only with --debug), and Ctrl-C into one line and exit 130.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shlex
import sys
from pathlib import Path

from xpukit import layout
from xpukit.errors import UsageError, XpukitError
from xpukit.host import engine, processes, ui
from xpukit.host.commands.boundary import guarded
from xpukit.host.image import base as base_mod
from xpukit.host.image import build as build_mod
from xpukit.host.image import sharing
from xpukit.host.image.build import Variant  # the options tasks.py builds for build()
from xpukit.host.image.plan import check_base, load_profile, make_plan, run_build
from xpukit.host.run import containers, testing
from xpukit.host.run.in_image import plan_for_run, require_host_runtime, resolve_where, run_in_image
from xpukit.host.settings import Context, check_choice
from xpukit.host.versions import lock as lock_mod
from xpukit.host.versions import pins as pins_mod

# ---------------------------------------------------------------- build


@guarded
def build(ctx: Context, variant: Variant, github_token: str = "", rebuild: bool = False) -> int:
    """Build the profile's image, unless a teammate already shared it (``rebuild`` builds anyway)."""
    if github_token and not Path(github_token).is_file():
        raise UsageError(f"GitHub token file {github_token} does not exist", "pass a file holding the token")
    cache = functools.partial(sharing.cache_for, ctx)
    if ctx.dry_run:
        whole = make_plan(ctx, variant, github_token, cache=cache)
        planned = whole.build
        for message in planned.warnings:
            if message not in whole.profile.warnings:  # those were printed when the pins were read
                ui.warn(message)
        for line in planned.pins:
            print(line)
        print(planned.printable())
        return 0
    ctx.engine.build_cli()  # no BuildKit (or no podman), no build: say so before anything else
    plan = make_plan(ctx, variant, github_token, cache=cache)
    for message in plan.build.warnings:
        if message not in plan.profile.warnings:
            ui.warn(message)
    for line in plan.build.pins:
        ui.say(line)
    if not rebuild and not variant.triton and sharing.shared_image(ctx, plan):
        return 0
    check_base(plan, ctx.engine)
    if plan.build.cache.source:
        ui.say(f"build: layers from {plan.build.cache.source} are reused where they match (BuildKit inline cache)")
    if ctx.engine.kind == "podman" and plan.profile.name == "xpu":
        ui.say("build: podman builds the Triton and PyTorch stages one after the other, not in parallel")
    run_build(plan)
    return 0


# ---------------------------------------------------------------- base, pins, clean


@guarded
def base(ctx: Context, reproducible: bool = False, debootstrap: bool = False) -> int:
    """The cpu profile's Debian base (the xpu profile's base is Intel's image, pulled): mmdebstrap's
    reproducible one where it is installed, else debootstrap's (base_mod.choose_reproducible)."""
    profile = load_profile("cpu")
    tag = build_mod.local_base_name(profile)
    if ctx.dry_run:
        custom_cli = ctx.engine.kind == "docker" and ctx.settings.docker_cli != "auto"
        cli = ctx.settings.docker_cli if custom_cli else ctx.engine.cli_name
    else:
        ctx.engine.client()  # no engine, no base: said before debootstrap runs
        cli = ctx.engine.build_cli().path
    s = ctx.settings
    epoch = "" if debootstrap else build_mod.source_date(layout.REPO_ROOT).epoch
    use_mmdebstrap, why_not = base_mod.choose_reproducible(reproducible, debootstrap, epoch)
    if why_not:
        ui.say(why_not)
    if use_mmdebstrap:
        return base_mod.build_reproducible_base(s.base_suite, s.base_mirror, tag, cli, epoch, ctx.dry_run, ui.say)
    return base_mod.build_base(s.base_suite, s.base_mirror, tag, cli, ctx.dry_run, ui.say)


@guarded
def pins(ctx: Context, profile: str = "", lock: bool = False, check: bool = False) -> int:
    """Show every profile's pins (or one: --profile), warnings and lock status."""
    loaded = pins_mod.load()
    if lock:
        registry = None
        if not ctx.dry_run:
            try:
                sdk = ctx.engine.client()
                registry = lambda ref: sdk.images.get_registry_data(ref).id  # noqa: E731
            except XpukitError as exc:
                ui.warn(f"{exc.message}; digests cannot be looked up and stay empty")
        return lock_mod.lock_all(loaded, layout.REPO_ROOT, registry, ctx.dry_run, ui.say)
    status = 0
    names = (profile,) if profile else pins_mod.PROFILES
    for name in names:
        chosen = loaded.profile(name)
        print(f"[{name}] base {chosen.base_reference}")
        for key, value in build_mod.build_args(chosen, chosen.base_reference).items():
            print(f"  {key}={value}")
        for message in chosen.warnings:
            print(f"  warning: {message}")
        problems = lock_mod.check_lock_matches(chosen, pins_mod.lock_path(name, layout.REPO_ROOT))
        for problem in problems:
            print(f"  lock out of date: {problem}")
        if check and problems:
            status = 1
    if status:
        print("xpukit: error: lock files do not match the pins (fix: run `invoke pins --lock`)", file=sys.stderr)
    return status


@guarded
def clean(ctx: Context, volumes: bool = False, build_cache: bool = False) -> int:
    s = ctx.settings
    sdk = None if ctx.dry_run else ctx.engine.client()  # a dry run asks no engine: it lists what would go
    images = [] if sdk is None else sdk.images.list(name=s.image)
    for image in images:
        for tag in image.tags:
            ui.say(f"removing {tag}")
            if sdk is not None:  # always, when there are images
                sdk.images.remove(tag)
    if not images:
        ui.say(f"no {s.image} images to remove" if sdk else f"would remove every {s.image}:* image")
    if volumes:
        if sdk is None:
            ui.say(f"would remove volume {s.cache_volume}")
        else:
            ui.say(engine.remove_volume(sdk, s.cache_volume))
    if build_cache:
        cmd = [ctx.engine.build_cli().path if sdk else ctx.engine.cli_name, "builder", "prune", "-f"]
        if ctx.dry_run:
            print(shlex.join(cmd))
        else:
            return processes.stream_process(cmd)
    return 0


# ---------------------------------------------------------------- running things in the image


DEMO_EXAMPLES = {"ur": "examples/xpu_triton_ur.py", "dpnp": "examples/dpnp_triton.py"}
DEMO_LAYERS = {"dpnp": "dpnp"}  # an example that runs only in a layer's image: --example dpnp implies --with dpnp


@guarded
def demo_ur(ctx: Context, where: str, demo_args: list[str], example: str = "ur") -> int:
    check_choice("example", example, tuple(DEMO_EXAMPLES))
    where, why = resolve_where(where, ctx)
    script = DEMO_EXAMPLES[example]
    if where == "host":
        ui.say(f"running the UR demo on the host ({why})")
        require_host_runtime()
        cmd = [sys.executable, str(layout.REPO_ROOT / script), *demo_args]
        if ctx.dry_run:
            print(shlex.join(cmd))
            return 0
        return processes.stream_process(cmd, {"PYTHONPATH": str(layout.REPO_ROOT)})
    layer = DEMO_LAYERS.get(example, "")
    if layer and not ctx.settings.layer:
        ui.say(f"--example {example} runs in the {layer} layer's image: --with {layer}")
        ctx.settings = dataclasses.replace(ctx.settings, layer=layer)
    command = ["python", f"{containers.WORKSPACE}/{script}", *demo_args]
    options = containers.without_network(containers.bytecode_cache(containers.container_options(ctx)))
    return run_in_image(ctx, command, options, "running the UR demo")


@guarded
def shell(ctx: Context, command: str = "") -> int:
    options = containers.container_options(ctx)
    options["tty"] = True
    args = ["bash", "-c", command] if command else ["bash"]
    plan = plan_for_run(ctx)
    # An interactive TTY is the CLI's job; the SDK checked the engine and the image first.
    cli = plan.build.command[0]
    line = processes.format_run_cli(cli, plan.tag, args, options)
    if ctx.dry_run:
        print(shlex.join(line))
        return 0
    if not sys.stdin.isatty():
        line.remove("-it")
    os.execvp(line[0], line)
    return 0  # pragma: no cover


@guarded
def test(ctx: Context, where: str, pytest_args: list[str], phase: str = "all", suite: str = "quick") -> int:
    check_choice("phase", phase, testing.PHASES)
    check_choice("suite", suite, tuple(testing.SUITES))
    where, why = resolve_where(where, ctx)
    if phase == "container" and where != "container":
        raise XpukitError(f"--phase container runs the tests in the image, but {why}", engine.START_ENGINE_FIX)
    return testing.run_tests(ctx, where, why, pytest_args, phase, suite)


@guarded
def doctor_cmd(ctx: Context, image: str = "", report: bool = False) -> int:
    """Host checks, and in-container checks of ``image`` (default: the profile's image, if built)."""
    from xpukit.host.doctor import checkup as doctor
    from xpukit.host.doctor import host as doctor_host

    profile = load_profile(ctx.profile)
    if not image and ctx.engine.connect_if_present():
        tag = f"{ctx.settings.image}:{profile.name}"
        image = tag if ctx.engine.image_exists(tag) else ""
        if not image:
            ui.say(f"no {tag} image yet: in-container checks skipped (build it with `invoke build`)")
    options = doctor.DoctorOptions(
        image=image or None,
        eng=ctx.engine,
        engine_kind=(ctx.engine.kind, ctx.engine.rootless),
        engine_options=ctx.engine.run_options() if image else {},
        engine_endpoint=ctx.engine.api,
        expected_pins={"fingerprint": profile.fingerprint()},
        need_gib=doctor_host.disk_budget_gib(profile.name),
        report=report,
    )
    return doctor.run_doctor(options)


# ---------------------------------------------------------------- zebin


def docs(check: bool = False) -> int:
    """`invoke docs`: rewrite the tables docs/ generates from the pins (``check``: list the stale files, exit 1)."""
    from xpukit.host.versions import docs_tables

    return docs_tables.main(["--check"] if check else [])
