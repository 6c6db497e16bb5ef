"""``kernel-report``: compile a kernel for every target x config and show what changes, side by side.

Each cell of the report comes from a real compile (Triton -> SPIR-V -> ocloc zebin), the zebin's own
``.ze_info`` (SIMD, GRF, spill and private bytes), Triton's metadata (SLM bytes, build flags) and the
ISA ``ocloc disasm`` writes (instruction, send, DPAS, math, move, control-flow and barrier counts).
A config that fails to compile gets an error row; the others are still reported.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any

from xpukit.errors import XpukitError
from xpukit.runtime.offline.compile import load_kernel, parse_constexprs, root_cause
from xpukit.runtime.offline.isa import IsaCounts, IsaError, count_isa, disassemble
from xpukit.runtime.offline.ocloc import find_ocloc
from xpukit.runtime.offline.zebin import read_zebin
from xpukit.runtime.triton.tritonc import compile_kernel, parse_signature

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
    spill_bytes: int | None = None
    private_bytes: int | None = None
    slm_bytes: int | None = None
    build_flags: str = ""
    counts: IsaCounts | None = None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
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
        if key in OPTION_KEYS:
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
) -> dict[str, Any]:
    """Compile every target x config; return the report as a JSON-ready dict."""
    spec = load_kernel(kernel)
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
    names = list(dict.fromkeys(t.strip() for item in targets for t in item.split(",") if t.strip()))
    if not names:
        raise XpukitError("no target given", "pass --target pvc,acm-g10")
    tool = find_ocloc()
    devices = {t: tool.require_target(t) for t in names}  # an unknown target fails before any compile
    rows = []
    for target in names:
        for cfg in chosen:
            rows.append(_report_cell(jit, spec.name, sig, {**base, **cfg.constexprs}, cfg, target, devices[target]))
    return {
        "kernel": spec.name,
        "source": str(spec.path),
        "ocloc": tool.describe(),
        "targets": names,
        "configs": [dataclasses.asdict(c) for c in chosen],
        "rows": [r.to_dict() for r in rows],
    }


def _report_cell(
    jit: Any, name: str, sig: dict[str, str], cex: dict[str, Any], cfg: KernelConfig, target: str, device: str
) -> ReportRow:
    row = ReportRow(target, cfg.label)
    signature = {k: v for k, v in sig.items() if k not in cex}
    try:
        compiled = compile_kernel(jit, signature, cex, target, {"generate_native_code": True, **cfg.options})
    except XpukitError as exc:
        row.error = exc.one_line()
        return row
    except Exception as exc:
        row.error = f"failed to compile: {root_cause(exc)[:100]} (fix: change this config or the kernel)"
        return row
    zebin = compiled.asm["zebin"]
    info = read_zebin(zebin).kernel(compiled.metadata.name)
    row.simd, row.grf = info.simd_size, info.grf_count
    row.spill_bytes, row.private_bytes = info.spill_size, info.private_size
    row.slm_bytes = compiled.metadata.shared
    row.build_flags = compiled.metadata.build_flags or ""
    try:
        row.counts = count_isa(disassemble(zebin, device).kernels[info.name])
    except IsaError as exc:
        row.error = exc.one_line()
    return row


_COLUMNS = (
    ("target", lambda r, c: r["target"]),
    ("config", lambda r, c: r["config"]),
    ("SIMD", lambda r, c: r["simd"]),
    ("GRF", lambda r, c: r["grf"]),
    ("spill B", lambda r, c: r["spill_bytes"]),
    ("private B", lambda r, c: r["private_bytes"]),
    ("SLM B", lambda r, c: r["slm_bytes"]),
    ("instr", lambda r, c: c["instructions"]),
    ("global ld/st", lambda r, c: f"{c['sends']['global_load']}/{c['sends']['global_store']}"),
    ("SLM ld/st", lambda r, c: f"{c['sends']['slm_load']}/{c['sends']['slm_store']}"),
    ("2D ld/st", lambda r, c: f"{c['sends']['block2d_load']}/{c['sends']['block2d_store']}"),
    ("atomic", lambda r, c: c["sends"]["atomic"]),
    ("scratch fill/spill", lambda r, c: f"{c['sends']['scratch_fill']}/{c['sends']['scratch_spill']}"),
    ("DPAS", lambda r, c: c["dpas"]),
    ("math", lambda r, c: c["math"]),
    ("mov", lambda r, c: c["moves"]),
    ("ctrl", lambda r, c: c["control_flow"]),
    ("barrier", lambda r, c: c["barriers"]),
)


def format_markdown(report: dict[str, Any]) -> str:
    """One Markdown table: a row per target x config; failed cells say why."""
    header = [name for name, _ in _COLUMNS]
    lines = [
        f"**{report['kernel']}** ({report['ocloc']})",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    for row in report["rows"]:
        if row["counts"] is None:
            cells = [row["target"], row["config"], row["error"]] + [""] * (len(header) - 3)
        else:
            cells = ["-" if (v := get(row, row["counts"])) is None else str(v) for _, get in _COLUMNS]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def run_kernel_report(
    kernel: str,
    targets: Sequence[str],
    configs: Sequence[str],
    output_format: str = "md",
    signature: str | None = None,
    constexprs: Sequence[str] = (),
) -> int:
    """Print the report. Returns 0, or 1 when some cell failed (its error is in the table and on stderr)."""
    if output_format not in ("md", "json"):
        raise XpukitError(f"unknown format {output_format!r}", "use --format md or --format json")
    report = build_report(kernel, targets, configs, signature, constexprs)
    print(json.dumps(report, indent=2) if output_format == "json" else format_markdown(report))
    failed = [r for r in report["rows"] if r["error"]]
    for row in failed:
        print(f"xpukit: error: {row['target']} {row['config']}: {row['error']}", file=sys.stderr)
    return 1 if failed else 0
