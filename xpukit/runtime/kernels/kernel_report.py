"""``kernel-report``: compile a kernel for every target x config and show what changes, side by side.

Each cell of the report comes from a real compile (Triton -> SPIR-V -> ocloc zebin), the zebin's own
``.ze_info`` (SIMD, GRF, per-thread scratch and private space), Triton's metadata (SLM bytes, build
flags: the 256-GRF retry) and the ISA ``ocloc disasm`` writes (instructions, sends by kind, spill and
fill traffic, DPAS, FMA, math, ALU, moves, control flow, barriers). Each row is checked against the
target's limits (``xpukit.targets.LIMITS``). A config that fails to compile gets an error row; the
others are still reported. The text and ``--diff`` live in ``report_format`` (no Triton needed).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime.kernels.compile import (
    TargetBuild,
    build_targets,
    load_kernel,
    parse_constexprs,
    resolve_targets,
    root_cause,
    write_whole,
)
from xpukit.runtime.offline.isa import IsaCounts, code_bytes, parse_isa, tally
from xpukit.runtime.offline.lines import NO_LINE_INFO, SourceFiles, attribute, kernel_source, read_line_table
from xpukit.runtime.offline.ocloc import AUTO_GRF_FLAG, LARGE_GRF_FLAG, RETRY_RULE, check_grf_mode, find_ocloc
from xpukit.runtime.offline.report_format import format_html, format_markdown
from xpukit.runtime.offline.zebin import read_zebin
from xpukit.runtime.triton.tritonc import parse_signature
from xpukit.targets import FAMILIES, check_limits, occupancy, split_targets

# Compile options a config may set besides the kernel's constexprs (triton.Config's fields).
OPTION_KEYS = ("num_warps", "num_stages", "grf_mode")


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    label: str
    constexprs: dict[str, Any]
    options: dict[str, Any]


@dataclasses.dataclass
class ReportRow:
    target: str
    config: str
    error: str | None = None
    simd: int | None = None
    grf: int | None = None
    grf_mode: str = "default"  # as requested (triton's grf_mode option)
    grf_retry: bool = False  # ocloc was rerun with -cl-intel-256-GRF-per-thread after spills
    sub_group: int | None = None  # threads_per_warp
    work_group: int | None = None  # num_warps x threads_per_warp work-items
    scratch_bytes: int | None = None  # per-thread scratch space (the zebin's), not spill traffic
    private_bytes: int | None = None
    slm_bytes: int | None = None  # per work-group
    build_flags: str = ""
    counts: IsaCounts | None = None
    limits: list[str] = dataclasses.field(default_factory=list)  # the target limits this row exceeds
    grf_rule: str = ""  # which GRF rule decided the row's GRF count
    spills: dict[str, Any] | None = None  # bytes_per_thread, n_spills (upstream's unit), rule
    occupancy: dict[str, Any] | None = None  # xpukit.targets.occupancy
    lines: list[dict[str, Any]] | None = None  # with --lines: per source line, or None
    line_info: str = ""  # why a --lines row has no lines ("no line information")

    def to_dict(self) -> dict[str, Any]:
        # Shallow: every field but counts is already JSON-ready (lines are dicts), and asdict's deep
        # copy of a --lines row's instructions cost about 0.05 s of each --watch rebuild.
        data = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        data["counts"] = self.counts.to_dict() if self.counts else None
        return data


def _jit_function(fn: Any) -> Any:
    """The JITFunction under ``triton.autotune`` / ``triton.heuristics`` wrappers."""
    while not hasattr(fn, "src") and hasattr(fn, "fn"):
        fn = fn.fn
    return fn


def parse_config(text: str, constexpr_names: Sequence[str]) -> KernelConfig:
    """``"BLOCK=256,num_warps=4"`` -> a config; keys are the kernel's constexprs or OPTION_KEYS."""
    values = parse_constexprs([text])
    if not values:
        raise XpukitError(f"empty config {text!r}", "write NAME=VALUE pairs, e.g. BLOCK=256,num_warps=4")
    constexprs, options = {}, {}
    for key, value in values.items():
        if key == "grf_mode":
            options[key] = check_grf_mode(value)
        elif key in OPTION_KEYS:
            options[key] = value
        elif key in constexpr_names:
            constexprs[key] = value
        else:
            raise XpukitError(
                f"unknown config key {key!r} in {text!r}",
                f"use a constexpr of the kernel ({', '.join(constexpr_names) or 'none'}) or {', '.join(OPTION_KEYS)}",
            )
    return KernelConfig(",".join(f"{k}={v}" for k, v in values.items()), constexprs, options)


def autotune_configs(fn: Any) -> list[KernelConfig]:
    """The configs of a ``triton.autotune`` list (empty when ``fn`` is not autotuned)."""
    configs = []
    for cfg in getattr(fn, "configs", None) or []:
        options = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
        label = ",".join([*(f"{k}={v}" for k, v in cfg.kwargs.items()), *(f"{k}={v}" for k, v in options.items())])
        configs.append(KernelConfig(label, dict(cfg.kwargs), options))
    return configs


def build_report(
    kernel: str,
    targets: Sequence[str],
    configs: Sequence[str],
    signature: str | None = None,
    constexprs: Sequence[str] = (),
    lines: bool = False,
    fresh: bool = False,
) -> dict[str, Any]:
    """Compile every target x config; return the report as a JSON-ready dict.
    ``lines``: each row also gets its per-source-line counts; ``fresh``: import the kernel's file again."""
    spec = load_kernel(kernel, fresh=fresh)
    jit = _jit_function(spec.fn)
    sig_text = signature if signature is not None else spec.signature
    if not sig_text:
        raise XpukitError(
            f"no signature for {spec.name}", "pass --signature 'x:*fp32,n:i32' or declare it in XPUKIT_KERNELS"
        )
    sig = parse_signature(sig_text)
    base = {**spec.constexprs, **parse_constexprs(list(constexprs))}
    constexpr_names = [n for n in jit.arg_names if n not in sig or n in base]
    chosen = [parse_config(c, constexpr_names) for c in configs] or autotune_configs(spec.fn)
    if not chosen:
        chosen = [KernelConfig("declared", {}, {})]
    items = [t for item in targets for t in item.split(",") if t.strip()]
    if not items:
        raise XpukitError(
            "no target given", f"pass --target pvc,acm-g10 (or all: {', '.join(f.name for f in FAMILIES)})"
        )
    tool = find_ocloc()
    presets = resolve_targets(tool, split_targets(items))  # an unknown target fails before any compile
    names = list(presets)
    cells: dict[tuple[str, str], ReportRow] = {}
    for cfg in chosen:
        options = {"generate_native_code": True, **cfg.options}
        builds = build_targets(
            jit,
            {k: v for k, v in sig.items() if k not in {**base, **cfg.constexprs}},
            {**base, **cfg.constexprs},
            presets,
            options,
            tool,
            asm=True,
        )
        sources = SourceFiles()
        for build in builds:
            cells[(build.target, cfg.label)] = _report_cell(build, cfg, sources if lines else None)
    rows = [cells[(t, c.label)] for t in names for c in chosen]
    body, first = inspect.getsourcelines(jit.fn)
    return {
        "kernel": spec.name,
        "source": str(spec.path),
        "kernel_source": kernel_source(Path(spec.path), first, len(body)),
        "lines": lines,
        "ocloc": tool.describe(),
        "targets": names,
        "configs": [dataclasses.asdict(c) for c in chosen],
        "rows": [r.to_dict() for r in rows],
    }


def _report_cell(build: TargetBuild, cfg: KernelConfig, sources: SourceFiles | None = None) -> ReportRow:
    row = ReportRow(build.target, cfg.label)
    if build.error is not None:
        exc = build.error
        if isinstance(exc, XpukitError):
            row.error = exc.one_line()
        else:
            row.error = f"failed to compile: {root_cause(exc)[:100]} (fix: change this config or the kernel)"
        if build.ocloc is None:
            return row
    assert build.ocloc is not None
    meta = build.compiled.metadata
    info = read_zebin(build.zebin).kernel(meta.name)
    row.simd, row.grf = info.simd_size, info.grf_count
    row.scratch_bytes, row.private_bytes = info.spill_size, info.private_size
    row.slm_bytes = meta.shared
    row.build_flags = build.ocloc.build_flags
    mode = cfg.options.get("grf_mode", getattr(meta, "grf_mode", None))
    row.grf_mode = mode if isinstance(mode, str) and mode else "default"  # 3.3 defaults to a tuple of all modes
    row.grf_retry = LARGE_GRF_FLAG in row.build_flags and row.grf_mode != "large"
    row.sub_group = meta.threads_per_warp
    row.work_group = meta.num_warps * meta.threads_per_warp
    row.limits = check_limits(build.target, row.slm_bytes, row.grf, row.simd, row.work_group)
    row.grf_rule = _grf_rule(row)
    if row.simd:
        row.spills = {
            "bytes_per_thread": row.scratch_bytes or 0,
            # Upstream's unit (#7950): Level Zero's spillMemSize / (4 x sub-group size), truncated
            "n_spills": (row.scratch_bytes or 0) // (4 * row.simd),
            "rule": RETRY_RULE,
        }
        if row.grf and row.work_group:
            row.occupancy = occupancy(
                build.target, row.simd, row.grf, row.work_group, row.slm_bytes or 0, info.barrier_count
            )
    if build.isa is not None:
        instructions = parse_isa(build.isa)
        row.counts = tally(instructions)
        if sources is not None:
            _attribute_lines(row, build, meta.name, info.text_size, instructions, sources)
    return row


def _grf_rule(row: ReportRow) -> str:
    """Which rule set the row's GRF count, in a few words."""
    if row.grf_retry:
        return f"retried at 256 GRF: spills at 128 ({RETRY_RULE})"
    if row.grf_mode == "large" or LARGE_GRF_FLAG in row.build_flags:
        return "grf_mode large: 256 GRF asked"
    if row.grf_mode == "auto" or AUTO_GRF_FLAG in row.build_flags:
        return f"grf_mode auto: IGC chose {row.grf} GRF"
    if row.scratch_bytes:
        return f"spills at {row.grf} GRF, no retry"
    return f"no spills at {row.grf} GRF: no retry"


def _attribute_lines(
    row: ReportRow, build: TargetBuild, kernel: str, text_size: int, instructions: list[Any], sources: SourceFiles
) -> None:
    table = read_line_table(build.zebin, kernel)
    if table is None:
        row.line_info = NO_LINE_INFO
        return
    span = code_bytes(instructions)
    if not 0 <= text_size - span < 16:  # the section may end in a few bytes of zero padding
        row.line_info = f"{NO_LINE_INFO}: the disassembly spans {span} bytes, the kernel's text {text_size}"
        return
    row.lines = [line.to_dict() for line in attribute(instructions, table, sources)]


def run_kernel_report(
    kernel: str,
    targets: Sequence[str],
    configs: Sequence[str],
    output_format: str = "md",
    signature: str | None = None,
    constexprs: Sequence[str] = (),
    save: Path | None = None,
    lines: bool = False,
) -> int:
    """Print the report. Returns 0, or 1 when some cell failed (its error is in the table and on stderr).

    ``save``: also write the JSON report there (whole or not at all), for the host's report cache;
    ``output_format`` "none" then prints no table (the host prints it)."""
    if output_format not in ("md", "json", "html", "none"):
        raise XpukitError(f"unknown format {output_format!r}", "use --format md, json or html")
    report = build_report(kernel, targets, configs, signature, constexprs, lines=lines)
    if save is not None:
        write_whole(Path(save), (json.dumps(report, indent=2) + "\n").encode())
    if output_format != "none":
        formatter = {"json": lambda r: json.dumps(r, indent=2), "html": format_html, "md": format_markdown}
        print(formatter[output_format](report))
    failed = [r for r in report["rows"] if r["error"]]
    for row in failed:
        print(f"xpukit: error: {row['target']} {row['config']}: {row['error']}", file=sys.stderr)
    return 1 if failed else 0
