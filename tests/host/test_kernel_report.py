"""kernel-report: every target x config compiled for real, one table; bad input as one line each.

The tests that run on the host, with no engine; the others are in tests/image/test_kernel_report.py.
"""

from __future__ import annotations

import pytest

from tests.support import ROOT
from tests.support.invoke import invoke_with_cache
from tests.support.reports import as_report
from xpukit.errors import EXIT_USAGE, XpukitError
from xpukit.runtime.kernels import kernel_report
from xpukit.runtime.offline import report_format
from xpukit.runtime.offline.counts import SEND_KINDS


def _counts(**changes):
    counts = {
        "instructions": 7,
        "sends": dict.fromkeys(SEND_KINDS, 0)
        | {k: 1 for k in ("global_load", "global_store", "slm_load", "slm_store")},
        "send_total": 4,
        "dpas": 0,
        "math": 2,
        "moves": 3,
        "control_flow": 1,
        "barriers": 0,
        "fma": 5,
        "alu": 6,
        "scratch_fill_bytes": 0,
        "scratch_spill_bytes": 0,
    }
    return counts | changes


def _row(config="BLOCK=256", **changes):
    row = {"target": "pvc", "config": config, "simd": 32, "grf": 128, "grf_mode": "default", "grf_retry": False}
    row |= {"work_group": 128, "scratch_bytes": 0, "private_bytes": 0, "slm_bytes": 0, "error": None}
    return row | {"counts": _counts(), "limits": []} | changes


@pytest.mark.unit
def test_config_keys_are_constexprs_or_options():
    cfg = kernel_report.parse_config("BLOCK=256,num_warps=4", ["BLOCK"])
    assert cfg.constexprs == {"BLOCK": 256} and cfg.options == {"num_warps": 4}
    assert cfg.label == "BLOCK=256,num_warps=4"
    with pytest.raises(XpukitError) as info:
        kernel_report.parse_config("BLOCKK=256", ["BLOCK"])
    line = info.value.one_line()
    assert "unknown config key 'BLOCKK'" in line and "BLOCK" in line and "num_warps" in line


@pytest.mark.unit
def test_markdown_marks_failed_cells_and_names_units():
    ok = _row(grf=256, grf_retry=True, limits=["SLM 70000 B > 65536 B per work-group"])
    bad = {"target": "pvc", "config": "BLOCK=3", "error": "failed to compile: x (fix: y)", "counts": None}
    text = report_format.format_markdown(as_report({"rows": [ok, bad]}))
    lines = text.splitlines()
    assert lines[2].count("|") == lines[4].count("|") == len(report_format.COLUMNS) + 1
    header = [c.strip() for c in lines[2].strip("|").split("|")]
    cells = dict(zip(header, (c.strip() for c in lines[4].strip("|").split("|")), strict=True))
    assert cells["scratch B/thr"] == "0" and cells["spill st/ld"] == "0/0" and cells["spill B st/ld"] == "0/0"
    assert cells["GRF"] == "256" and cells["GRF mode"] == "default, 256 retry" and cells["FMA"] == "5"
    assert cells["over limit"] == "SLM 70000 B > 65536 B per work-group"
    assert "spill B" not in header  # the old, mislabelled column (it was the scratch space)
    assert "failed to compile: x (fix: y)" in lines[5]


@pytest.mark.unit
def test_limits_come_from_the_target_table():
    from xpukit.targets import LIMITS, check_limits

    assert LIMITS["acm-g10"].slm_per_work_group == 64 * 1024 and LIMITS["pvc"].slm_per_work_group == 128 * 1024
    assert check_limits("dg2", 67584, 128, 16, 128) == ["SLM 67584 B > 65536 B per work-group"]
    assert check_limits("pvc", 67584, 256, 32, 1024) == []
    over = check_limits("pvc", 0, 512, 8, 2048)
    assert over == ["GRF 512 not in 128/256", "sub-group 8 not in 16/32", "work-group 2048 > 1024"]
    # Every family has the per-work-group caps; a device without the kit's figures is not checked.
    assert check_limits("bmg", 10**9, 999, 3, 10**6) == ["SLM 1000000000 B > 131072 B per work-group",
                                                         "work-group 1000000 > 1024"]  # fmt: skip
    assert check_limits("tgllp", 10**9, 999, 3, 10**6) is None


@pytest.mark.unit
def test_diff_names_what_changed():
    before = {"rows": [_row(), _row("BLOCK=512")], "stored_at": "then"}
    spilled = _counts(instructions=9, scratch_spill_bytes=64) | {
        "sends": _counts()["sends"] | {"scratch_spill": 2},
        "send_total": 6,
    }
    after = {"rows": [_row(grf=256, grf_retry=True, counts=spilled), _row("BLOCK=1024")]}
    before, after = as_report(before), as_report(after)
    changes = {(c[1], c[2]): c[3:] for c in report_format.diff_reports(before, after)}
    assert changes[("BLOCK=256", "instructions")] == (7, 9)
    assert changes[("BLOCK=256", "spill sends")] == (0, 2) and changes[("BLOCK=256", "spill B/thr")] == (0, 64)
    assert changes[("BLOCK=256", "GRF")] == (128, 256) and changes[("BLOCK=256", "sends")] == (4, 6)
    assert changes[("BLOCK=512", "row")] == ("ok", "absent") and changes[("BLOCK=1024", "row")] == ("absent", "ok")
    text = report_format.format_diff(before, after)
    assert text.startswith("Changes since then:") and "| pvc | BLOCK=256 | instructions | 7 | 9 | +2 |" in text
    assert report_format.format_diff(before, before) == "No change since then."


@pytest.mark.unit
def test_invoke_routes_the_report_to_the_image():
    result = invoke_with_cache(
        "kernel-report",
        "examples/kernels.py:row_sum_kernel",
        "--target",
        "pvc,acm-g10",
        "--config",
        "BLOCK=256,num_warps=4",
        "--config",
        "BLOCK=1024,num_warps=8",
        "--where",
        "container",
        "--dry-run",
    )
    assert result.returncode == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if " run " in ln)
    expected = (
        "python -m xpukit kernel-report /workspace/examples/kernels.py:row_sum_kernel "
        "--target pvc,acm-g10 --config BLOCK=256,num_warps=4 --config BLOCK=1024,num_warps=8 --format none --save "
    )
    assert expected in line, line
    # The report comes back through the kit's cache folder; Triton's cache is kept there too, and the
    # image user's cache volume (which the calling user cannot write) is not mounted.
    assert f"-e TRITON_CACHE_DIR={ROOT}/.xpukit/triton-cache " in line
    assert "/home/xpukit/.cache" not in line


@pytest.mark.unit
def test_invoke_hands_the_image_the_launched_by_script_as_given():
    """The image runs /workspace/examples/matmul.py; its 'running ...' line and errors name the
    script as the user typed it (they named the image's path)."""
    result = invoke_with_cache(
        "kernel-report", "examples/kernels.py:scale_kernel", "--target", "pvc", "--launched-by", "examples/matmul.py",
        "--where", "container", "--dry-run",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if " run " in ln)
    assert "--launched-by /workspace/examples/matmul.py --launched-by-as examples/matmul.py " in line, line


@pytest.mark.unit
def test_invoke_bad_format_and_missing_file_are_one_line():
    for args, needle in (
        (["examples/kernels.py:row_sum_kernel", "--format", "xml"], "unknown format 'xml'"),
        (["examples/nope.py:k", "--where", "container", "--dry-run"], "is not path.py:function of an existing file"),
    ):
        result = invoke_with_cache("kernel-report", *args)
        assert result.returncode == EXIT_USAGE and "Traceback" not in result.stderr
        errors = [ln for ln in result.stderr.splitlines() if "error:" in ln]
        assert len(errors) == 1 and needle in errors[0] and "fix:" in errors[0], result.stderr


@pytest.mark.unit
def test_html_page_renders_its_grid_in_chromium(tmp_path):
    """The page alone in Debian's headless chromium, nothing fetched: the inline script builds the
    grid from the JSON embedded in the page, one cell per row, marked by the row's values; a config
    label with markup in it stays text (it cannot end the script or add elements)."""
    from tests.support.report_page import check_cells, render_cells

    tricky = "ACT='</script><b id=x>'"
    rows = [
        _row(config="BLOCK=256", counts=_counts(dpas=4, fma=1)),
        _row(config=tricky, grf=256, counts=_counts(fma=513)),
        _row(
            target="acm-g10",
            config="BLOCK=256",
            grf=256,
            scratch_bytes=8192,
            slm_bytes=70000,
            counts=_counts(sends=_counts()["sends"] | {"scratch_spill": 3, "scratch_fill": 9}),
            limits=["SLM 70000 B > 65536 B per work-group", "GRF 256 not in 128"],
        ),
        {"target": "acm-g10", "config": tricky, "error": "failed to compile: x (fix: y)", "counts": None},
    ]
    report = {"kernel": "k", "ocloc": "ocloc 26.27", "targets": ["pvc", "acm-g10"], "rows": rows,
              "configs": [{"label": "BLOCK=256"}, {"label": tricky}]}  # fmt: skip
    page = tmp_path / "report.html"
    page.write_text(report_format.format_html(as_report(report)))
    assert "<script src" not in page.read_text() and "<link" not in page.read_text()
    cells = render_cells(page, tmp_path / "profile")
    check_cells(cells, report)
    marks = {(c["data-target"], c["data-config"]): set(c["class"].split()) for c in cells}
    assert marks[("acm-g10", "BLOCK=256")] == {"cell", "spill", "over"}
    assert marks[("pvc", tricky)] == {"cell", "ok"} and marks[("acm-g10", tricky)] == {"cell", "error"}


@pytest.mark.unit
def test_grf_mode_takes_a_bare_word():
    cfg = kernel_report.parse_config("BLOCK=256,grf_mode=large", ["BLOCK"])
    assert cfg.options == {"grf_mode": "large"} and cfg.constexprs == {"BLOCK": 256}
    with pytest.raises(XpukitError, match="grf_mode 'huge'"):
        kernel_report.parse_config("grf_mode=huge", ["BLOCK"])
    with pytest.raises(XpukitError, match="not a Python literal"):
        kernel_report.parse_config("BLOCK=abc", ["BLOCK"])


@pytest.mark.unit
def test_the_in_image_watch_refuses_launched_by_in_one_line(capsys):
    """As invoke does: the watch compiles the declared configs; with --launched-by it said 'no
    signature for K (fix: ... or use --launched-by SCRIPT)', the option it was given."""
    from xpukit.__main__ import main

    code = main(["kernel-report", "examples/kernels.py:scale_kernel", "--watch", "--launched-by", "examples/matmul.py"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USAGE and len(err) == 1, err
    assert "--launched-by and --watch both given" in err[0] and "(fix: drop one" in err[0]
