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
import tempfile
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
from xpukit.runtime.kernels.launched_by import record_launches
from xpukit.runtime.offline.isa import IsaCounts, code_bytes, parse_isa, tally
from xpukit.runtime.offline.lines import NO_LINE_INFO, SourceFiles, attribute, kernel_source, read_line_table
from xpukit.runtime.offline.ocloc import AUTO_GRF_FLAG, LARGE_GRF_FLAG, RETRY_RULE, check_grf_mode, find_ocloc
from xpukit.runtime.offline.report_format import format_html, format_markdown
from xpukit.runtime.offline.specialization import Specialization, for_signature, unknown_block_io
from xpukit.runtime.offline.zebin import read_zebin
from xpukit.targets import FAMILIES, check_limits, occupancy, split_targets

# Compile options a config may set besides the kernel's constexprs (triton.Config's fields).
OPTION_KEYS = ("num_warps", "num_stages", "grf_mode")


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    label: str
    constexprs: dict[str, Any]
    options: dict[str, Any]
    specialization: Specialization | None = None  # None: the signature's (declared hints or the default)
    signature: dict[str, str] | None = None  # a launch's own argument types (None: the given signature)


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
    # the target limits this row exceeds; None: a device without the kit's figures (not checked)
    limits: list[str] | None = dataclasses.field(default_factory=list)
    grf_rule: str = ""  # which GRF rule decided the row's GRF count
    spills: dict[str, Any] | None = None  # bytes_per_thread, n_spills (upstream's unit), rule
    occupancy: dict[str, Any] | None = None  # xpukit.targets.occupancy
    lines: list[dict[str, Any]] | None = None  # with --lines: per source line, or None
    line_info: str = ""  # why a --lines row has no lines ("no line information")
    specialization: dict[str, Any] | None = None  # Specialization.to_dict(): what the compile knew of the arguments
    warnings: list[str] = dataclasses.field(default_factory=list)  # what the row's code suggests is off

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
    values = parse_constexprs([text], words=("grf_mode",))  # grf_mode=large as typed
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
    launches: Sequence[KernelConfig] = (),
) -> dict[str, Any]:
    """Compile every target x config; return the report as a JSON-ready dict.
    ``lines``: each row also gets its per-source-line counts; ``fresh``: import the kernel's file again;
    ``launches``: the configs a script's launches compiled (``--launched-by``), instead of ``configs``."""
    spec = load_kernel(kernel, fresh=fresh)
    jit = _jit_function(spec.fn)
    sig_text = signature if signature is not None else spec.signature
    chosen = list(launches)
    if not sig_text and not chosen:
        raise XpukitError(
            f"no signature for {spec.name}",
            "pass --signature 'x:*fp32,n:i32', declare it in XPUKIT_KERNELS or use --launched-by SCRIPT",
        )
    types, signature_spec = for_signature(sig_text or "", getattr(jit, "params", ()))
    base = {**spec.constexprs, **parse_constexprs(list(constexprs))}
    constexpr_names = [n for n in jit.arg_names if n not in types or n in base]
    if not chosen:
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
    block_io = _uses_block_io(spec.snapshot)
    for cfg in chosen:
        options = {"generate_native_code": True, **cfg.options}
        special = cfg.specialization or signature_spec
        cfg_types = cfg.signature if cfg.signature is not None else types
        consts = {**base, **cfg.constexprs, **special.constants()}
        builds = build_targets(
            jit,
            {k: v for k, v in cfg_types.items() if k not in consts},
            consts,
            presets,
            options,
            tool,
            asm=True,
            divisible=[n for n in special.divisibility if n not in consts],
        )
        sources = SourceFiles({str(spec.path): spec.snapshot})
        for build in builds:
            row = _report_cell(build, cfg, sources if lines else None, spec.path)
            row.specialization = special.to_dict()
            if block_io:
                row.warnings += _gather_warning(row, build, special, cfg_types, list(consts))
            cells[(build.target, cfg.label)] = row
    rows = [cells[(t, c.label)] for t in names for c in chosen]
    body, first = inspect.getsourcelines(jit.fn)
    report: dict[str, Any] = {
        "kernel": spec.name,
        "source": str(spec.path),
        "kernel_source": kernel_source(spec.snapshot, spec.path, first, len(body)),
        "lines": lines,
        "ocloc": tool.describe(),
        "targets": names,
        "configs": [dataclasses.asdict(c) for c in chosen],
        "rows": [r.to_dict() for r in rows],
    }
    if spec.changed_since_import():
        report["source_changed"] = True  # saved during the compile: the lines show the text compiled
    return report


_BLOCK_IO_CALLS = (b"make_block_ptr", b"make_tensor_descriptor")


def _uses_block_io(source: bytes) -> bool:
    return any(call in source for call in _BLOCK_IO_CALLS)


def _gather_warning(
    row: ReportRow, build: TargetBuild, special: Specialization, types: dict[str, str], constexprs: list[str]
) -> list[str]:
    """A block-pointer kernel whose loads became gathers on a family with 2D block IO: the likely
    cause is what the compile did not know (alignment, divisibility, unit strides)."""
    if row.counts is None or not build.preset.has_subgroup_2d_block_io:
        return []
    sends = row.counts.sends
    if sends.get("block2d_load", 0) or not sends.get("global_load", 0):
        return []
    unknown = unknown_block_io(special, types, constexprs)
    gathers = f"block-pointer loads compiled as gathers ({sends['global_load']} global loads, no 2D block load)"
    if not unknown:
        return [f"{gathers} although every argument's alignment, divisibility or unit stride is known"]
    if special.source == "launch":
        fix = "a launch with 16-aligned arrays, sizes and leading strides divisible by 16 and unit strides of 1"
    else:
        fix = "declare :16 for 16-aligned pointers and sizes or strides divisible by 16, :1 for unit strides"
    return [f"{gathers}: nothing known of {', '.join(unknown)} ({fix}; or --launched-by SCRIPT)"]


def launch_configs(kernel: str, script: Path, script_args: Sequence[str]) -> list[KernelConfig]:
    """The configs a script's launches compiled: ``launch 1``, ``launch 2``, ... (``launched_by``)."""
    path, _, name = kernel.rpartition(":")
    with tempfile.TemporaryDirectory(prefix="xpukit-launches-") as work:
        records = record_launches(Path(path).resolve(), name, Path(script), script_args, Path(work))
    return [
        KernelConfig(
            f"launch {i}",
            dict(r["constexprs"]),
            dict(r["options"]),
            Specialization.from_dict(r["specialization"]),
            dict(r["types"]),
        )
        for i, r in enumerate(records, 1)
    ]


def _report_cell(
    build: TargetBuild, cfg: KernelConfig, sources: SourceFiles | None = None, kernel_path: Path | None = None
) -> ReportRow:
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
    # ocloc was rerun with the 256-GRF flag (Triton appends it, also after grf_mode small's 128-GRF
    # flag); whether IGC honoured it is the zebin's GRF count, which _grf_rule reads.
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
            _attribute_lines(row, build, meta.name, info.text_size, instructions, sources, kernel_path)
    return row


def _grf_rule(row: ReportRow) -> str:
    """Which rule set the row's GRF count, in a few words."""
    if row.grf_retry:
        if row.grf is not None and row.grf < 256:
            # grf_mode small: Triton 3.3 appends the 256-GRF flag after the 128-GRF one and IGC keeps
            # the 128, so the flags alone would claim a retry that never took effect.
            still = ": still spills" if row.scratch_bytes else ""
            return f"asked for 256, IGC kept {row.grf}{still} ({RETRY_RULE})"
        return f"retried at 256 GRF: spills at 128 ({RETRY_RULE})"
    if row.grf_mode == "large" or LARGE_GRF_FLAG in row.build_flags:
        return "grf_mode large: 256 GRF asked"
    if row.grf_mode == "auto" or AUTO_GRF_FLAG in row.build_flags:
        return f"grf_mode auto: IGC chose {row.grf} GRF"
    if row.scratch_bytes:
        return f"spills at {row.grf} GRF, no retry"
    return f"no spills at {row.grf} GRF: no retry"


def _attribute_lines(
    row: ReportRow,
    build: TargetBuild,
    kernel: str,
    text_size: int,
    instructions: list[Any],
    sources: SourceFiles,
    kernel_path: Path | None = None,
) -> None:
    table = read_line_table(build.zebin, kernel)
    if table is None:
        row.line_info = NO_LINE_INFO
        return
    if kernel_path is not None and Path(table.kernel_file).resolve() != kernel_path.resolve():
        # Never another file's lines shown as this one's (a cache entry of an identical kernel elsewhere)
        row.line_info = f"{NO_LINE_INFO} for {kernel_path.name}: the zebin's line table names {table.kernel_file}"
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
    launched_by: Path | None = None,
    script_args: Sequence[str] = (),
) -> int:
    """Print the report. Returns 0, or 1 when some cell failed (its error is in the table and on stderr).

    ``save``: also write the JSON report there (whole or not at all), for the host's report cache;
    ``output_format`` "none" then prints no table (the host prints it)."""
    if output_format not in ("md", "json", "html", "none"):
        raise XpukitError(f"unknown format {output_format!r}", "use --format md, json or html")
    if launched_by is not None and configs:
        raise XpukitError("--launched-by and --config both given", "drop --config: the launches are the configs")
    launches = launch_configs(kernel, launched_by, script_args) if launched_by is not None else []
    report = build_report(kernel, targets, configs, signature, constexprs, lines=lines, launches=launches)
    if save is not None:
        write_whole(Path(save), (json.dumps(report, indent=2) + "\n").encode())
    if output_format != "none":
        formatter = {"json": lambda r: json.dumps(r, indent=2), "html": format_html, "md": format_markdown}
        print(formatter[output_format](report))
    failed = [r for r in report["rows"] if r["error"]]
    for row in failed:
        print(f"xpukit: error: {row['target']} {row['config']}: {row['error']}", file=sys.stderr)
    return 1 if failed else 0
