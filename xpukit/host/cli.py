"""What each invoke task does. tasks.py only parses options and calls these.

Every command returns an exit code. ``guarded`` turns the kit's errors into one line on stderr
and a non-zero exit (a traceback only with --debug).
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from xpukit.errors import XpukitError
from xpukit.host import build as build_mod
from xpukit.host import config, engine
from xpukit.host import pins as pins_mod

ROOT = pins_mod.REPO_ROOT
WORKSPACE = "/workspace"  # where the checkout is mounted (read-only) in the container
CACHE_MOUNT = "/home/xpukit/.cache"

F = TypeVar("F", bound=Callable[..., int])


def say(message: str) -> None:
    print(f"xpukit: {message}", flush=True)


def warn(message: str) -> None:
    print(f"xpukit: warning: {message}", file=sys.stderr, flush=True)


def guarded(func: F) -> F:
    """Run a command; on a kit error print one line and exit non-zero."""

    @functools.wraps(func)
    def wrapper(settings: config.Settings, *args: Any, **kwargs: Any) -> int:
        try:
            return func(settings, *args, **kwargs)
        except XpukitError as exc:
            if settings.debug:
                raise
            print(f"xpukit: error: {exc.one_line()}", file=sys.stderr, flush=True)
            return exc.exit_code
        except KeyboardInterrupt:
            print("xpukit: interrupted", file=sys.stderr)
            return 130

    return wrapper  # type: ignore[return-value]


def resolve_profile(choice: str, announce: bool = True, sysfs_root: str = "/", dev_root: str = "/") -> str:
    """auto: xpu where the host has an Intel GPU render node, else cpu, saying which and why."""
    config.check_choice("profile", choice, config.PROFILE_CHOICES)
    if choice != "auto":
        return choice
    from xpukit.host.gpu import has_intel_gpu

    found, reason = has_intel_gpu(sysfs_root, dev_root)
    chosen = "xpu" if found else "cpu"
    if announce:
        say(f"profile auto -> {chosen} ({reason})")
    return chosen


def load_profile(name: str) -> pins_mod.Profile:
    profile = pins_mod.load().profile(name)
    for message in profile.warnings:
        warn(message)
    return profile


# ---------------------------------------------------------------- build


def _resolve_base(settings: config.Settings, profile: pins_mod.Profile, sdk: Any | None) -> str:
    if sdk is None:  # no engine to ask: the base as configured
        return settings.base_image or profile.base_reference
    pull = functools.partial(build_mod.pull_with_progress, sdk, say=say)
    exists = functools.partial(engine.image_exists, sdk)
    return build_mod.choose_base(profile, settings.base_image, exists, pull, say)


def _dry_run_base(settings: config.Settings, profile: pins_mod.Profile) -> str:
    """The base a real build would pick, asking the engine (read-only) when one answers; never pulls."""
    try:
        sdk = engine.client(settings.docker_host, timeout=5)
    except XpukitError:
        return _resolve_base(settings, profile, None)
    try:
        return build_mod.choose_base(
            profile, settings.base_image, functools.partial(engine.image_exists, sdk), None, say
        )
    except XpukitError:
        say(f"base: {profile.base_reference} is not present; a real build would try to pull it")
        return _resolve_base(settings, profile, None)
    finally:
        sdk.close()


def _make_plan(
    settings: config.Settings,
    profile: pins_mod.Profile,
    base: str,
    variant: build_mod.Variant,
    github_token: str = "",
) -> build_mod.BuildPlan:
    try:
        cli: engine.DockerCli | None = engine.pick_cli(settings.docker_cli)
    except XpukitError:
        if not settings.dry_run:
            raise
        cli = None  # a dry run still prints the plan, with a plain `docker`
    progress = "plain" if (os.environ.get("CI") or not sys.stdout.isatty()) else "auto"
    plan = build_mod.plan(ROOT, profile, base, settings.image, cli, settings.ca_bundle, github_token, variant, progress)
    if settings.docker_host:  # the CLI must build on the engine the SDK talks to
        plan.env["DOCKER_HOST"] = settings.docker_host
    return plan


def _content_tag(settings: config.Settings, profile: pins_mod.Profile, base: str, variant: build_mod.Variant) -> str:
    args = build_mod.build_args(profile, base, variant)
    return f"{settings.image}:{profile.name}-{build_mod.content_hash(ROOT, args)}"


def ensure_image(
    settings: config.Settings, profile: pins_mod.Profile, sdk: Any, variant: build_mod.Variant | None = None
) -> str:
    """The image's content tag, building it first when it is missing."""
    variant = variant or build_mod.Variant()
    base = _resolve_base(settings, profile, sdk)
    tag = _content_tag(settings, profile, base, variant)
    if engine.image_exists(sdk, tag):
        return tag
    say(f"image {tag} is missing; building it")
    return _run_build(settings, profile, base, variant)


def _run_build(
    settings: config.Settings,
    profile: pins_mod.Profile,
    base: str,
    variant: build_mod.Variant,
    github_token: str = "",
) -> str:
    build_mod.ensure_lock_current(profile, ROOT)
    plan = _make_plan(settings, profile, base, variant, github_token)
    say(f"building {', '.join(plan.tags)}")
    code = engine.stream_process(plan.command, plan.env)
    if code != 0:
        raise XpukitError(f"the image build failed (exit {code}); its log is above", "fix the failing step and rerun")
    return plan.tags[0]


@guarded
def build(settings: config.Settings, variant: build_mod.Variant, github_token: str = "") -> int:
    profile = load_profile(resolve_profile(settings.profile))
    if github_token and not Path(github_token).is_file():
        raise XpukitError(f"GitHub token file {github_token} does not exist", "pass a file holding the token")
    if settings.dry_run:
        plan = _make_plan(settings, profile, _dry_run_base(settings, profile), variant, github_token)
        print(plan.printable())
        return 0
    engine.pick_cli(settings.docker_cli)  # no BuildKit, no build: say so before anything else
    sdk = engine.client(settings.docker_host)
    _run_build(settings, profile, _resolve_base(settings, profile, sdk), variant, github_token)
    return 0


# ---------------------------------------------------------------- base, pins, clean


@guarded
def base(settings: config.Settings) -> int:
    from xpukit.host.base import build_base

    profile = load_profile("cpu" if settings.profile == "auto" else settings.profile)
    if profile.name != "cpu":
        raise XpukitError(
            "`invoke base` builds the Debian base of the cpu profile; the xpu profile's base is Intel's DLE image",
            "pull the DLE image where a registry is reachable, or use --profile cpu",
        )
    tag = build_mod.local_base_name(profile)
    cli = settings.docker_cli if settings.docker_cli != "auto" else "docker"
    if not settings.dry_run:
        engine.client(settings.docker_host).close()
    return build_base(settings.base_suite, settings.base_mirror, tag, cli, settings.dry_run, say)


@guarded
def pins(settings: config.Settings, lock: bool = False, check: bool = False) -> int:
    from xpukit.host import lock as lock_mod

    loaded = pins_mod.load()
    if lock:
        registry = None
        if not settings.dry_run:
            try:
                sdk = engine.client(settings.docker_host, timeout=30)
                registry = lambda ref: sdk.images.get_registry_data(ref).id  # noqa: E731
            except XpukitError as exc:
                warn(f"{exc.message}; digests cannot be looked up and stay empty")
        return lock_mod.lock_all(loaded, ROOT, registry, settings.dry_run, say)
    status = 0
    names = pins_mod.PROFILES if settings.profile == "auto" else (settings.profile,)
    for name in names:
        profile = loaded.profile(name)
        print(f"[{name}] base {profile.base_reference}")
        for key, value in build_mod.build_args(profile, profile.base_reference).items():
            print(f"  {key}={value}")
        for message in profile.warnings:
            print(f"  warning: {message}")
        problems = lock_mod.check_lock_matches(profile, pins_mod.lock_path(name, ROOT))
        for problem in problems:
            print(f"  lock out of date: {problem}")
        if check and problems:
            status = 1
    if status:
        print("xpukit: error: lock files do not match the pins (fix: run `invoke pins --lock`)", file=sys.stderr)
    return status


@guarded
def clean(settings: config.Settings, volumes: bool = False, build_cache: bool = False) -> int:
    sdk = None if settings.dry_run else engine.client(settings.docker_host)
    images = [] if sdk is None else sdk.images.list(name=settings.image)
    for image in images:
        for tag in image.tags:
            say(f"removing {tag}")
            sdk.images.remove(tag)
    if not images:
        say(f"no {settings.image} images to remove" if sdk else f"would remove every {settings.image}:* image")
    if volumes:
        if sdk is None:
            say(f"would remove volume {settings.cache_volume}")
        else:
            import docker

            try:
                sdk.volumes.get(settings.cache_volume).remove()
                say(f"removed volume {settings.cache_volume}")
            except docker.errors.NotFound:
                say(f"no volume {settings.cache_volume}")
    if build_cache:
        cmd = [engine.pick_cli(settings.docker_cli).path if sdk else "docker", "builder", "prune", "-f"]
        if settings.dry_run:
            print(shlex.join(cmd))
        else:
            return engine.stream_process(cmd)
    return 0


# ---------------------------------------------------------------- running things in the image


def container_options(settings: config.Settings, profile: str, extra_env: dict[str, str] | None = None) -> dict:
    """docker SDK run options: the checkout read-only, the Triton cache volume, GPU access."""
    options: dict[str, Any] = {
        "volumes": {
            str(ROOT): {"bind": WORKSPACE, "mode": "ro"},
            settings.cache_volume: {"bind": CACHE_MOUNT, "mode": "rw"},
        },
        "working_dir": WORKSPACE,
        "environment": {
            "PYTHONPATH": WORKSPACE,
            "PYTHONDONTWRITEBYTECODE": "1",
            "XPUKIT_PROFILE": profile,
            **(extra_env or {}),
        },
    }
    if profile == "xpu":
        from xpukit.host.gpu import gpu_run_options

        gpu = gpu_run_options()
        for note in gpu.notes:
            say(f"gpu: {note}")
        for key, value in gpu.docker_kwargs().items():
            if key == "volumes":
                options["volumes"].update(value)
            else:
                options[key] = value
    return options


def resolve_where(where: str, docker_host: str) -> tuple[str, str]:
    """auto: container where an engine answers, otherwise host. Returns (where, why)."""
    config.check_choice("where", where, config.WHERE_CHOICES)
    if where != "auto":
        return where, "--where " + where
    ok, why = engine.engine_answers(docker_host)
    return ("container", "an engine answers") if ok else ("host", why)


def require_host_runtime() -> None:
    """The kit's runtime (Triton's Intel backend, the UR wheels, numpy) in this interpreter, or a clear error."""
    import importlib.util

    missing = [m for m in ("triton", "numpy") if importlib.util.find_spec(m) is None]
    if missing:
        raise XpukitError(
            f"the host has no kit runtime ({', '.join(missing)} not installed for {sys.executable})",
            "run it in the image (start a Docker engine; --where container), or "
            "pip install --require-hashes -r env/lock/cpu.txt",
        )


@guarded
def demo_ur(settings: config.Settings, where: str, demo_args: list[str]) -> int:
    where, why = resolve_where(where, settings.docker_host)
    script = "examples/xpu_triton_ur.py"
    if where == "host":
        say(f"running the UR demo on the host ({why})")
        require_host_runtime()
        cmd = [sys.executable, str(ROOT / script), *demo_args]
        if settings.dry_run:
            print(shlex.join(cmd))
            return 0
        return engine.stream_process(cmd, {"PYTHONPATH": str(ROOT)})
    profile = resolve_profile(settings.profile)
    options = container_options(settings, profile)
    command = ["python", f"{WORKSPACE}/{script}", *demo_args]
    if settings.dry_run:
        loaded = load_profile(profile)
        tag = _content_tag(settings, loaded, _dry_run_base(settings, loaded), build_mod.Variant())
        print(shlex.join(engine.format_run_cli("docker", tag, command, options)))
        return 0
    sdk = engine.client(settings.docker_host)
    tag = ensure_image(settings, load_profile(profile), sdk)
    say(f"running the UR demo in {tag}")
    return engine.run_container(sdk, tag, command, **options)


@guarded
def shell(settings: config.Settings, command: str = "") -> int:
    profile = resolve_profile(settings.profile)
    options = container_options(settings, profile)
    options["tty"] = True
    # An interactive TTY is the CLI's job; the SDK checks the engine and the image first.
    cli = engine.pick_cli(settings.docker_cli).path if not settings.dry_run else "docker"
    args = ["bash", "-c", command] if command else ["bash"]
    if settings.dry_run:
        loaded = load_profile(profile)
        tag = _content_tag(settings, loaded, _dry_run_base(settings, loaded), build_mod.Variant())
        print(shlex.join(engine.format_run_cli(cli, tag, args, options)))
        return 0
    sdk = engine.client(settings.docker_host)
    tag = ensure_image(settings, load_profile(profile), sdk)
    line = engine.format_run_cli(cli, tag, args, options)
    if not sys.stdin.isatty():
        line.remove("-it")
    os.execvp(line[0], line)
    return 0  # pragma: no cover


@guarded
def test(settings: config.Settings, where: str, pytest_args: list[str]) -> int:
    from xpukit.host.testing import run_tests

    return run_tests(settings, where, pytest_args)


@guarded
def doctor(settings: config.Settings, image: str = "") -> int:
    """Host checks, and in-container checks of ``image`` (default: the profile's image, if built)."""
    from xpukit.host.doctor import run_doctor

    profile = load_profile(resolve_profile(settings.profile))
    if not image:
        try:
            sdk = engine.client(settings.docker_host, timeout=30)
            tag = f"{settings.image}:{profile.name}"
            image = tag if engine.image_exists(sdk, tag) else ""
            if not image:
                say(f"no {tag} image yet: in-container checks skipped (build it with `invoke build`)")
        except XpukitError:
            image = ""
    expected = {"fingerprint": profile.fingerprint()}
    # Source builds (xpu) want ~80 GiB; the cpu image with its caches a few.
    need_gib = 80 if profile.name == "xpu" else 10
    return run_doctor(
        image or None, lambda: engine.client(settings.docker_host), expected_pins=expected, need_gib=need_gib
    )


# ---------------------------------------------------------------- zebin


def _in_container(settings: config.Settings, module_args: list[str], mounts: dict[str, str]) -> int:
    """Run `python -m xpukit ...` in the image as the calling user, with host paths at the same place."""
    profile = resolve_profile(settings.profile, announce=False)
    options = container_options(settings, profile, {"TRITON_CACHE_DIR": "/tmp/triton", "HOME": "/tmp"})
    for host_path, mode in mounts.items():
        options["volumes"][host_path] = {"bind": host_path, "mode": mode}
    # Files written into --out belong to the user who ran the task, not to the image's user.
    options["user"] = f"{os.getuid()}:{os.getgid()}"
    command = ["python", "-m", "xpukit", *module_args]
    if settings.dry_run:
        print(shlex.join(engine.format_run_cli("docker", f"{settings.image}:{profile}-<content>", command, options)))
        return 0
    sdk = engine.client(settings.docker_host)
    tag = ensure_image(settings, load_profile(profile), sdk)
    return engine.run_container(sdk, tag, command, **options)


def _container_path(path: Path) -> str:
    """Where a host path appears in the container: under /workspace when inside the checkout."""
    resolved = path.resolve()
    try:
        return f"{WORKSPACE}/{resolved.relative_to(ROOT)}"
    except ValueError:
        return str(resolved)


@guarded
def compile_kernel(
    settings: config.Settings,
    where: str,
    kernel: str,
    targets: list[str],
    out_dir: str,
    signature: str | None,
    constexprs: list[str],
    num_warps: int | None,
    asm: bool = False,
) -> int:
    where, why = resolve_where(where, settings.docker_host)
    if where == "host":
        require_host_runtime()
        from xpukit.runtime.compile import run_compile

        return run_compile(
            kernel=kernel,
            targets=targets,
            out_dir=Path(out_dir),
            signature=signature,
            constexprs=constexprs,
            num_warps=num_warps,
            asm=asm,
        )
    path, sep, function = kernel.rpartition(":")
    if not sep or not Path(path).is_file():
        raise XpukitError(
            f"kernel {kernel!r} is not path.py:function of an existing file",
            "e.g. invoke compile examples/kernels.py:scale_kernel",
        )
    out = Path(out_dir).resolve()
    mounts = {str(out): "rw"}
    if not _container_path(Path(path)).startswith(WORKSPACE):
        mounts[str(Path(path).resolve().parent)] = "ro"
    if not settings.dry_run:
        out.mkdir(parents=True, exist_ok=True)
    args = ["compile", f"{_container_path(Path(path))}:{function}", "--target", ",".join(targets), "--out", str(out)]
    if signature:
        args += ["--signature", signature]
    for item in constexprs:
        args += ["--constexpr", item]
    if num_warps:
        args += ["--num-warps", str(num_warps)]
    args += ["--asm"] if asm else []
    say(f"compiling in the image ({why})")
    return _in_container(settings, args, mounts)


@guarded
def zebin_info(settings: config.Settings, where: str, path: str, as_json: bool = False, asm: bool = False) -> int:
    where, _ = resolve_where(where, settings.docker_host)
    if where == "host":
        from xpukit.runtime.compile import run_zebin_info

        return run_zebin_info(Path(path), as_json=as_json, asm=asm)
    if not Path(path).is_file():
        raise XpukitError(f"{path}: no such file", "pass the path of a .zebin file")
    file = Path(path).resolve()
    args = ["zebin-info", _container_path(file), *(["--json"] if as_json else []), *(["--asm"] if asm else [])]
    mounts = {} if _container_path(file).startswith(WORKSPACE) else {str(file.parent): "ro"}
    return _in_container(settings, args, mounts)
