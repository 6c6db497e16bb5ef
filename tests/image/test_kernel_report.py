"""kernel-report: every target x config compiled for real, one table; bad input as one line each.

The report's counts are compared with counts this test takes from the ``.isa`` files that
``compile --asm`` writes (plain substring rules from tests/support/isa.py, not the module's parser).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.support.families import dot_source
from tests.support.isa import independent_counts
from tests.support.reports import report_of
from tests.support.runtime_required import skip_unless_in_image
from xpukit.runtime.kernels import kernel_report
from xpukit.runtime.offline import report_format
from xpukit.runtime.offline.report_model import Report, ReportOptions

EXAMPLES = ROOT / "examples" / "kernels.py"


@pytest.mark.container
def test_report_counts_equal_counts_from_isa_files(env):
    """Two targets x two configs; each cell equals the .isa `compile --asm` writes for that config."""
    from xpukit.runtime.kernels.compile import run_compile

    configs = ["BLOCK=256,num_warps=4", "BLOCK=1024,num_warps=8"]
    report = report_of(f"{EXAMPLES}:row_sum_kernel", ["pvc,acm-g10"], configs)
    assert [(r["target"], r["config"]) for r in report["rows"]] == [(t, c) for t in ("pvc", "acm-g10") for c in configs]
    for block, warps in ((256, 4), (1024, 8)):
        out = env / f"b{block}"
        assert (
            run_compile(f"{EXAMPLES}:row_sum_kernel", ["pvc,acm-g10"], out, None, [f"BLOCK={block}"], warps, asm=True)
            == 0
        )
        for target in ("pvc", "acm-g10"):
            text = (out / target / "row_sum_kernel.isa").read_text()
            oracle = independent_counts(text)
            record = json.loads((out / target / "row_sum_kernel.json").read_text())
            row = next(r for r in report["rows"] if r["target"] == target and r["config"] == configs[block == 1024])
            counts = row["counts"]
            assert counts["instructions"] == oracle["instructions"] > 0
            assert counts["sends"]["global_load"] + counts["sends"]["global_store"] > 0
            assert counts["moves"] == oracle["mov"] and counts["math"] == oracle["math"]
            assert counts["barriers"] == oracle["sync_bar"] and counts["dpas"] == oracle["dpas"] == 0
            assert counts["send_total"] == oracle["sends"]
            assert counts["sends"]["slm_load"] + counts["sends"]["slm_store"] == oracle["slm"]
            assert row["grf"] == record["zebin"]["grf_count"] and row["simd"] == record["zebin"]["simd_size"]
            assert row["slm_bytes"] == record["metadata"]["shared"]
    # The larger tile reduces across more warps: what changes shows in the table.
    by = {(r["target"], r["config"]): r for r in report["rows"]}
    assert by[("pvc", configs[1])]["slm_bytes"] >= by[("pvc", configs[0])]["slm_bytes"]


DOT_SOURCE = dot_source(
    """
# Declared hints (c_ptr's alignment unknown): with all three pointers 16-aligned, the kit's default,
# IGC's log at 128 GRF does not say "spilled" although the larger tile spills, and no retry runs.
XPUKIT_KERNELS = {"dot_kernel": {"signature": "a_ptr:*fp16:16, b_ptr:*fp16:16, c_ptr:*fp32"}}
"""
)
TRANS_SOURCE = """
import triton
import triton.language as tl


@triton.jit
def trans_kernel(x_ptr, y_ptr, M: tl.constexpr, N: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :])
    tl.store(y_ptr + rn[:, None] * M + rm[None, :], tl.trans(x))
"""
SMALL_DOT, SPILLING_DOT = "M=16,N=16,K=16", "M=32,N=32,K=32"


@pytest.fixture(scope="module")
def dot_report(tmp_path_factory) -> dict:
    """One report, compiled once for every assertion below: a 16x16x16 and a 32x32x32 fp16 tl.dot
    on acm-g10, where triton-xpu 3.3 lowers tl.dot to mad FMAs (no DPAS in its preset) and the
    larger tile spills even after the 256-GRF retry (the smaller one does not)."""
    pytest.importorskip("triton")
    if shutil.which("ocloc") is None:
        skip_unless_in_image("ocloc is not installed here")
    folder = tmp_path_factory.mktemp("dot")
    os.environ.setdefault("TRITON_CACHE_DIR", str(folder / "cache"))
    (folder / "dot.py").write_text(DOT_SOURCE)
    return report_of(f"{folder / 'dot.py'}:dot_kernel", ["acm-g10"], [SMALL_DOT, SPILLING_DOT])


@pytest.mark.container
def test_spill_columns_follow_the_spills(dot_report):
    small, large = dot_report["rows"]
    assert small["error"] is None and large["error"] is None, (small["error"], large["error"])
    # No spills: no scratch space, no scratch sends, no bytes.
    assert small["scratch_bytes"] == 0
    assert small["counts"]["sends"]["scratch_spill"] == small["counts"]["sends"]["scratch_fill"] == 0
    assert small["counts"]["scratch_spill_bytes"] == small["counts"]["scratch_fill_bytes"] == 0
    # Spills: scratch space per thread, spill and fill sends, and the bytes they move.
    assert large["scratch_bytes"] > 0
    assert large["counts"]["sends"]["scratch_spill"] > 0 and large["counts"]["sends"]["scratch_fill"] > 0
    # The legacy dataport moves whole 32-byte hwords: bytes are a multiple of 32 and at least 32 a send.
    for kind in ("spill", "fill"):
        moved, sends = large["counts"][f"scratch_{kind}_bytes"], large["counts"]["sends"][f"scratch_{kind}"]
        assert moved % 32 == 0 and moved >= 32 * sends
    table = report_format.format_markdown(Report.from_dict(dot_report)).splitlines()
    header = [c.strip() for c in table[2].strip("|").split("|")]
    cells = [dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in table[4:6]]
    assert cells[0]["spill st/ld"] == "0/0" and cells[1]["spill st/ld"] != "0/0"
    assert cells[0]["scratch B/thr"] == "0" and cells[1]["scratch B/thr"] == str(large["scratch_bytes"])
    # The 256-GRF retry shows in the table, not only in the JSON's build flags.
    assert large["grf_retry"] and "256 retry" in cells[1]["GRF mode"] and large["grf"] == 256


@pytest.mark.container
def test_tl_dot_without_dpas_shows_its_fmas(dot_report):
    for row in dot_report["rows"]:
        assert row["counts"]["dpas"] == 0 and row["counts"]["fma"] > 0
    small, large = dot_report["rows"]
    # M*N*K multiply-adds over the work-group's lanes: 8x the work, more mad instructions.
    assert large["counts"]["fma"] > 4 * small["counts"]["fma"]


@pytest.mark.container
def test_config_over_the_slm_limit_is_flagged(env):
    """A 128x256 fp32 transpose goes through 128 KiB of SLM: over acm-g10's 64 KiB per work-group."""
    (env / "trans.py").write_text(TRANS_SOURCE)
    report = report_of(
        f"{env / 'trans.py'}:trans_kernel",
        ["acm-g10"],
        ["M=128,N=256,num_warps=32"],
        signature="x_ptr:*fp32, y_ptr:*fp32",
    )
    (row,) = report["rows"]
    assert row["error"] is None and row["slm_bytes"] > 64 * 1024
    assert f"SLM {row['slm_bytes']} B > 65536 B per work-group" in row["limits"]
    assert f"SLM {row['slm_bytes']} B > 65536 B per work-group" in report_format.format_markdown(
        Report.from_dict(report)
    )


@pytest.mark.container
def test_failing_config_is_reported_and_others_kept(env, capsys):
    options = ReportOptions(f"{EXAMPLES}:scale_kernel", targets=("pvc",), configs=("BLOCK=1000", "BLOCK=256"))
    code = kernel_report.run_kernel_report(options, output_format="json")
    assert code == 1
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    failed, good = report["rows"]
    assert failed["counts"] is None and "fix:" in failed["error"] and "power of 2" in failed["error"]
    # whole, at the kernel file's own line and column (Triton counts from the def), with the line's text
    where = "kernels.py:37:39: ValueError: arange's range must be a power of 2 (offs = tl.program_id(0)"
    assert where in failed["error"]
    assert good["error"] is None and good["counts"]["instructions"] > 0
    errors = captured.err.strip().splitlines()
    # one line, whole (no cut): the reason, the kernel's line and the fix
    assert len(errors) == 1 and "BLOCK=1000" in errors[0] and where in errors[0]
    assert errors[0].endswith("(fix: change this config or the kernel)")


@pytest.mark.container
def test_autotune_configs_are_the_default(env):
    """A triton.autotune list is the default config set. (Triton 3.3 asks the active driver for a
    benchmarker at decoration time, so kit users name the UR one, as tests/image/test_driver_autotune.py.)"""
    source = (
        "import triton\nimport triton.language as tl\n"
        "from xpukit.runtime.triton import do_bench\n\n"
        "XPUKIT_KERNELS = {'k': {'signature': 'x_ptr:*fp32, n:i32'}}\n\n"
        "@triton.autotune(configs=[triton.Config({'BLOCK': 128}, num_warps=2), "
        "triton.Config({'BLOCK': 512}, num_warps=4)], key=['n'], do_bench=do_bench)\n"
        "@triton.jit\n"
        "def k(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)\n"
    )
    (env / "tuned.py").write_text(source)
    report = report_of(f"{env / 'tuned.py'}:k", ["pvc"], [])
    labels = [r["config"] for r in report["rows"]]
    assert labels == ["BLOCK=128,num_warps=2,num_stages=3", "BLOCK=512,num_warps=4,num_stages=3"]
    assert all(r["counts"]["sends"]["global_store"] > 0 for r in report["rows"])


@pytest.mark.container
def test_cli_bad_input_is_one_line_without_traceback(env):
    base = [sys.executable, "-m", "xpukit", "kernel-report", f"{EXAMPLES}:scale_kernel"]
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    for extra, needle in (
        (["--config", "BLOCKX=1"], "unknown config key 'BLOCKX'"),
        (["--target", "nosuch"], "cannot target 'nosuch'"),
        (["--watch", "--port", "99999"], "--port 99999: not a port"),
        (["--watch", "--port", "\u0663"], "--port \u0663: not a port"),  # an Arabic-Indic 3: a digit to isdigit()
        (["--save", "/proc/report.json"], "--save /proc/report.json: /proc is not writable here"),
        (["--save", str(env / "no" / "r.json")], f"no folder {env / 'no'}"),
    ):
        proc = subprocess.run([*base, *extra], capture_output=True, text=True, env=environ, timeout=300)
        assert proc.returncode != 0, proc.stdout
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "fix:" in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.container
def test_grf_mode_small_on_a_spilling_config_says_igc_kept_128(env):
    """grf_mode small on examples/matmul.py's declared 128x128x32 tile, which spills on pvc at 128 GRF:
    Triton 3.3 retries with -cl-intel-256-GRF-per-thread appended after the 128-GRF flag, IGC keeps
    128, and the row says so from the zebin's GRF count instead of "retried at 256 GRF"."""
    report = report_of(f"{ROOT / 'examples' / 'matmul.py'}:matmul_kernel", ["pvc"], ["grf_mode='small'"])
    (row,) = report["rows"]
    assert row["error"] is None and row["grf_mode"] == "small"
    assert "-cl-intel-128-GRF-per-thread" in row["build_flags"] and "-cl-intel-256-GRF-per-thread" in row["build_flags"]
    assert row["grf"] == 128 and row["grf_retry"] and row["scratch_bytes"] > 0
    assert row["grf_rule"].startswith("asked for 256, IGC kept 128: still spills ("), row["grf_rule"]
    assert "retried at 256" not in report_format.format_markdown(Report.from_dict(report))
