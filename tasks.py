"""xpukit's tasks. Each one parses its options and calls the xpukit package (xpukit/host/commands/kit.py).

Settings come from the flag, else the environment (XPUKIT_PROFILE, XPUKIT_IMAGE,
XPUKIT_DOCKER_CLI, DOCKER_HOST, ...), else invoke.yaml's `xpukit:` section, else the default;
xpukit/host/settings.py resolves them once per task.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from invoke import Collection, Exit, task

# invoke turns writing bytecode off for every task (unless given --write-pyc), so each task compiled
# the kit's modules from source again (~0.05 s of every task, 2 cores). Python's own setting (-B,
# PYTHONDONTWRITEBYTECODE) decides again, before the kit is imported; a read-only checkout writes none.
sys.dont_write_bytecode = bool(sys.flags.dont_write_bytecode)

from xpukit.errors import EXIT_USAGE, XpukitError, guard  # noqa: E402
from xpukit.host import inputs, settings  # noqa: E402
from xpukit.host.commands import kit as commands  # noqa: E402
from xpukit.host.commands import share  # noqa: E402
from xpukit.host.commands import zebin as zebin_commands  # noqa: E402

COMMON_HELP = {
    "with": "add an optional layer to the image: dpnp (Intel's SYCL arrays; its own stage and tag)",
    "profile": f"{'|'.join(settings.PROFILE_CHOICES)} "
    "(auto: xpu where the host has an Intel GPU render node, else cpu)",
    "base-image": "build FROM this image instead of the pinned base",
    "ca-bundle": "auto|none|PATH: CA bundle the build trusts (auto: the host's; a BuildKit secret, never in a layer)",
    "dry-run": "print the exact commands and run nothing",
    "debug": "show tracebacks",
}
WHERE_HELP = {"where": f"{'|'.join(settings.WHERE_CHOICES)} (auto: container where a Docker engine answers, else host)"}


def _help(*common: str, **extra: str) -> dict[str, str]:
    """Help for the common options a task has, plus its own."""
    merged = {**COMMON_HELP, **WHERE_HELP}
    return {**{name: merged[name] for name in common}, **{k.replace("_", "-"): v for k, v in extra.items()}}


def _bad_input(call):
    """What the user typed (a flag, a setting) is refused with exit 2, as invoke's own parser does."""
    try:
        return call()
    except XpukitError as exc:
        exc.exit_code = EXIT_USAGE
        raise


def _settings(c, **flags) -> settings.Context:
    """The task's context: invoke.yaml's `xpukit:` section (read by invoke's config) under env and flags."""
    return _bad_input(lambda: settings.make_context(flags, c.config.get("xpukit")))


def _targets(target) -> list[str]:
    """--target values as preset names (the default when not given; unknown ones refused here)."""
    # not given: [] from invoke; --target '': [''], an error
    return inputs.target_names(target or None)


def _after_double_dash() -> list[str]:
    """What follows `--` on the command line (invoke parses it but gives it to no task)."""
    return sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else []


def _finish(code: int) -> None:
    if code:
        raise Exit(code=code)


def _boundary(call, debug=False) -> None:
    """The kit's one error boundary (xpukit.errors.guard) around everything tasks.py runs: a kit error
    (settings, flags, engine calls) is one line and its exit code, Ctrl-C one line and exit 130."""
    _finish(guard(call, debug=debug))


def bounded(func):
    """A task's body inside the boundary."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        _boundary(lambda: func(*args, **kwargs), debug=bool(kwargs.get("debug")))

    return wrapper


# invoke reads invoke.yaml after this file, and would answer a broken one with a traceback
_boundary(lambda: _bad_input(lambda: settings.check_project_yaml(Path(__file__).resolve().parent)))


@task(
    help=_help(
        "profile",
        "base-image",
        "ca-bundle",
        "dry-run",
        "debug",
        triton="xpu: Triton variant (zebin|blog|current) or a 40-hex commit (its own pins, read at build time)",
        torch="xpu: PyTorch source|wheel|none",
        llvm="xpu: build LLVM from source",
        torch_arch_list="xpu: TORCH_XPU_ARCH_LIST",
        base="xpu: omix = Ubuntu + intel-omix-dev instead of the DLE image",
        github_token="file with a GitHub token (secret)",
        registry="HOST[:PORT]/NAMESPACE to pull the image from when a teammate pushed it (XPUKIT_REGISTRY)",
        rebuild="build even when the registry has this content",
    )
    | {"with": COMMON_HELP["with"]}
)
def build(
    c,
    profile=None,
    with_=None,
    base_image=None,
    ca_bundle=None,
    triton=None,
    torch=None,
    llvm=False,
    torch_arch_list=None,
    base=None,
    github_token="",
    registry=None,
    rebuild=False,
    dry_run=False,
    debug=False,
):
    """Build the kit's image for a profile with BuildKit (tags xpukit:<profile>-<content> and xpukit:<profile>),
    or pull it when a teammate already pushed that content (env/lock/images.toml, --registry)."""
    s = _settings(
        c,
        profile=profile,
        base_image=base_image,
        ca_bundle=ca_bundle,
        registry=registry,
        layer=with_,
        dry_run=dry_run,
        debug=debug,
    )
    variant = commands.Variant(
        triton=inputs.not_empty("triton", triton, "zebin") or "",
        torch=inputs.not_empty("torch", torch, "source") or "",
        llvm="source" if llvm else "",
        torch_arch_list=inputs.not_empty("torch-arch-list", torch_arch_list, "pvc,bmg") or "",
        base=inputs.not_empty("base", base, "omix") or "",
    )
    _finish(commands.build(s, variant, github_token, rebuild))


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
        example="ur (examples/xpu_triton_ur.py) | dpnp (examples/dpnp_triton.py; implies --with dpnp)",
    )
    | {"with": COMMON_HELP["with"]}
)
def demo_ur(
    c,
    where="auto",
    profile=None,
    with_=None,
    example="ur",
    n=None,
    scale=None,
    device=None,
    iters=None,
    args="",
    ca_bundle=None,
    dry_run=False,
    debug=False,
):
    """Run the Unified Runtime demo: USM memory, raw addresses to a Triton kernel, no PyTorch
    (`--example dpnp`, in the dpnp image: dpnp arrays and a Triton kernel in one computation)."""
    s = _settings(c, profile=profile, ca_bundle=ca_bundle, layer=with_, dry_run=dry_run, debug=debug)
    demo_args = []
    for flag, value in (("--n", n), ("--scale", scale), ("--device", device), ("--iters", iters)):
        if value is not None:
            demo_args += [flag, str(value)]
    if debug:
        demo_args.append("--debug")
    _finish(commands.demo_ur(s, where, demo_args + inputs.words("args", args), example))


@task(
    help=_help(
        "where",
        "profile",
        "ca-bundle",
        "dry-run",
        "debug",
        pytest_args="extra pytest arguments, quoted",
        phase="all|host|container: run only the host tests or only the tests in the image (default all)",
        suite="quick|engine|all|smoke: quick (default, minutes) = host unit tests and the tests in the image; "
        "engine = the engine suites (cold builds, verify, registry, podman, Slurm); all = both (CI); "
        "smoke = all's tests marked sharing_smoke",
    )
    | {"with": COMMON_HELP["with"]}
)
def test(
    c,
    where="auto",
    profile=None,
    with_=None,
    ca_bundle=None,
    pytest_args="",
    phase="all",
    suite="quick",
    dry_run=False,
    debug=False,
):
    """Run the tests: host unit tests, then the tests inside the image (building it when missing);
    --suite all adds the engine suites (--suite engine: those alone).
    Arguments after `--` go to pytest too: `invoke test -- -k zebin`."""
    s = _settings(c, profile=profile, ca_bundle=ca_bundle, layer=with_, dry_run=dry_run, debug=debug)
    _finish(commands.test(s, where, inputs.words("pytest-args", pytest_args) + _after_double_dash(), phase, suite))


@task(
    help=_help("profile", "dry-run", "debug", command="run this instead of an interactive shell")
    | {"with": COMMON_HELP["with"]}
)
def shell(c, profile=None, with_=None, command="", dry_run=False, debug=False):
    """Open a shell in the image with the checkout mounted at /workspace."""
    s = _settings(c, profile=profile, layer=with_, dry_run=dry_run, debug=debug)
    _finish(commands.shell(s, command))


@task(
    help=_help(
        "dry-run",
        "debug",
        suite="Debian suite (default bookworm)",
        mirror="Debian mirror URL",
        reproducible="insist on mmdebstrap at the commit's SOURCE_DATE_EPOCH (the default where it is installed): "
        "the same base image ID on every machine",
        debootstrap="debootstrap and `docker import` instead (a new base image ID on every run)",
    )
)
def base(c, suite=None, mirror=None, reproducible=False, debootstrap=False, dry_run=False, debug=False):
    """Build a local Debian base image, for machines that cannot pull (needs root): reproducible with
    mmdebstrap where it is installed, else debootstrap (said in one line)."""
    s = _settings(c, base_suite=suite, base_mirror=mirror, dry_run=dry_run, debug=debug)
    _finish(commands.base(s, reproducible, debootstrap))


@task(
    help=_help(
        "dry-run",
        "debug",
        profile="cpu|xpu: show one profile (default: every profile in env/pins.toml)",
        lock="regenerate env/lock/*.txt and fill digests a registry can tell",
        check="fail when the lock files do not match the pins",
    )
)
def pins(c, profile=None, lock=False, check=False, dry_run=False, debug=False):
    """Show the pins as build args, their warnings, and whether the lock files match them."""
    s = _settings(c, dry_run=dry_run, debug=debug)
    _finish(commands.pins(s, profile or "", lock=lock, check=check))


@task(
    help=_help(
        "dry-run", "debug", volumes="also remove the Triton cache volume", build_cache="also prune BuildKit's cache"
    )
)
def clean(c, volumes=False, build_cache=False, dry_run=False, debug=False):
    """Remove the kit's images (and optionally its cache volume and BuildKit's cache)."""
    s = _settings(c, dry_run=dry_run, debug=debug)
    _finish(commands.clean(s, volumes=volumes, build_cache=build_cache))


@task(
    help=_help(
        "where",
        "profile",
        "dry-run",
        "debug",
        kernel="path.py:function",
        target="target, repeatable or comma-separated; all = every kit preset the installed ocloc builds (default pvc)",
        out="output folder (one subfolder per target)",
        signature="e.g. 'x_ptr:*fp32,n:i32' (default: declared next to the kernel)",
        constexpr="NAME=VALUE, repeatable",
        num_warps="Triton num_warps",
        asm="also write <kernel>.isa (Xe ISA from ocloc disasm)",
    ),
    iterable=["constexpr", "target"],
)
def compile(
    c,
    kernel,
    target=None,
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
    code = zebin_commands.compile_kernel(
        s,
        where,
        kernel=inputs.positional("compile", "kernel", kernel),
        targets=_targets(target),
        out_dir=inputs.not_empty("out", out, "out"),
        signature=signature,
        constexprs=inputs.assignments("constexpr", constexpr or []),
        num_warps=num_warps,
        asm=asm,
    )
    _finish(code)


@task(help=_help("where", "profile", "dry-run", "debug", file="a .zebin file", json="print JSON", asm="print the ISA"))
def zebin_info(c, file, json=False, asm=False, where="auto", profile=None, dry_run=False, debug=False):
    """Print what the zebin reader finds in FILE: kernels, SIMD, GRF, spills, payload arguments (--asm: ISA)."""
    s = _settings(c, profile=profile, dry_run=dry_run, debug=debug)
    _finish(zebin_commands.zebin_info(s, where, inputs.positional("zebin-info", "file", file), as_json=json, asm=asm))


@task(
    help=_help(
        "where",
        "profile",
        "dry-run",
        "debug",
        kernel="path.py:function",
        target="targets, comma-separated or repeated (aliases as for compile)",
        config="NAME=VALUE,... (constexprs, num_warps, num_stages, grf_mode); repeatable; "
        "default: the kernel's triton.autotune configs",
        format="md|json|html (html: one self-contained page, e.g. > report.html)",
        signature="as for compile",
        constexpr="NAME=VALUE for every config, repeatable",
        diff="also show what changed since the previous report of this kernel",
        no_cache="compile again even when a stored report matches",
        lines="also per source line: instructions, sends, DPAS, FMA, spills by line (docs/isa.md)",
        watch="serve the per-line view on http://127.0.0.1:PORT/ and compile again on each save",
        launched_by="SCRIPT.py: report the kernel as this script's launches specialize it (run once, CPU device)",
        script_args="--launched-by: the script's arguments, one quoted string",
        baseline_config="NAME=VALUE,...: compare every row, line by line, with this config's compile",
        baseline_target="FAMILY: compare every row, line by line, with this family's compile",
    ),
    iterable=["config", "constexpr", "target"],
)
def kernel_report(
    c,
    kernel,
    target=None,
    config=None,
    format="md",
    signature=None,
    constexpr=None,
    diff=False,
    no_cache=False,
    lines=False,
    watch=False,
    launched_by=None,
    script_args="",
    baseline_config=None,
    baseline_target=None,
    where="auto",
    profile=None,
    dry_run=False,
    debug=False,
):
    """Compile KERNEL for every target x config; one table of ISA counts (sends, DPAS, FMA, spills, GRF, limits)."""
    s = _settings(c, profile=profile, dry_run=dry_run, debug=debug)
    inputs.words("script-args", script_args)  # checked here; the image splits it again to run the script
    _finish(
        zebin_commands.kernel_report(
            s,
            where,
            inputs.positional("kernel-report", "kernel", kernel),
            _targets(target),
            inputs.assignments("config", config or [], comma=True),
            format,
            signature,
            inputs.assignments("constexpr", constexpr or []),
            diff=diff,
            no_cache=no_cache,
            lines=lines,
            watch=watch,
            launched_by=launched_by,
            script_args=script_args,
            baseline_config=baseline_config,
            baseline_target=baseline_target,
        )
    )


@task(
    help=_help(
        "profile",
        "debug",
        image="image to check inside (default: xpukit:<profile> when built)",
        report="print the fingerprint upstream's bug reports ask for (safe to paste)",
    )
)
def doctor(c, image="", profile=None, report=False, debug=False):
    """Check the host (engine, BuildKit, Intel GPU, render-node access, disk) and the image; one line each."""
    s = _settings(c, profile=profile, debug=debug)
    _finish(commands.doctor_cmd(s, image, report))


@task(
    help=_help(
        "profile",
        "ca-bundle",
        "dry-run",
        "debug",
        against="auto|local|lock|rebuild: compare with the local image, the lock's pushed one, or a 2nd rebuild",
        keep="keep the empty stores and image archives (their folder is printed)",
    )
)
def verify(c, against="auto", keep=False, profile=None, ca_bundle=None, dry_run=False, debug=False):
    """Rebuild the image from nothing in an empty podman store and check it is bit-for-bit the same (exit 1 if not)."""
    s = _settings(c, profile=profile, ca_bundle=ca_bundle, dry_run=dry_run, debug=debug)
    from xpukit.host.commands import verify as verify_cmd  # here: every other task starts without it

    _finish(verify_cmd.run(s, against, keep))


@task(help=_help("profile", "ca-bundle", "dry-run", "debug", registry="HOST[:PORT]/NAMESPACE (XPUKIT_REGISTRY)"))
def push(c, profile=None, registry=None, ca_bundle=None, dry_run=False, debug=False):
    """Push the profile's image and record its digest in env/lock/images.toml (commit that file)."""
    s = _settings(c, profile=profile, registry=registry, ca_bundle=ca_bundle, dry_run=dry_run, debug=debug)
    _finish(share.push(s))


@task(help=_help("profile", "dry-run", "debug"))
def pull(c, profile=None, dry_run=False, debug=False):
    """Pull the image digest env/lock/images.toml records for the profile, and check it."""
    _finish(share.pull(_settings(c, profile=profile, dry_run=dry_run, debug=debug)))


@task(
    help=_help(
        "profile", "ca-bundle", "dry-run", "debug", out="the archive to write", format="oci-archive|docker-archive"
    )
)
def export(c, out, format="oci-archive", profile=None, ca_bundle=None, dry_run=False, debug=False):
    """Write the profile's image as one file for podman or Apptainer, with OUT.json and OUT.sha256."""
    s = _settings(c, profile=profile, ca_bundle=ca_bundle, dry_run=dry_run, debug=debug)
    _finish(share.export(s, format, inputs.not_empty("out", out, "xpukit-cpu.tar")))


@task(help=_help("profile", "dry-run", "debug", out="where to write it (default .devcontainer/devcontainer.json)"))
def devcontainer(c, profile=None, out=".devcontainer/devcontainer.json", dry_run=False, debug=False):
    """Generate the devcontainer for editors: the kit's image, caches, user and GPU options."""
    s = _settings(c, profile=profile, dry_run=dry_run, debug=debug)
    _finish(share.devcontainer(s, inputs.not_empty("out", out, ".devcontainer/devcontainer.json")))


@task(
    help=_help(
        "profile",
        "ca-bundle",
        "dry-run",
        "debug",
        scheduler="local|slurm|kubernetes (default local: this engine, cells in parallel)",
        runtime="engine|charliecloud|apptainer: what runs each cell's image (slurm/local)",
        sif="apptainer: the SIF file (apptainer build --fakeroot, docs/cluster.md)",
        file="the matrix file (default env/matrix.toml)",
        suite="narrow the suite axis (comma-separated)",
        target="narrow the target axis",
        ur="narrow the UR release axis (pinned or releases of cpu.ur.matrix)",
        triton="narrow the Triton variant axis",
        out_dir="where runs are kept (default .xpukit/matrix)",
        only_failed="rerun only the cells of the last run that did not pass",
        jobs="local: cells at once (default: the number of cores)",
        throttle="slurm/kubernetes: array tasks or pods at once (default: all)",
        sbatch_args="more sbatch options, quoted (e.g. '--partition=pvc --time=30')",
        out="kubernetes: write the Indexed Job manifest to this file",
        apply="kubernetes: kubectl apply the manifest",
        image="kubernetes: REPOSITORY@sha256:... (default: env/lock/images.toml); slurm: each node pulls it by digest",
        node_engine="slurm with --image: docker|podman on the nodes (default: the kit's engine)",
        gpu_resource="kubernetes, xpu: gpu.intel.com/i915 or gpu.intel.com/xe",
        timeout="seconds to wait for every cell (default: no limit)",
    )
)
def matrix(
    c,
    scheduler="local",
    runtime="engine",
    file="",
    suite="",
    target="",
    ur="",
    triton="",
    out_dir="",
    only_failed=False,
    jobs=0,
    throttle=0,
    sbatch_args="",
    out="",
    apply=False,
    image="",
    node_engine="",
    gpu_resource="gpu.intel.com/i915",
    timeout=0.0,
    sif="",
    profile=None,
    ca_bundle=None,
    dry_run=False,
    debug=False,
):
    """Run the matrix of env/matrix.toml (UR release x target x Triton x suite), one result file per
    cell, on this engine, Slurm (sbatch --array) or Kubernetes (an Indexed Job); ends with one table."""
    s = _settings(c, profile=profile, ca_bundle=ca_bundle, dry_run=dry_run, debug=debug)
    from xpukit.host.commands import matrix as matrix_cmd  # here: every other task starts without it

    inputs.words("sbatch-args", sbatch_args)  # checked before the run's folder is made
    opts = matrix_cmd.Options(
        scheduler=scheduler, runtime=runtime, matrix_file=file, suites=suite, targets=target, urs=ur,
        tritons=triton, out_dir=out_dir, only_failed=only_failed, jobs=int(jobs), throttle=int(throttle),
        sbatch_args=sbatch_args, manifest_out=out, apply=apply, image=image, node_engine=node_engine,
        gpu_resource=gpu_resource, sif=sif, timeout=inputs.seconds("timeout", timeout),
    )  # fmt: skip
    _finish(matrix_cmd.run(s, opts))


@task(help={"check": "only report tables that differ from env/pins.toml (exit 1)"})
def docs(c, check=False):
    """Regenerate the version tables in README.md and docs/**/*.md from env/pins.toml."""
    _finish(commands.docs(check))


TASKS = (build, demo_ur, test, shell, base, pins, clean, compile, zebin_info, kernel_report, doctor, verify, docs, push,
         pull, export, devcontainer, matrix)  # fmt: skip
for each in TASKS:
    each.body = bounded(each.body)
ns = Collection(*TASKS)
ns.configure({"xpukit": {}})
