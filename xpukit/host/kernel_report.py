"""`invoke kernel-report`: route ``python -m xpukit kernel-report`` to the image (or this host).

Every target x config is compiled where Triton and ocloc live; the table comes back on stdout.
"""

from __future__ import annotations

from pathlib import Path

from xpukit.errors import XpukitError
from xpukit.host import cli, config


@cli.guarded
def kernel_report(
    settings: config.Settings,
    where: str,
    kernel: str,
    targets: list[str],
    configs: list[str],
    output_format: str = "md",
    signature: str | None = None,
    constexprs: list[str] | None = None,
) -> int:
    if output_format not in ("md", "json"):
        raise XpukitError(f"unknown format {output_format!r}", "use --format md or --format json")
    where, why = cli.resolve_where(where, settings.docker_host)
    if where == "host":
        cli.require_host_runtime()
        from xpukit.runtime.kernel_report import run_kernel_report

        return run_kernel_report(kernel, targets, configs, output_format, signature, list(constexprs or []))
    path, sep, function = kernel.rpartition(":")
    if not sep or not Path(path).is_file():
        raise XpukitError(
            f"kernel {kernel!r} is not path.py:function of an existing file",
            "e.g. invoke kernel-report examples/kernels.py:row_sum_kernel",
        )
    inside = cli._container_path(Path(path))
    mounts = {} if inside.startswith(cli.WORKSPACE) else {str(Path(path).resolve().parent): "ro"}
    args = ["kernel-report", f"{inside}:{function}", "--format", output_format]
    for target in targets:
        args += ["--target", target]
    for item in configs:
        args += ["--config", item]
    if signature:
        args += ["--signature", signature]
    for item in constexprs or []:
        args += ["--constexpr", item]
    if output_format != "json":  # JSON stays machine-readable on stdout
        cli.say(f"compiling every target x config in the image ({why})")
    return cli._in_container(settings, args, mounts)
