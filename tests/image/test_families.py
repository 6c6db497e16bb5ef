"""Eleven Intel GPU families through today's compiler (ocloc 26.27 / IGC 2.40): compile, zebin-info,
--asm, kernel-report and the SPIR-V shared between targets, every kernel examples/ declares compiled
for every family (docs/families.md's status table says so), on real zebins compiled at test time.

Needs ocloc 26.27: the image carries it; on a host these tests skip unless XPUKIT_OCLOC names one.
Expected values come from the targets table and from what the tests read in the zebins and ISA
themselves (plain string rules), never from numbers of an earlier run.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support import ROOT
from tests.support.families import DOT_SOURCE, current_ocloc_or_skip
from tests.support.isa import assert_counts_match

EXAMPLES = ROOT / "examples" / "kernels.py"
SEVEN = ["pvc", "bmg", "acm-g10", "arl-h", "mtl", "lnl", "ptl"]
ELEVEN = [*SEVEN, "wcl", "nvl-s", "nvl-p", "cri"]  # the four newest take ptl's Triton properties
# Every kernel examples/ declares (XPUKIT_KERNELS); matmul at a small tile (11 families in seconds).
EXAMPLE_KERNELS = [
    ("kernels.py:scale_kernel", {}),
    ("kernels.py:add_kernel", {}),
    ("kernels.py:strided_copy_kernel", {}),
    ("kernels.py:axpy_fp16_kernel", {}),
    ("kernels.py:row_sum_kernel", {}),
    ("matmul.py:matmul_kernel", {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}),
]


@pytest.fixture
def tool(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    return current_ocloc_or_skip()


@pytest.mark.container
def test_table_agrees_with_ocloc(tool):
    """Every family's device and aliases are ocloc devices, and the table's DPAS, 2D block IO, tf32,
    fp64 and bf16 columns are what ocloc 26.27 reports for that device: also for the four that take
    ptl's Triton properties, so their SPIR-V is what their own properties would give."""
    from xpukit.targets import FAMILIES, PRESETS

    assert [f.name for f in FAMILIES] == ELEVEN
    for family in FAMILIES:
        assert tool.supports(family.ocloc_device), family.name
        assert all(tool.supports(alias) for alias in family.aliases), family.aliases
        exts = tool.extensions(family.ocloc_device)
        preset = PRESETS[family.name]
        assert (
            preset.has_subgroup_matrix_multiply_accumulate
            == family.dpas
            == ("cl_intel_subgroup_matrix_multiply_accumulate" in exts)
        ), family.name
        assert family.block_io_2d == ("cl_intel_subgroup_2d_block_io" in exts), family.name
        assert family.tf32 == ("cl_intel_subgroup_matrix_multiply_accumulate_tf32" in exts), family.name
        assert family.fp64 == ("cl_khr_fp64" in exts), family.name
        assert family.bf16_conversions == ("cl_intel_bfloat16_conversions" in exts), family.name
        if family.triton_from:
            assert PRESETS[family.name].codegen_key() == PRESETS[family.triton_from].codegen_key()


@pytest.mark.container
def test_every_family_compiles_reads_and_disassembles(tool, tmp_path, capsys):
    """One `compile --asm` for the eleven families: exit 0 (no false payload mismatch on the bindless
    families), each zebin names its family (wcl's by its IP version: its product family is ptl's),
    pointers are the stateless 8-byte entries (after two implicit ones on Xe3P), no scratch sends where
    the zebin has no spill space, the counts leave padding out, and on Xe3/Xe3P IGC picked the GRF
    count (64 here, not 128)."""
    from xpukit.runtime.kernels.compile import run_compile
    from xpukit.runtime.kernels.zebin_info import run_zebin_info
    from xpukit.runtime.offline.isa import count_isa, zebin_device
    from xpukit.runtime.offline.zebin import read_zebin
    from xpukit.targets import FAMILY

    out = tmp_path / "out"
    assert run_compile(f"{EXAMPLES}:scale_kernel", [",".join(ELEVEN)], out, None, [], asm=True) == 0
    printed = capsys.readouterr().out
    # SPIR-V once per codegen property set: pvc/bmg/lnl/ptl/wcl/nvl-s/nvl-p/cri, acm-g10/arl-h, mtl.
    assert "SPIR-V compiled 3 time(s) for 11 targets" in printed
    bindless_seen = 0
    for name in ELEVEN:
        zebin = (out / name / "scale_kernel.zebin").read_bytes()
        assert zebin_device(zebin) == name
        record = json.loads((out / name / "scale_kernel.json").read_text())
        assert record["layout_error"] is None
        pointers = [(a["offset"], a["size"]) for a in record["arguments"] if a["kind"] == "pointer"]
        # Xe3P's payload starts with the indirect-data and scratch pointers (8 bytes each)
        first = 16 if FAMILY[name].iga_platform == "3pxpc" else 0
        assert pointers == [(first, 8), (first + 8, 8)], name
        kernel = read_zebin(zebin).kernel("scale_kernel")
        assert (kernel.grf_count == 64) == FAMILY[name].auto_grf, (name, kernel.grf_count)
        bindless = kernel.bindless_args()
        bindless_seen += bool(bindless)
        assert all(a.size == 4 for a in bindless.values())  # the surface slot, not the address
        text = (out / name / "scale_kernel.isa").read_text()
        counts = assert_counts_match(text)
        assert count_isa(text) == counts
        assert counts.sends["global_load"] > 0 and counts.sends["global_store"] > 0
        if kernel.spill_size == 0:  # .bss[...] sends are global buffers, not spills
            assert counts.sends["scratch_spill"] == counts.sends["scratch_fill"] == 0, name
        if name in ("acm-g10", "arl-h", "mtl"):
            assert ".bss[" in text and bindless, name
        if name == "pvc":
            assert counts.padding > 0  # a mov to null after each send, not counted as work
        capsys.readouterr()
        assert run_zebin_info(out / name / "scale_kernel.zebin", as_json=True, asm=True) == 0
        info = json.loads(capsys.readouterr().out)
        assert info["device"] == name and info["ze_info_version"] == "1.73"
        assert info["isa"]["kernels"]["scale_kernel"] == text
    assert bindless_seen == 3


@pytest.mark.container
def test_tl_dot_uses_dpas_where_the_table_says_and_shares_spirv(tool, tmp_path):
    """tl.dot lowers to DPAS where the table gives DPAS and 2D block IO (triton-xpu 3.3 needs both),
    to FMAs elsewhere; and each target's SPIR-V, compiled on its own, is the one the kit shared."""
    from xpukit.runtime.kernels.compile import build_targets, load_kernel, resolve_targets
    from xpukit.runtime.offline.isa import count_isa
    from xpukit.runtime.triton.tritonc import compile_kernel, parse_signature
    from xpukit.targets import FAMILY

    (tmp_path / "dot.py").write_text(DOT_SOURCE)
    spec = load_kernel(f"{tmp_path / 'dot.py'}:dot_kernel")
    sig = parse_signature(spec.signature)
    presets = resolve_targets(tool, ELEVEN)
    builds = build_targets(spec.fn, sig, spec.constexprs, presets, {}, tool, asm=True)
    assert sorted(b.target for b in builds) == sorted(ELEVEN)
    for build in builds:
        assert build.error is None, build.error
        family = FAMILY[build.target]
        counts = count_isa(build.isa)
        if family.dpas and family.block_io_2d:
            assert counts.dpas > 0 and build.compiled.metadata.threads_per_warp == 16, build.target
        else:
            assert counts.dpas == 0 and counts.fma > 0, build.target
        alone = compile_kernel(spec.fn, sig, spec.constexprs, presets[build.target].props(), {})
        assert alone.asm["spv"] == build.compiled.asm["spv"], f"{build.target} shares {build.spirv_from}'s SPIR-V"


@pytest.mark.container
def test_other_device_names_and_aliases(tool, tmp_path, capsys):
    """Aliases mean their family; other names ocloc accepts (its deprecated 'arl' and 'lnl', older and
    newer parts) compile with properties from ocloc's extension query; a family name is one line."""
    from xpukit.runtime.kernels.compile import run_compile
    from xpukit.runtime.offline.ocloc import UnsupportedDeviceError

    names = ["lnl-m", "dg2", "bmg-g21", "mtl-h", "ptl-h", "lnl", "arl", "tgllp", "acm-g11", "bmg-g31", "nvl-u"]
    out = tmp_path / "out"
    assert run_compile(f"{EXAMPLES}:scale_kernel", [",".join(names)], out, None, [], asm=True) == 0
    folders = sorted(p.name for p in out.iterdir())
    assert folders == sorted(["lnl", "acm-g10", "bmg", "mtl", "ptl", "arl", "tgllp", "acm-g11", "bmg-g31", "nvl-u"])
    for folder in folders:
        record = json.loads((out / folder / "scale_kernel.json").read_text())
        assert record["layout_error"] is None and (out / folder / "scale_kernel.isa").stat().st_size > 0
    with pytest.raises(UnsupportedDeviceError, match="'xe2' names a group of") as info:
        run_compile(f"{EXAMPLES}:scale_kernel", ["xe2"], tmp_path / "group", None, [])
    assert "\n" not in info.value.one_line()


@pytest.mark.container
def test_zebin_info_lists_a_multi_device_archive(tool, tmp_path, capsys):
    """ocloc -device pvc,bmg,dg2,arl-h,mtl-h (PyTorch's arch list, one call) writes an ar archive:
    zebin-info lists its members and reads each zebin."""
    from xpukit.runtime.kernels.compile import run_compile
    from xpukit.runtime.kernels.zebin_info import run_zebin_info

    run_compile(f"{EXAMPLES}:scale_kernel", ["pvc"], tmp_path / "one", None, [])
    spv = tmp_path / "one" / "pvc" / "scale_kernel.spv"
    archive = tmp_path / "multi.ar"
    cmd = [tool.path, "compile", "-file", str(spv), "-spirv_input", "-device", "pvc,bmg,dg2,arl-h,mtl-h"]
    subprocess.run([*cmd, "-o", str(archive)], check=True, capture_output=True, timeout=300)
    capsys.readouterr()
    assert run_zebin_info(archive, as_json=True) == 0
    members = json.loads(capsys.readouterr().out)["members"]
    zebins = [m for m in members if m["kind"] == "zebin"]
    assert [m["device"] for m in zebins] == ["pvc", "bmg", "acm-g10", "arl-h", "mtl"]
    assert all(m["kernels"][0]["name"] == "scale_kernel" for m in zebins)
    assert run_zebin_info(archive) == 0
    text = capsys.readouterr().out
    assert "multi-device ar archive" in text and text.count("kernel scale_kernel:") == 5


@pytest.mark.container
def test_kernel_report_covers_every_family_by_two_configs(tool):
    """One report, `--target all` (the eleven families) x two configs, every cell compiled and counted
    (the tl.dot families are in the test above; this kernel needs no 256-GRF retry, so it stays cheap)."""
    from tests.support.reports import report_of as build_report

    report = build_report(f"{EXAMPLES}:scale_kernel", ["all"], ["BLOCK=256,num_warps=4", "BLOCK=1024,num_warps=8"])
    assert report["targets"] == ELEVEN and len(report["rows"]) == 22
    assert all(r["error"] is None and r["counts"] for r in report["rows"])
    assert {(r["target"], r["config"]) for r in report["rows"]} == {
        (t, c) for t in ELEVEN for c in ("BLOCK=256,num_warps=4", "BLOCK=1024,num_warps=8")
    }
    for row in report["rows"]:  # no false spills: the scale kernel has no scratch space anywhere
        assert row["scratch_bytes"] == 0 and row["counts"]["sends"]["scratch_spill"] == 0, row["target"]


@pytest.mark.container
def test_zebin_stage_builds_each_family(tool):
    """Triton's own path (generate_native_code, the kit's zebin stage on triton-xpu 3.3) for each
    family, those whose SYCL architecture the kit does not know included (ptl and the four newest):
    the stage takes the ocloc device from the kit's properties."""
    from xpukit.runtime.kernels.compile import load_kernel
    from xpukit.runtime.offline.isa import zebin_device
    from xpukit.runtime.triton.tritonc import compile_kernel, parse_signature

    spec = load_kernel(f"{EXAMPLES}:scale_kernel")
    for name in ELEVEN:
        compiled = compile_kernel(
            spec.fn, parse_signature(spec.signature), spec.constexprs, name, {"generate_native_code": True}
        )
        assert compiled.metadata.binary_ext == "zebin" and zebin_device(compiled.asm["zebin"]) == name


@pytest.mark.container
def test_examples_compile_for_every_family(tool, capsys):
    """Every kernel examples/ declares, for every family of the targets table (what docs/families.md's
    status table says): no build fails, each zebin names its family, its ISA counts pass the plain
    string oracle, it loads and stores. On Xe3P (cri, nvl-p) every send is a sendg/sendgx, and the
    kit counts them all as sends."""
    from xpukit.runtime.kernels.compile import build_targets, load_kernel, resolve_targets
    from xpukit.runtime.offline.isa import zebin_device
    from xpukit.runtime.triton.tritonc import parse_signature
    from xpukit.targets import FAMILIES, FAMILY

    assert [f.name for f in FAMILIES] == ELEVEN
    presets = resolve_targets(tool, ELEVEN)
    for name, constexprs in EXAMPLE_KERNELS:
        spec = load_kernel(str(ROOT / "examples" / name))
        sig = parse_signature(spec.signature)
        builds = build_targets(spec.fn, sig, {**spec.constexprs, **constexprs}, presets, {}, tool, asm=True)
        assert sorted(b.target for b in builds) == sorted(ELEVEN), name
        for build in builds:
            assert build.error is None, (name, build.target, build.error)
            assert zebin_device(build.zebin) == build.target, (name, build.target)
            counts = assert_counts_match(build.isa)
            assert counts.sends["global_load"] + counts.sends["block2d_load"] > 0, (name, build.target)
            assert counts.sends["global_store"] + counts.sends["block2d_store"] > 0, (name, build.target)
            ops = [_opcode(line) for line in build.isa.splitlines()]
            sends = [op for op in ops if op.startswith("send")]
            if FAMILY[build.target].iga_platform == "3pxpc":
                assert sends and all(op.split(".")[0] in ("sendg", "sendgx") for op in sends), (name, build.target)
            assert counts.send_total == len(sends) > 0, (name, build.target)
    capsys.readouterr()


def _opcode(line: str) -> str:
    words = line.split("//")[0].split()
    if words and words[0].startswith("("):  # a predicate: (W), (W&f0.0)
        words = words[1:]
    return words[0] if words and not words[0].endswith(":") else ""
