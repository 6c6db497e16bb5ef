"""kernel-report: every target x config compiled for real, one table; bad input as one line each.

The report's counts are compared with counts this test takes from the ``.isa`` files that
``compile --asm`` writes (plain substring rules from test_isa, not the module's parser).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from runtime_required import skip_unless_in_image
from test_isa import independent_counts

from xpukit.errors import XpukitError
from xpukit.runtime.offline import kernel_report, report_format

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "kernels.py"


@pytest.mark.unit
def test_config_keys_are_constexprs_or_options():
    cfg = kernel_report.parse_config("BLOCK=256,num_warps=4", ["BLOCK"])
    assert cfg.constexprs == {"BLOCK": 256} and cfg.options == {"num_warps": 4}
    assert cfg.label == "BLOCK=256,num_warps=4"
    with pytest.raises(XpukitError) as info:
        kernel_report.parse_config("BLOCKK=256", ["BLOCK"])
    line = info.value.one_line()
    assert "unknown config key 'BLOCKK'" in line and "BLOCK" in line and "num_warps" in line


def _counts(**changes):
    counts = {
        "instructions": 7,
        "sends": {k: 1 for k in ("global_load", "global_store", "slm_load", "slm_store")}
        | {k: 0 for k in ("block2d_load", "block2d_store", "atomic", "scratch_fill", "scratch_spill")},
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
def test_markdown_marks_failed_cells_and_names_units():
    ok = _row(grf=256, grf_retry=True, limits=["SLM 70000 B > 65536 B per work-group"])
    bad = {"target": "pvc", "config": "BLOCK=3", "error": "failed to compile: x (fix: y)", "counts": None}
    text = report_format.format_markdown({"kernel": "k", "ocloc": "ocloc", "rows": [ok, bad]})
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
    assert check_limits("pvc", 67584, 256, 16, 1024) == []
    over = check_limits("pvc", 0, 512, 8, 2048)
    assert over == ["GRF 512 not in 128/256", "sub-group 8 not in 16/32", "work-group 2048 > 1024"]
    assert check_limits("bmg", 10**9, 999, 3, 10**6) == []  # no sourced limits: not checked


@pytest.mark.unit
def test_diff_names_what_changed():
    before = {"rows": [_row(), _row("BLOCK=512")], "stored_at": "then"}
    spilled = _counts(instructions=9, scratch_spill_bytes=64) | {
        "sends": _counts()["sends"] | {"scratch_spill": 2},
        "send_total": 6,
    }
    after = {"rows": [_row(grf=256, grf_retry=True, counts=spilled), _row("BLOCK=1024")]}
    changes = {(c[1], c[2]): c[3:] for c in report_format.diff_reports(before, after)}
    assert changes[("BLOCK=256", "instructions")] == (7, 9)
    assert changes[("BLOCK=256", "spill sends")] == (0, 2) and changes[("BLOCK=256", "spill B/thr")] == (0, 64)
    assert changes[("BLOCK=256", "GRF")] == (128, 256) and changes[("BLOCK=256", "sends")] == (4, 6)
    assert changes[("BLOCK=512", "row")] == ("ok", "absent") and changes[("BLOCK=1024", "row")] == ("absent", "ok")
    text = report_format.format_diff(before, after)
    assert text.startswith("Changes since then:") and "| pvc | BLOCK=256 | instructions | 7 | 9 | +2 |" in text
    assert report_format.format_diff(before, before) == "No change since then."


@pytest.fixture
def env(tmp_path, monkeypatch) -> Path:
    pytest.importorskip("triton")
    if shutil.which("ocloc") is None:
        skip_unless_in_image("ocloc is not installed here")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.container
def test_report_counts_equal_counts_from_isa_files(env):
    """Two targets x two configs; each cell equals the .isa `compile --asm` writes for that config."""
    from xpukit.runtime.offline.compile import run_compile

    configs = ["BLOCK=256,num_warps=4", "BLOCK=1024,num_warps=8"]
    report = kernel_report.build_report(f"{EXAMPLES}:row_sum_kernel", ["pvc,acm-g10"], configs)
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


DOT_SOURCE = """
import triton
import triton.language as tl

XPUKIT_KERNELS = {"dot_kernel": {"signature": "a_ptr:*fp16, b_ptr:*fp16, c_ptr:*fp32"}}


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))
"""
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
    return kernel_report.build_report(f"{folder / 'dot.py'}:dot_kernel", ["acm-g10"], [SMALL_DOT, SPILLING_DOT])


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
    table = report_format.format_markdown(dot_report).splitlines()
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
    report = kernel_report.build_report(
        f"{env / 'trans.py'}:trans_kernel", ["acm-g10"], ["M=128,N=256,num_warps=32"], "x_ptr:*fp32, y_ptr:*fp32"
    )
    (row,) = report["rows"]
    assert row["error"] is None and row["slm_bytes"] > 64 * 1024
    assert f"SLM {row['slm_bytes']} B > 65536 B per work-group" in row["limits"]
    assert f"SLM {row['slm_bytes']} B > 65536 B per work-group" in report_format.format_markdown(report)


@pytest.mark.container
def test_failing_config_is_reported_and_others_kept(env, capsys):
    code = kernel_report.run_kernel_report(
        f"{EXAMPLES}:scale_kernel", ["pvc"], ["BLOCK=1000", "BLOCK=256"], output_format="json"
    )
    assert code == 1
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    failed, good = report["rows"]
    assert failed["counts"] is None and "fix:" in failed["error"] and "power of 2" in failed["error"]
    assert good["error"] is None and good["counts"]["instructions"] > 0
    errors = captured.err.strip().splitlines()
    assert len(errors) == 1 and "BLOCK=1000" in errors[0] and len(errors[0]) <= 200


@pytest.mark.container
def test_autotune_configs_are_the_default(env):
    """A triton.autotune list is the default config set. (Triton 3.3 asks the active driver for a
    benchmarker at decoration time, so kit users name the UR one, as tests/test_driver_autotune.py.)"""
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
    report = kernel_report.build_report(f"{env / 'tuned.py'}:k", ["pvc"], [])
    labels = [r["config"] for r in report["rows"]]
    assert labels == ["BLOCK=128,num_warps=2,num_stages=3", "BLOCK=512,num_warps=4,num_stages=3"]
    assert all(r["counts"]["sends"]["global_store"] > 0 for r in report["rows"])


@pytest.mark.container
def test_cli_bad_input_is_one_line_without_traceback(env):
    base = [sys.executable, "-m", "xpukit", "kernel-report", f"{EXAMPLES}:scale_kernel"]
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    for extra, needle in (
        (["--config", "BLOCKX=1"], "unknown config key 'BLOCKX'"),
        (["--target", "nosuch"], "unknown target 'nosuch'"),
    ):
        proc = subprocess.run([*base, *extra], capture_output=True, text=True, env=environ, timeout=300)
        assert proc.returncode != 0, proc.stdout
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "fix:" in lines[0] and "Traceback" not in proc.stderr


def _invoke(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "XPUKIT_PROFILE": ""}
    env.pop("CI", None)
    if cache is not None:
        env["XPUKIT_CACHE_DIR"] = str(cache)
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.unit
def test_invoke_routes_the_report_to_the_image():
    result = _invoke(
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
def test_invoke_bad_format_and_missing_file_are_one_line():
    for args, needle in (
        (["examples/kernels.py:row_sum_kernel", "--format", "xml"], "unknown format 'xml'"),
        (["examples/nope.py:k", "--where", "container", "--dry-run"], "is not path.py:function of an existing file"),
    ):
        result = _invoke("kernel-report", *args)
        assert result.returncode != 0 and "Traceback" not in result.stderr
        errors = [ln for ln in result.stderr.splitlines() if "error:" in ln]
        assert len(errors) == 1 and needle in errors[0] and "fix:" in errors[0], result.stderr


@pytest.mark.docker
def test_invoke_json_report_is_all_of_stdout(test_image, tmp_path):
    """`--format json` through invoke: stdout parses as the report; the kit's progress lines
    (profile, base, any build log) went to stderr. The same command again is a stored-report hit:
    no container (no "compiling" line), the same report; --diff finds no earlier report to compare."""
    command = ("kernel-report", "examples/kernels.py:scale_kernel", "--target", "pvc", "--format", "json")
    result = _invoke(*command, cache=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report and "xpukit:" not in result.stdout
    assert "xpukit: compiling every target x config in the image" in result.stderr
    assert list((tmp_path / "triton-cache").iterdir())  # Triton's cache persists in the kit's folder
    again = _invoke(*command, "--diff", cache=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "compiling" not in again.stderr and f"the report of {report['stored_at']}" in again.stderr
    assert json.loads(again.stdout) == report
    assert "No previous report of this kernel." in again.stderr  # JSON on stdout: the diff goes to stderr
