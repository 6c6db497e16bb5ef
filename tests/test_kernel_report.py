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
from xpukit.runtime.offline import kernel_report

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


@pytest.mark.unit
def test_markdown_marks_failed_cells():
    counts = {
        "instructions": 7,
        "sends": {k: 1 for k in ("global_load", "global_store", "slm_load", "slm_store")}
        | {k: 0 for k in ("block2d_load", "block2d_store", "atomic", "scratch_fill", "scratch_spill")},
        "dpas": 0,
        "math": 2,
        "moves": 3,
        "control_flow": 1,
        "barriers": 0,
    }
    ok = {"target": "pvc", "config": "BLOCK=256", "simd": 32, "grf": 128, "spill_bytes": 0}
    ok |= {"private_bytes": 0, "slm_bytes": 0, "error": None, "counts": counts}
    bad = {"target": "pvc", "config": "BLOCK=3", "error": "failed to compile: x (fix: y)", "counts": None}
    text = kernel_report.format_markdown({"kernel": "k", "ocloc": "ocloc", "rows": [ok, bad]})
    lines = text.splitlines()
    assert lines[2].count("|") == lines[4].count("|") == len(kernel_report._COLUMNS) + 1
    assert lines[4].startswith("| pvc | BLOCK=256 | 32 | 128 | 0 | 0 | 0 | 7 | 1/1 | 1/1 | 0/0 |")
    assert "failed to compile: x (fix: y)" in lines[5]


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


def _invoke(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "XPUKIT_PROFILE": ""}
    env.pop("CI", None)
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
        "python -m xpukit kernel-report /workspace/examples/kernels.py:row_sum_kernel --format md "
        "--target pvc,acm-g10 --config BLOCK=256,num_warps=4 --config BLOCK=1024,num_warps=8"
    )
    assert line.endswith(expected), line


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
def test_invoke_json_report_is_all_of_stdout(test_image):
    """`--format json` through invoke: stdout parses as the report; the kit's progress lines
    (profile, base, any build log) went to stderr."""
    result = _invoke("kernel-report", "examples/kernels.py:scale_kernel", "--target", "pvc", "--format", "json")
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report and "xpukit:" not in result.stdout
    assert "xpukit: compiling every target x config in the image" in result.stderr
