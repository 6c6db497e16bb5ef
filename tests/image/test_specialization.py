"""The kernel a launch runs: Triton's specialization (hints, the default alignment, --launched-by),
and the right file and text for every line. Real compiles with the image's ocloc; the launches of
``--launched-by`` run on the CPU device through the kit's own launch path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.reports import report_of
from xpukit.errors import XpukitError
from xpukit.runtime.kernels import compile as compile_module
from xpukit.runtime.kernels import kernel_report

MATMUL = ROOT / "examples" / "matmul.py"
TILE = "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,num_warps=4"
PLAIN = (
    "a_ptr:*fp16, b_ptr:*fp16, c_ptr:*fp32, M:i32, N:i32, K:i32, "
    "stride_am:i32, stride_ak:i32, stride_bk:i32, stride_bn:i32, stride_cm:i32, stride_cn:i32"
)


def _by_target(report: dict) -> dict[str, dict]:
    return {row["target"]: row for row in report["rows"]}


@pytest.mark.container
def test_the_shipped_matmul_as_launched_has_block2d_loads_and_the_generic_one_warns(env):
    """examples/matmul.py declares the hints a launch on contiguous matrices gets: on pvc and bmg its
    block loads are 2D block loads. The same kernel with a hintless signature (the kit's default:
    pointers aligned, nothing known of the ints) gathers, and each row says so and why."""
    declared = _by_target(report_of(f"{MATMUL}:matmul_kernel", ["pvc,bmg"], [TILE]))
    plain = _by_target(report_of(f"{MATMUL}:matmul_kernel", ["pvc,bmg"], [TILE], signature=PLAIN))
    for target in ("pvc", "bmg"):
        good, generic = declared[target], plain[target]
        assert good["error"] is None and generic["error"] is None
        assert good["specialization"] == {
            "source": "declared",
            "aligned_16": ["a_ptr", "b_ptr", "c_ptr"],
            "divisible_16": ["M", "N", "K", "stride_am", "stride_bk", "stride_cm"],
            "equal_1": ["stride_ak", "stride_bn", "stride_cn"],
        }
        assert good["counts"]["sends"]["block2d_load"] > 0 and good["warnings"] == []
        assert good["counts"]["instructions"] < generic["counts"]["instructions"]
        assert generic["specialization"]["source"] == "default"
        assert generic["specialization"]["aligned_16"] == ["a_ptr", "b_ptr", "c_ptr"]
        assert generic["counts"]["sends"]["block2d_load"] == 0
        (warning,) = generic["warnings"]
        assert "gathers" in warning and "stride_ak" in warning and "a_ptr" not in warning


@pytest.mark.container
def test_launched_by_equals_the_hinted_compile(env):
    """--launched-by runs examples/matmul.py on the CPU device and compiles what its launch
    specialized: one config, `launch 1`, with the same code as the declared hints give."""
    launches = kernel_report.launch_configs(f"{MATMUL}:matmul_kernel", MATMUL, ["--size", "128"])
    assert [c.label for c in launches] == ["launch 1"]
    (launch,) = launches
    assert launch.constexprs == {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}
    assert launch.options["num_warps"] == 4
    got = _by_target(report_of(f"{MATMUL}:matmul_kernel", ["pvc"], [], launches=launches))["pvc"]
    want = _by_target(report_of(f"{MATMUL}:matmul_kernel", ["pvc"], [TILE]))["pvc"]
    assert got["config"] == "launch 1" and got["specialization"]["source"] == "launch"
    assert {k: v for k, v in got["specialization"].items() if k != "source"} == {
        k: v for k, v in want["specialization"].items() if k != "source"
    }
    assert got["counts"] == want["counts"] and got["grf"] == want["grf"]


@pytest.mark.container
def test_launched_by_a_script_that_never_launches_the_kernel_is_one_line(env):
    script = env / "quiet.py"
    script.write_text("print('nothing launched')\n")
    with pytest.raises(Exception, match="launched no matmul_kernel"):
        kernel_report.launch_configs(f"{MATMUL}:matmul_kernel", script, [])


KERNEL = """import triton
import triton.language as tl

XPUKIT_KERNELS = {"copy_kernel": {"signature": "x_ptr:*fp32, y_ptr:*fp32, n:i32", "constexprs": {"BLOCK": 64}}}


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n)
    tl.store(y_ptr + offsets, x * 2, mask=offsets < n)
"""


@pytest.mark.container
def test_identical_kernels_in_two_files_each_get_their_own_lines(env):
    """Triton 3.3 keys a compile by the kernel's text and first line; the kit adds the file, so a
    copy in another file (sharing the cache) never shows the first file's lines."""
    for name in ("copy_a.py", "copy_b.py"):
        (env / name).write_text(KERNEL)
    for name in ("copy_a.py", "copy_b.py"):
        report = report_of(f"{env / name}:copy_kernel", ["pvc"], [], lines=True)
        (row,) = report["rows"]
        files = {entry["file"] for entry in row["lines"] if entry["file"] and entry["line"]}
        assert str(env / name) in files
        assert not any(Path(f).name.startswith("copy_") and Path(f).name != name for f in files)
        store = next(e for e in row["lines"] if e["file"] == str(env / name) and "tl.store" in e["source"])
        assert store["counts"]["sends"]["global_store"] > 0


@pytest.mark.container
def test_a_save_during_the_compile_shows_the_text_compiled_and_says_so(env):
    """The kernel's file is read once, before the import; lines show that text. A file changed
    after the import makes the report say 'source changed since compile'."""
    path = env / "k.py"
    path.write_text(KERNEL)
    first = report_of(f"{path}:copy_kernel", ["pvc"], [], lines=True)
    assert first["source_changed"] is False
    path.write_text(KERNEL.replace("x * 2", "x * 3"))  # saved after the import the next report reuses
    second = report_of(f"{path}:copy_kernel", ["pvc"], [], lines=True)
    assert second["source_changed"] is True
    assert any("x * 2" in line for line in second["kernel_source"]["lines"])
    assert not any("x * 3" in line for line in second["kernel_source"]["lines"])
    assert second["kernel_source"]["sha256"] == first["kernel_source"]["sha256"]
    third = report_of(f"{path}:copy_kernel", ["pvc"], [], lines=True, fresh=True)
    assert third["source_changed"] is False and any("x * 3" in line for line in third["kernel_source"]["lines"])


@pytest.mark.container
@pytest.mark.parametrize(
    ("signature", "message"),
    [
        ("x_ptr:*fp32, y_ptr:*fp32, n:i32, bogus:i32", "copy_kernel has no argument.s. bogus"),
        ("x_ptr:*fp32, n:i32", "no type or value for y_ptr"),
    ],
)
def test_a_signature_that_does_not_fit_the_kernel_is_one_error_before_any_compile(env, signature, message):
    """A name the kernel does not have, or an argument left out: one error naming it and the kernel's
    arguments, not the same error in every row of every target."""
    path = env / "k.py"
    path.write_text(KERNEL)
    with pytest.raises(XpukitError, match=message) as caught:
        report_of(f"{path}:copy_kernel", ["pvc,bmg"], [], signature=signature)
    assert "x_ptr, y_ptr, n, BLOCK" in caught.value.one_line()


TUNED = """import triton
import triton.language as tl

XPUKIT_KERNELS = {"tuned_kernel": {"signature": "x_ptr:*fp32, y_ptr:*fp32, n:i32"}}


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4)], key=["n"])
@triton.jit(do_not_specialize_on_alignment=["y_ptr"])
def tuned_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
"""


@pytest.mark.container
def test_compile_builds_the_variant_the_report_shows_for_an_autotuned_kernel(env):
    """invoke compile and kernel-report compile the same variant: of an autotuned kernel too (compile
    handed Triton the Autotuner: "'Autotuner' object has no attribute '__name__'"), with the
    JIT function's do_not_specialize_on_alignment honoured (y_ptr not taken as 16-aligned)."""
    import json

    from xpukit.runtime.kernels.compile import run_compile

    path = env / "tuned.py"
    path.write_text(TUNED)
    assert run_compile(f"{path}:tuned_kernel", ["pvc"], env / "out", None, ["BLOCK=128"], 4, asm=True) == 0
    record = json.loads((env / "out" / "pvc" / "tuned_kernel.json").read_text())
    assert record["specialization"] == {"source": "default", "aligned_16": ["x_ptr"], "divisible_16": [], "equal_1": []}
    (row,) = report_of(f"{path}:tuned_kernel", ["pvc"], [])["rows"]
    assert row["specialization"] == record["specialization"]
    from xpukit.runtime.offline.isa import count_isa

    assert (
        count_isa((env / "out" / "pvc" / "tuned_kernel.isa").read_text()).instructions == row["counts"]["instructions"]
    )


HELPER = """import triton


@triton.jit
def twice(x):
    return x * 2.0
"""

USES_HELPER = """import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import triton
import triton.language as tl
from helper_mod import twice

XPUKIT_KERNELS = {"k": {"signature": "x_ptr:*fp32, n:i32", "constexprs": {"BLOCK": 64}}}


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, twice(tl.load(x_ptr + offsets, mask=offsets < n)), mask=offsets < n)
"""


@pytest.mark.container
def test_a_fresh_report_compiles_the_helpers_file_as_saved(env, monkeypatch, request):
    """A @triton.jit helper in the user's own module: a fresh report (each save of a watch) imports
    it again with the kernel's file, so its compile is the helper as saved, not the first import's."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # the kernel's file adds its folder
    request.addfinalizer(lambda: sys.modules.pop("helper_mod", None))  # as is what it imports
    (env / "helper_mod.py").write_text(HELPER)
    path = env / "uses_helper.py"
    path.write_text(USES_HELPER)
    first = report_of(f"{path}:k", ["pvc"], [])
    assert compile_module.imported_user_files(path) == (env / "helper_mod.py",)
    (env / "helper_mod.py").write_text(HELPER.replace("return x * 2.0", "return tl.exp(x) * 2.0 + x").replace(
        "import triton\n", "import triton\nimport triton.language as tl\n"))  # fmt: skip
    second = report_of(f"{path}:k", ["pvc"], [], fresh=True)
    assert second["rows"][0]["counts"]["math"] > first["rows"][0]["counts"]["math"] == 0
