"""`python -m xpukit compile|zebin-info|kernel-report ...`: the zebin commands where no invoke is installed.

`invoke compile` and `invoke zebin-info` run this inside the image; it also works in `invoke shell`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from xpukit.errors import UsageError, guard
from xpukit.runtime.kernels.compile import run_compile
from xpukit.runtime.kernels.kernel_report import run_kernel_report
from xpukit.runtime.kernels.zebin_info import run_zebin_info
from xpukit.runtime.offline.report_model import ReportOptions
from xpukit.targets import DEFAULT_TARGET


def port_number(text: str) -> int:
    """--port: 0 (a free port) or 1-65535, refused in one line before anything compiles."""
    port = int(text) if text.strip().isascii() and text.strip().isdigit() else -1  # not '٣' (port 3)
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {text}: not a port", "give 1-65535, or 0 (the default) for a free one")
    return port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xpukit")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(dest="command", required=True)
    comp = commands.add_parser("compile", help="compile a Triton kernel to SPIR-V and zebin")
    comp.add_argument("kernel", help="path.py:function")
    comp.add_argument("--target", default=DEFAULT_TARGET, help="target(s), comma-separated, or all")
    comp.add_argument("--out", default="out", help="output folder")
    comp.add_argument("--signature", default=None, help="e.g. 'x_ptr:*fp32,n:i32'")
    comp.add_argument("--constexpr", action="append", default=[], help="NAME=VALUE, repeatable")
    comp.add_argument("--num-warps", type=int, default=None)
    comp.add_argument("--asm", action="store_true", help="also write <kernel>.isa (ocloc disasm)")
    info = commands.add_parser("zebin-info", help="print what the zebin reader finds")
    info.add_argument("file")
    info.add_argument("--json", action="store_true")
    info.add_argument("--asm", action="store_true", help="also print the ISA (ocloc disasm)")
    info.add_argument("--target", default=None, help="device to decode for (default: the one the zebin names)")
    report = commands.add_parser("kernel-report", help="compile target x config, one table of ISA counts")
    ReportOptions.add_arguments(report)  # what changes the report: one record (offline/report_model.py)
    report.add_argument("--format", default="md", choices=["md", "json", "html", "none"])
    report.add_argument("--save", default=None, help="also write the JSON report to this file")
    report.add_argument("--watch", action="store_true", help="serve the per-line view; recompile on save")
    report.add_argument("--port", default="0", help="--watch: the port on 127.0.0.1 (0: a free one)")
    report.add_argument("--launched-by-as", default=None, help=argparse.SUPPRESS)  # the host's path of the script
    args = parser.parse_args(argv)

    def run() -> int:
        if args.command == "compile":
            return run_compile(
                kernel=args.kernel,
                targets=[args.target],  # run_compile splits the list (xpukit.targets.split_targets)
                out_dir=Path(args.out),
                signature=args.signature,
                constexprs=args.constexpr,
                num_warps=args.num_warps,
                asm=args.asm,
            )
        if args.command == "kernel-report":
            options = ReportOptions.from_args(args)
            if not options.targets:
                options = dataclasses.replace(options, targets=(DEFAULT_TARGET,))
            if args.watch and options.launched_by is not None:
                raise UsageError(
                    "--launched-by and --watch both given", "drop one: the watch compiles the declared configs"
                )
            if args.watch:
                from xpukit.runtime.kernels.watch import watch_report

                if args.format != "md":  # the watch serves its own page: the format would be dropped without a word
                    raise UsageError(
                        f"--watch serves the per-line page and prints no report; --format {args.format} has nothing "
                        "to format",
                        f"drop --format {args.format}, or drop --watch to print the report once",
                    )
                return watch_report(options, port_number(args.port))
            if args.port != "0":
                port_number(args.port)  # a bad one is refused even where it is not used
            save = Path(args.save) if args.save else None
            return run_kernel_report(options, args.format, save, args.launched_by_as)
        return run_zebin_info(Path(args.file), as_json=args.json, asm=args.asm, target=args.target)

    # The kit's one error boundary (xpukit/errors.py). Its lines are not cut: they name the files the
    # user gave, whole (a zebin's path, the device it was built for), and nothing here prints a log.
    return guard(run, debug=args.debug, max_chars=None)


if __name__ == "__main__":
    sys.exit(main())
