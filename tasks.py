"""xpukit's tasks. Each one parses its options and calls the xpukit package (xpukit/host/cli.py).

Settings come from the flag, else the environment (XPUKIT_PROFILE, XPUKIT_IMAGE,
XPUKIT_DOCKER_CLI, DOCKER_HOST, ...), else invoke.yaml's `xpukit:` section, else the default.
"""

from __future__ import annotations

import shlex

from invoke import Collection, Exit, task

from xpukit.host import cli, config
from xpukit.host.build import Variant

COMMON_HELP = {
    "profile": "auto|cpu|xpu (auto: xpu where the host has an Intel GPU render node, else cpu)",
    "base-image": "build FROM this image instead of the pinned base",
    "ca-bundle": "PEM bundle to trust during the build (BuildKit secret, never stored in a layer)",
    "dry-run": "print the exact commands and run nothing",
    "debug": "show tracebacks",
}
WHERE_HELP = {"where": "auto|container|host (auto: container where a Docker engine answers, else host)"}


def _help(*common: str, **extra: str) -> dict[str, str]:
    """Help for the common options a task has, plus its own."""
    merged = {**COMMON_HELP, **WHERE_HELP}
    return {**{name: merged[name] for name in common}, **{k.replace("_", "-"): v for k, v in extra.items()}}


def _settings(c, **flags) -> config.Settings:
    try:
        yaml_config = dict(c.config.get("xpukit", {}) or {})
    except AttributeError:
        yaml_config = {}
    try:
        return config.resolve(flags, yaml_config)
    except cli.XpukitError as exc:
        raise Exit(f"xpukit: error: {exc.one_line()}", code=2) from None


def _finish(code: int) -> None:
    if code:
        raise Exit(code=code)


@task(
    help=_help(
        "profile",
        "base-image",
        "ca-bundle",
        "dry-run",
        "debug",
        triton="xpu: Triton variant (zebin|blog) or a 40-hex commit",
        torch="xpu: PyTorch source|wheel|none",
        llvm="xpu: build LLVM from source",
        torch_arch_list="xpu: TORCH_XPU_ARCH_LIST",
        github_token="file with a GitHub token (secret)",
    )
)
def build(
    c,
    profile=None,
    base_image=None,
    ca_bundle=None,
    triton="",
    torch="",
    llvm=False,
    torch_arch_list="",
    github_token="",
    dry_run=False,
    debug=False,
):
    """Build the kit's image for a profile with BuildKit (tags xpukit:<profile>-<content> and xpukit:<profile>)."""
    s = _settings(c, profile=profile, base_image=base_image, ca_bundle=ca_bundle, dry_run=dry_run, debug=debug)
    variant = Variant(triton=triton, torch=torch, llvm="source" if llvm else "", torch_arch_list=torch_arch_list)
    _finish(cli.build(s, variant, github_token))


@task(
    help=_help(
        "where",
        "profile",
        "ca-bundle",
        "dry-run",
        "debug",
        n="number of elements",
        scale="scale factor",
        device="auto|gpu|cpu",
        iters="launches to time",
        args="more flags for the demo, quoted",
    )
)
def demo_ur(
    c,
    where="auto",
    profile=None,
    n=None,
    scale=None,
    device=None,
    iters=None,
    args="",
    ca_bundle=None,
    dry_run=False,
    debug=False,
):
    """Run the Unified Runtime demo: USM memory, raw addresses to a Triton kernel, no PyTorch."""
    s = _settings(c, profile=profile, ca_bundle=ca_bundle, dry_run=dry_run, debug=debug)
    demo_args = []
    for flag, value in (("--n", n), ("--scale", scale), ("--device", device), ("--iters", iters)):
        if value is not None:
            demo_args += [flag, str(value)]
    if debug:
        demo_args.append("--debug")
    _finish(cli.demo_ur(s, where, demo_args + shlex.split(args)))


@task(help=_help("where", "profile", "ca-bundle", "dry-run", "debug", pytest_args="extra pytest arguments, quoted"))
def test(c, where="auto", profile=None, ca_bundle=None, pytest_args="", dry_run=False, debug=False):
    """Run the tests: host tests, then the tests inside the image (building it when missing)."""
    s = _settings(c, profile=profile, ca_bundle=ca_bundle, dry_run=dry_run, debug=debug)
    _finish(cli.test(s, where, shlex.split(pytest_args)))


@task(help=_help("profile", "dry-run", "debug", command="run this instead of an interactive shell"))
def shell(c, profile=None, command="", dry_run=False, debug=False):
    """Open a shell in the image with the checkout mounted at /workspace."""
    s = _settings(c, profile=profile, dry_run=dry_run, debug=debug)
    _finish(cli.shell(s, command))


@task(help=_help("dry-run", "debug", suite="Debian suite (default bookworm)", mirror="Debian mirror URL"))
def base(c, suite=None, mirror=None, dry_run=False, debug=False):
    """Build a local base image from a debootstrap rootfs, for machines that cannot pull (needs root)."""
    s = _settings(c, base_suite=suite, base_mirror=mirror, dry_run=dry_run, debug=debug)
    _finish(cli.base(s))


@task(
    help=_help(
        "profile",
        "dry-run",
        "debug",
        lock="regenerate env/lock/*.txt and fill digests a registry can tell",
        check="fail when the lock files do not match the pins",
    )
)
def pins(c, profile=None, lock=False, check=False, dry_run=False, debug=False):
    """Show the pins as build args, their warnings, and whether the lock files match them."""
    s = _settings(c, profile=profile, dry_run=dry_run, debug=debug)
    _finish(cli.pins(s, lock=lock, check=check))


@task(
    help=_help(
        "dry-run", "debug", volumes="also remove the Triton cache volume", build_cache="also prune BuildKit's cache"
    )
)
def clean(c, volumes=False, build_cache=False, dry_run=False, debug=False):
    """Remove the kit's images (and optionally its cache volume and BuildKit's cache)."""
    s = _settings(c, dry_run=dry_run, debug=debug)
    _finish(cli.clean(s, volumes=volumes, build_cache=build_cache))


@task(
    help=_help(
        "where",
        "profile",
        "dry-run",
        "debug",
        kernel="path.py:function",
        target="target(s), comma-separated, or all (every target the installed ocloc builds; default: pvc)",
        out="output folder (one subfolder per target)",
        signature="e.g. 'x_ptr:*fp32,n:i32' (default: declared next to the kernel)",
        constexpr="NAME=VALUE, repeatable",
        num_warps="Triton num_warps",
        asm="also write <kernel>.isa (Xe ISA from ocloc disasm)",
    ),
    iterable=["constexpr"],
)
def compile(
    c,
    kernel,
    target="pvc",
    out="out",
    signature=None,
    constexpr=None,
    num_warps=None,
    asm=False,
    where="auto",
    profile=None,
    dry_run=False,
    debug=False,
):
    """Compile a Triton kernel to SPIR-V and zebin for Intel GPU targets (no GPU needed)."""
    s = _settings(c, profile=profile, dry_run=dry_run, debug=debug)
    targets = [t.strip() for t in target.split(",") if t.strip()]
    code = cli.compile_kernel(
        s,
        where,
        kernel=kernel,
        targets=targets,
        out_dir=out,
        signature=signature,
        constexprs=list(constexpr or []),
        num_warps=int(num_warps) if num_warps else None,
        asm=asm,
    )
    _finish(code)


@task(help=_help("where", "profile", "dry-run", "debug", file="a .zebin file", json="print JSON", asm="print the ISA"))
def zebin_info(c, file, json=False, asm=False, where="auto", profile=None, dry_run=False, debug=False):
    """Print what the zebin reader finds in FILE: kernels, SIMD, GRF, spills, payload arguments (--asm: ISA)."""
    s = _settings(c, profile=profile, dry_run=dry_run, debug=debug)
    _finish(cli.zebin_info(s, where, file, as_json=json, asm=asm))


@task(
    help=_help(
        "where",
        "profile",
        "dry-run",
        "debug",
        kernel="path.py:function",
        target="targets, comma-separated",
        config="NAME=VALUE,... (constexprs, num_warps, num_stages, grf_mode); repeatable; "
        "default: the kernel's triton.autotune configs",
        format="md|json",
        signature="as for compile",
        constexpr="NAME=VALUE for every config, repeatable",
    ),
    iterable=["config", "constexpr"],
)
def kernel_report(
    c,
    kernel,
    target="pvc",
    config=None,
    format="md",
    signature=None,
    constexpr=None,
    where="auto",
    profile=None,
    dry_run=False,
    debug=False,
):
    """Compile KERNEL for every target x config; one table of ISA counts (sends, DPAS, spills, GRF...)."""
    from xpukit.host.kernel_report import kernel_report as run

    s = _settings(c, profile=profile, dry_run=dry_run, debug=debug)
    _finish(run(s, where, kernel, [target], list(config or []), format, signature, list(constexpr or [])))


@task(help=_help("profile", "debug", image="image to check inside (default: xpukit:<profile> when built)"))
def doctor(c, image="", profile=None, debug=False):
    """Check the host (engine, BuildKit, Intel GPU, render-node access, disk) and the image; one line each."""
    s = _settings(c, profile=profile, debug=debug)
    _finish(cli.doctor(s, image))


ns = Collection(build, demo_ur, test, shell, base, pins, clean, compile, zebin_info, kernel_report, doctor)
ns.configure({"xpukit": {}})
