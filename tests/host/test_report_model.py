"""The kernel report's records (xpukit/runtime/offline/report_model.py): one codec for the JSON the
kit prints and stores, and one options record for the in-image command line, its parser and the
cache key. Plain Python: no Triton, no engine."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

from tests.support.reports import as_report, counts
from xpukit.runtime.offline.report_format import row_notes
from xpukit.runtime.offline.report_model import SCHEMA, Report, ReportOptions, ReportSchemaError, Row

pytestmark = pytest.mark.unit


def _report() -> Report:
    line = {"file": "/k.py", "line": 12, "source": "    a = tl.load(x)", "counts": counts(3), "asm": [[16, "add"]]}
    row = {"target": "pvc", "config": "BLOCK=256", "simd": 16, "grf": 128, "counts": counts(9), "lines": [line]}
    row |= {"spills": {"bytes_per_thread": 0, "n_spills": 0, "rule": "r"}, "specialization": {"source": "default"}}
    row |= {"occupancy": {"threads_per_xve": 8, "threads_per_xve_max": 8, "work_groups_per_xe_core": 16,
                          "limited_by": "threads"}}  # fmt: skip
    source = {"file": "/k.py", "sha256": "0" * 64, "first": 10, "lines": ["@triton.jit"]}
    return as_report({"rows": [row], "lines": True, "kernel_source": source})


def test_json_round_trips_through_the_records():
    report = _report()
    data = json.loads(json.dumps(report.to_dict()))
    assert data["schema"] == SCHEMA and data["rows"][0]["counts"]["send_total"] == 2  # derived, written
    again = Report.from_dict(data)
    assert again == report
    row = again.rows[0]
    assert row.lines is not None and row.lines[0].asm == [(16, "add")] and row.lines[0].counts.instructions == 3
    assert row.occupancy is not None and isinstance(row.occupancy.threads_per_xve, float)
    assert row.specialization is not None and row.specialization.aligned_16 == ()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d | {"schema": 0}, "schema 0; this kit reads schema 1"),
        (lambda d: {k: v for k, v in d.items() if k != "ocloc"}, "field ocloc: expected a value"),
        (lambda d: d | {"targets": "pvc"}, "field targets: expected a list"),
        (lambda d: d | {"rows": [d["rows"][0] | {"grf": True}]}, "rows[0].grf: expected an integer"),
        (lambda d: d | {"rows": [d["rows"][0] | {"lines": [{"file": 3}]}]}, "rows[0].lines[0].file"),
        (lambda d: d | {"rows": [d["rows"][0] | {"counts": {"instructions": 1}}]}, "rows[0].counts.sends"),
    ],
)
def test_a_report_that_does_not_fit_is_one_error_naming_the_field(change, says):
    data = change(_report().to_dict())
    with pytest.raises(ReportSchemaError) as info:
        Report.from_dict(data)
    line = info.value.one_line()
    assert says in line and "fix: compile the report again" in line and "\n" not in line


def test_a_new_field_is_one_line_on_its_record():
    """The codec reads the records' type hints: a field added to Row is written and read back
    with no other change (what 'adding a column touches one place' means for the JSON)."""

    @dataclasses.dataclass
    class Wider(Row):
        stalls: dict[str, int] = dataclasses.field(default_factory=dict)

    row = Wider("pvc", "c", stalls={"token": 3})
    assert Wider.from_dict(json.loads(json.dumps(row.to_dict()))) == row
    with pytest.raises(ReportSchemaError, match=r"stalls\.token: expected an integer"):
        Wider.from_dict(row.to_dict() | {"stalls": {"token": "3"}})


def test_options_give_the_command_line_its_parser_reads_back():
    """One record: the in-image argv the host runs, parsed by the in-image parser, is the same options."""
    options = ReportOptions(
        "/workspace/k.py:k",
        targets=("pvc,bmg",),
        configs=("BLOCK=64,num_warps=4", "BLOCK=128"),
        signature="x:*fp16:16,n:i32",
        constexprs=("N=3",),
        lines=True,
        launched_by="/workspace/run.py",
        script_args="--size 128",
    )
    argv = options.argv()
    assert argv[:2] == ["kernel-report", "/workspace/k.py:k"] and argv.count("--config") == 2
    parser = argparse.ArgumentParser()
    ReportOptions.add_arguments(parser)
    assert ReportOptions.from_args(parser.parse_args(argv[1:])) == options
    assert ReportOptions.from_args(parser.parse_args(ReportOptions("k.py:k").argv()[1:])) == ReportOptions("k.py:k")


def test_the_cache_key_has_what_changes_the_report():
    options = ReportOptions("k.py:k", targets=("pvc",), configs=("BLOCK=64",), lines=True)
    assert options.key_fields() == {
        "targets": ["pvc"], "configs": ["BLOCK=64"], "signature": None, "constexprs": [], "lines": True,
        "baseline_config": None, "baseline_target": None,
    }  # fmt: skip
    assert ReportOptions("k.py:k", lines=False).key_fields() != ReportOptions("k.py:k", lines=True).key_fields()
    assert ReportOptions("k.py:k").key_fields() != ReportOptions("k.py:k", baseline_target="bmg").key_fields()


def test_occupancy_what_if_n_regs_and_calculator_are_read_and_said():
    """targets.occupancy's what-if table, n_regs note and calculator link come through the records
    (nothing dropped on the way to a stored report) and every format says them."""
    from xpukit.runtime.offline.report_format import format_html, format_markdown, next_steps, what_if_html
    from xpukit.targets import occupancy

    occ = occupancy("ptl", 16, 256, 64, 20 * 1024, barriers=1)
    assert occ is not None and occ["what_if"] is not None
    row = {"target": "ptl", "config": "c", "simd": 16, "grf": 256, "counts": counts(9), "occupancy": occ}
    report = Report.from_dict(json.loads(json.dumps(as_report({"rows": [row]}).to_dict())))
    read = report.rows[0].occupancy
    assert read is not None and read.what_if is not None and read.n_regs is not None and read.calculator is not None
    assert read.to_dict() == occ | {"what_if": occ["what_if"]}  # the same JSON back
    assert read.n_regs.grf_count == 256 and read.n_regs.upstream_n_regs == 128 and read.n_regs.differs
    steps = next_steps(read.what_if)
    assert steps and all(f"{s.work_groups_per_xe_core} WG/Xe core" in steps for s in read.what_if.next)
    text = format_markdown(report)
    assert f"ptl c: occupancy's next steps: {steps}" in text and "n_regs 128 for this build" in text
    assert read.calculator.prefilled and read.calculator.url in text
    grid = what_if_html(report.rows[0])
    own = read.what_if.row
    assert own is not None and grid.count('class="own"') == 1
    i, j = read.what_if.num_warps.index(own["num_warps"]), read.what_if.slm_bytes.index(own["slm_bytes"])
    cell = f"{read.what_if.work_groups_per_xe_core[i][j]} ({read.what_if.occupancy_pct[i][j]:g}%)"
    assert f'class="own" title="{read.what_if.limited_by[i][j]}">{cell}</td>' in grid
    assert grid in format_html(report)


def test_a_launch_config_says_what_it_set_besides_its_hints():
    """`launch 1`, `launch 2` (--launched-by) name nothing of the launch: its note says the
    constexprs and options it ran with, so an autotuner's two configs can be told apart."""
    spec = {"source": "launch", "aligned_16": ["x"], "divisible_16": ["n"], "equal_1": []}
    rows = [{"target": "pvc", "config": f"launch {i}", "counts": counts(9), "specialization": spec} for i in (1, 2)]
    configs = [
        {"label": "launch 1", "constexprs": {"BLOCK": 64}, "options": {"num_warps": 2, "grf_mode": "large"}},
        {"label": "launch 2", "constexprs": {"BLOCK": 256}, "options": {"num_warps": 4}},
    ]
    configs = [c | {"specialization": spec} for c in configs]
    notes = row_notes(as_report({"rows": rows, "configs": configs}))
    assert notes[:2] == [
        "launch 1 (BLOCK=64, num_warps=2, grf_mode='large'): specialization launch: 16-aligned x; divisible by 16: n",
        "launch 2 (BLOCK=256, num_warps=4): specialization launch: 16-aligned x; divisible by 16: n",
    ]
    declared = row_notes(
        as_report({"rows": [rows[0] | {"config": "BLOCK=64", "specialization": {"source": "declared"}}]})
    )
    assert declared[0] == "BLOCK=64: specialization declared: nothing known of the arguments"
