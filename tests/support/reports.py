"""Kernel reports as tests write them: a report's JSON with only the fields a test is about,
completed with what every report has and read through the kit's own records (report_model), so a
test's report is checked as a stored one is."""

from __future__ import annotations

from typing import Any

from xpukit.runtime.offline.counts import SEND_KINDS
from xpukit.runtime.offline.report_model import SCHEMA, Report


def counts(instructions: int = 7, **changes: Any) -> dict[str, Any]:
    """A row's or a line's counts as JSON: one global load and store, the rest zero."""
    sends = dict.fromkeys(SEND_KINDS, 0) | {"global_load": 1, "global_store": 1}
    base = {"instructions": instructions, "sends": sends, "dpas": 0, "math": 0, "moves": 0, "control_flow": 0}
    return base | {"barriers": 0, "fma": 0, "alu": 0} | changes


def as_report(data: dict[str, Any]) -> Report:
    """``data`` completed (kernel, source, ocloc, targets and configs from its rows, the schema) and
    read as a Report."""
    rows = data.get("rows", [])
    full: dict[str, Any] = {
        "kernel": "k",
        "source": "/k.py",
        "ocloc": "ocloc",
        "targets": list(dict.fromkeys(r["target"] for r in rows)),
        "configs": [{"label": c} for c in dict.fromkeys(r["config"] for r in rows)],
        "schema": SCHEMA,
    } | data
    full["configs"] = [{"constexprs": {}, "options": {}} | c for c in full["configs"]]
    return Report.from_dict(full)


def report_of(
    kernel: str,
    targets: list[str],
    configs: list[str] | tuple[str, ...] = (),
    *,
    signature: str | None = None,
    constexprs: tuple[str, ...] = (),
    lines: bool = False,
    fresh: bool = False,
    launches: Any = (),
    baseline_config: str | None = None,
    baseline_target: str | None = None,
) -> dict[str, Any]:
    """A real report (in the image: Triton and ocloc) as the JSON the kit prints."""
    from xpukit.runtime.kernels.kernel_report import build_report
    from xpukit.runtime.offline.report_model import ReportOptions

    options = ReportOptions(
        kernel,
        targets=tuple(targets),
        configs=tuple(configs),
        signature=signature,
        constexprs=constexprs,
        lines=lines,
        baseline_config=baseline_config,
        baseline_target=baseline_target,
    )
    return build_report(options, fresh=fresh, launches=launches).to_dict()
