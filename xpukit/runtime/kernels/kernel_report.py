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
import os
import shlex
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime.kernels.compile import (
    TargetBuild,
    build_targets,
    jit_function,
    load_kernel,
    parse_constexprs,
    resolve_targets,
)
from xpukit.runtime.kernels.launched_by import record_launches
from xpukit.runtime.offline.baseline import apply_baseline
from xpukit.runtime.offline.isa import code_bytes, parse_isa, tally
from xpukit.runtime.offline.line_flow import add_flow
from xpukit.runtime.offline.lines import NO_LINE_INFO, SourceFiles, attribute, kernel_source, read_line_table
from xpukit.runtime.offline.ocloc import AUTO_GRF_FLAG, LARGE_GRF_FLAG, RETRY_RULE, check_grf_mode, find_ocloc
from xpukit.runtime.offline.report_format import format_html, format_markdown
from xpukit.runtime.offline.report_model import KernelConfig, Occupancy, Report, ReportOptions, Row, Spills
from xpukit.runtime.offline.specialization import Specialization, for_signature, unknown_block_io
from xpukit.runtime.offline.zebin import read_zebin
from xpukit.runtime.scratch import write_whole
from xpukit.targets import FAMILIES, check_limits, occupancy, split_targets

# Compile options a config may set besides the kernel's constexprs (triton.Config's fields).
OPTION_KEYS = ("num_warps", "num_stages", "grf_mode")


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


def build_report(options: ReportOptions, *, fresh: bool = False, launches: Sequence[KernelConfig] = ()) -> Report:
    """Compile every target x config of ``options``.
    ``fresh``: import the kernel's file again; ``launches``: the configs a script's launches compiled
    (``--launched-by``), instead of ``options.configs``."""
    spec = load_kernel(options.kernel, fresh=fresh)
    jit = jit_function(spec.fn)
    sig_text = options.signature if options.signature is not None else spec.signature
    chosen = list(launches)
    if not sig_text and not chosen:
        raise XpukitError(
            f"no signature for {spec.name}",
            "pass --signature 'x:*fp32,n:i32', declare it in XPUKIT_KERNELS or use --launched-by SCRIPT",
        )
    types, signature_spec = for_signature(sig_text or "", getattr(jit, "params", ()))
    base = {**spec.constexprs, **parse_constexprs(list(options.constexprs))}
    constexpr_names = [n for n in jit.arg_names if n not in types or n in base]
    if not chosen:
        chosen = [parse_config(c, constexpr_names) for c in options.configs] or autotune_configs(spec.fn)
    if not chosen:
        chosen = [KernelConfig("declared", {}, {})]
    if not launches:  # a launch binds every argument; a typed signature may not
        _check_arguments(spec.name, list(jit.arg_names), types, base, chosen, signature_spec)
    items = [t for item in options.targets for t in item.split(",") if t.strip()]
    if not items:
        raise XpukitError(
            "no target given", f"pass --target pvc,acm-g10 (or all: {', '.join(f.name for f in FAMILIES)})"
        )
    tool = find_ocloc()
    presets = resolve_targets(tool, split_targets(items))  # an unknown target fails before any compile
    names = list(presets)
    body, first = inspect.getsourcelines(jit.fn)
    # Triton's source (and a compile error's line numbers) start at the ``def``, after the decorators.
    def_at = next((i for i, text in enumerate(body) if text.lstrip().startswith(("def ", "async def "))), 0)
    where = _KernelLines(spec.path, first + def_at, str(getattr(jit, "src", "") or "".join(body[def_at:])))
    sources = SourceFiles({str(spec.path): spec.snapshot}, since=spec.imported_at)
    compile_cells = _CellCompiler(spec, jit, types, signature_spec, base, tool, options.lines, where, sources)
    cells: dict[tuple[str, str], Row] = {}
    for cfg in chosen:
        cells.update(compile_cells(cfg, presets))
    source = kernel_source(spec.snapshot, spec.path, first, len(body))
    if options.baseline_config or options.baseline_target:
        base_cfg = parse_config(options.baseline_config, constexpr_names) if options.baseline_config else None
        base_presets = (
            resolve_targets(tool, split_targets([options.baseline_target])) if options.baseline_target else {}
        )
        base_target = next(iter(base_presets), None)
        for cfg in chosen:
            against = base_cfg or cfg
            wanted = base_presets or presets
            missing = {t: p for t, p in wanted.items() if (t, against.label) not in cells}
            found = {**cells, **(compile_cells(against, missing) if missing else {})}
            for target in names:
                row = cells[(target, cfg.label)]
                base_row = found[(base_target or target, against.label)]
                apply_baseline(row, base_row, source, source)
    return Report(
        kernel=spec.name,
        source=str(spec.path),
        ocloc=tool.describe(),
        targets=names,
        configs=chosen,
        rows=[cells[(t, c.label)] for t in names for c in chosen],
        kernel_source=source,
        lines=options.lines,
        # saved during the compile: the lines show the text compiled, and the report is not stored;
        # a helper's file saved since the import: its lines are not the text compiled
        source_changed=spec.changed_since_import() or bool(sources.changed),
    )


def _check_arguments(
    kernel: str, args: list[str], types: dict[str, str], constexprs: dict[str, Any],
    configs: Sequence[KernelConfig], special: Specialization,
) -> None:  # fmt: skip
    """Once, before any compile: every name the signature or the constexprs give is an argument of
    the kernel, and every argument has a type or a value (in some config); else each row of each
    target would carry the same error."""
    extra = [n for n in (*types, *constexprs) if n not in args]
    if extra:
        raise XpukitError(
            f"kernel {kernel} has no argument(s) {', '.join(extra)}", f"its arguments are: {', '.join(args)}"
        )
    given = {*types, *constexprs, *special.equal_1}
    missing = [n for n in args if n not in given and all(n not in c.constexprs for c in configs)]
    if missing:
        raise XpukitError(
            f"kernel {kernel}: no type or value for {', '.join(missing)}",
            f"add NAME:TYPE to the signature or --constexpr NAME=VALUE (its arguments are: {', '.join(args)})",
        )


@dataclasses.dataclass
class _CellCompiler:
    """Compiles one config for some targets into report rows (the report's configs and its baseline)."""

    spec: Any  # compile.KernelSpec
    jit: Any
    types: dict[str, str]
    signature_spec: Specialization
    constexprs: dict[str, Any]
    tool: Any  # ocloc.Ocloc
    lines: bool
    where: _KernelLines
    sources: SourceFiles  # one per report: every config's lines read each file once

    def __call__(self, cfg: KernelConfig, presets: dict[str, Any]) -> dict[tuple[str, str], Row]:
        compile_options = {"generate_native_code": True, **cfg.options}
        special = cfg.specialization or self.signature_spec
        cfg_types = cfg.signature if cfg.signature is not None else self.types
        consts = {**self.constexprs, **cfg.constexprs, **special.constants()}
        sources = self.sources
        done: dict[str, Row] = {}

        def report_cell(build: TargetBuild) -> None:
            # In the worker that built it, while other targets still build: the disassembly's join
            # and --lines' iga64 run overlap the builds (watch latency over eleven families).
            done[build.target] = _report_cell(build, cfg, sources if self.lines else None, self.spec.path, self.where)

        builds = build_targets(
            self.jit,
            {k: v for k, v in cfg_types.items() if k not in consts},
            consts,
            presets,
            compile_options,
            self.tool,
            asm=True,
            divisible=[n for n in special.divisibility if n not in consts],
            on_built=report_cell,
        )
        block_io = _uses_block_io(self.spec.snapshot)
        cells = {}
        for build in builds:
            if build.target not in done:  # its group's SPIR-V failed: no ocloc ran
                report_cell(build)
            row = done[build.target]
            row.specialization = special
            if block_io:
                row.warnings += _gather_warning(row, build, special, cfg_types, list(consts))
            cells[(build.target, cfg.label)] = row
        return cells


_BLOCK_IO_CALLS = (b"make_block_ptr", b"make_tensor_descriptor")


def _uses_block_io(source: bytes) -> bool:
    return any(call in source for call in _BLOCK_IO_CALLS)


def _gather_warning(
    row: Row, build: TargetBuild, special: Specialization, types: dict[str, str], constexprs: list[str]
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


def launch_configs(
    kernel: str, script: Path, script_args: Sequence[str], shown: str | None = None
) -> list[KernelConfig]:
    """The configs a script's launches compiled: ``launch 1``, ``launch 2``, ... (``launched_by``).
    ``shown``: the script as the user gave it (the host's path, where ``script`` is the image's)."""
    path, _, name = kernel.rpartition(":")
    with tempfile.TemporaryDirectory(prefix="xpukit-launches-") as work:
        records = record_launches(Path(path).resolve(), name, Path(script), script_args, Path(work), shown)
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


@dataclasses.dataclass(frozen=True)
class _KernelLines:
    """Where the kernel's ``def`` sits in its file: Triton numbers a compile error's line from it."""

    path: Path
    first: int  # the file's line of the kernel's ``def``
    body: str  # the kernel's source as Triton reads it (from the ``def``)


def compile_error(exc: BaseException, where: _KernelLines | None = None) -> str:
    """A compile failure whole, in one line: Triton's reason with the kernel file's own line and
    column (Triton says ``at 7:15`` counting from the ``def``) and that line's text."""
    chain = [exc]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    inner = chain[-1]
    reason = getattr(inner, "error_message", None) or " ".join(
        ln.strip() for ln in str(inner).splitlines() if ln.strip() and not ln.strip().startswith("^")
    )
    text = f"{type(inner).__name__}: {reason}" if reason else type(inner).__name__
    # The outermost CompilationError on the kernel's own source names the kernel's line.
    for error in chain:
        node, src = getattr(error, "node", None), getattr(error, "src", None)
        lineno = getattr(node, "lineno", None)
        if where is None or not isinstance(lineno, int) or src is None:
            continue
        if textwrap.dedent(src).strip() != textwrap.dedent(where.body).strip():
            continue  # a @triton.jit helper's source, not the kernel's: its own numbering
        line = where.first + lineno - 1
        source = where.body.splitlines()[lineno - 1].strip() if 0 < lineno <= len(where.body.splitlines()) else ""
        col = getattr(node, "col_offset", 0) + 1
        shown = f" ({source})" if source else ""
        return (
            f"{where.path.name}:{line}:{col}: {text}{shown}"  # the file the user named (its path differs in the image)
        )
    return text


def _report_cell(
    build: TargetBuild,
    cfg: KernelConfig,
    sources: SourceFiles | None = None,
    kernel_path: Path | None = None,
    where: _KernelLines | None = None,
) -> Row:
    row = Row(build.target, cfg.label)
    if build.error is not None:
        exc = build.error
        if isinstance(exc, XpukitError):
            row.error = exc.one_line()
        else:
            row.error = f"failed to compile: {compile_error(exc, where)} (fix: change this config or the kernel)"
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
        row.spills = Spills(
            bytes_per_thread=row.scratch_bytes or 0,
            # Upstream's unit (#7950): Level Zero's spillMemSize / (4 x sub-group size), truncated
            n_spills=(row.scratch_bytes or 0) // (4 * row.simd),
            rule=RETRY_RULE,
        )
        if row.grf and row.work_group:
            mode = cfg.options.get("grf_mode") if isinstance(cfg.options.get("grf_mode"), str) else None
            if LARGE_GRF_FLAG in row.build_flags:
                mode = "large"  # Triton asked for 256 GRF (grf_mode large, or the spill retry): not IGC's choice
            occ = occupancy(
                build.target, row.simd, row.grf, row.work_group, row.slm_bytes or 0, info.barrier_count, mode
            )
            row.occupancy = Occupancy.from_dict(occ) if occ is not None else None
    if build.isa is not None:
        instructions = parse_isa(build.isa)
        row.counts = tally(instructions)
        if sources is not None:
            _attribute_lines(row, build, meta.name, info.text_size, instructions, sources, kernel_path)
    return row


def _grf_rule(row: Row) -> str:
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
    row: Row,
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
    row.lines = attribute(instructions, table, sources)
    try:
        add_flow(row, build.zebin, kernel, instructions, table.kernel_file)
    except XpukitError as exc:  # the counts stand without it: say why in the row
        row.flow_info = f"no live registers, loops or stalls: {exc.one_line()}"


def check_save_path(save: Path) -> None:
    """``--save`` must be writable before anything compiles: a refused write after minutes of compiling
    loses the report."""
    folder = save.parent if str(save.parent) else Path(".")
    if save.is_dir():
        raise XpukitError(f"--save {save} is a folder", "give a file name, e.g. --save report.json")
    if not folder.is_dir():
        raise XpukitError(f"--save {save}: no folder {folder}", "create the folder first, or save elsewhere")
    if not os.access(folder, os.W_OK | os.X_OK) or (save.exists() and not os.access(save, os.W_OK)):
        raise XpukitError(f"--save {save}: {folder} is not writable here", "save to a writable folder")


def run_kernel_report(
    options: ReportOptions,
    output_format: str = "md",
    save: Path | None = None,
    script_shown: str | None = None,
) -> int:
    """Print the report. Returns 0, or 1 when some cell failed (its error is in the table and on stderr).

    ``save``: also write the JSON report there (whole or not at all), for the host's report cache;
    ``output_format`` "none" then prints no table (the host prints it); ``script_shown``: the
    ``--launched-by`` script as the user gave it."""
    if output_format not in ("md", "json", "html", "none"):
        raise XpukitError(f"unknown format {output_format!r}", "use --format md, json or html")
    if options.launched_by is not None:
        _check_launched_by(options)
    if save is not None:
        check_save_path(save)
    launches = []
    if options.launched_by is not None:
        load_kernel(options.kernel)  # a kernel the file lacks fails before the script runs (the report reuses it)
        args = split_args(options.script_args or "")
        launches = launch_configs(options.kernel, Path(options.launched_by), args, script_shown)
    report = build_report(options, launches=launches)
    data = report.to_dict()
    if save is not None:
        write_whole(Path(save), (json.dumps(data, indent=2) + "\n").encode())
    if output_format != "none":
        formatter = {"json": lambda r: json.dumps(data, indent=2), "html": format_html, "md": format_markdown}
        print(formatter[output_format](report))
    for row in report.failed:
        print(f"xpukit: error: {row.target} {row.config}: {row.error}", file=sys.stderr)
    return 1 if report.failed else 0


def _check_launched_by(options: ReportOptions) -> None:
    """The launches give the configs, types, hints and constexprs: an option that would give them
    too is refused, not dropped without a word (``--baseline-target`` compares each launch as it is)."""
    given = {
        "--config": options.configs,
        "--signature": options.signature,
        "--constexpr": options.constexprs,
        "--baseline-config": options.baseline_config,
    }
    for flag, value in given.items():
        if value:
            raise XpukitError(
                f"--launched-by and {flag} both given",
                f"drop {flag}: the script's launches give the configs, types, hints and constexprs",
            )


def split_args(text: str) -> list[str]:
    """A shell-quoted argument string as a list; unbalanced quotes are a one-line error."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise XpukitError(f"--script-args {text!r}: {exc}", "balance the quotes in --script-args") from None
