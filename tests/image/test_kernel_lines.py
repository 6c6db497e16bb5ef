"""`kernel-report --lines` on real zebins of every kernel examples/ declares, for the seven families and
cri (the quick set: one family per IGA platform; wcl and nvl-s decode as ptl, nvl-p as cri, and
tests/image/test_families.py compiles every example for all eleven):
per-line counts that add up to the totals, PCs that agree with IGA's own, the inlined Triton lines
under their call site, occupancy beside IGC's own thread count, a stripped zebin, and the GRF rule
read off the pinned Triton backend.

Needs ocloc 26.27 and Triton: the image. Expected values come from the zebins, the ISA and the
installed backend themselves, never from an earlier run's numbers.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import re
import shutil
import subprocess

import pytest

from tests.support import ROOT
from tests.support.families import current_ocloc_or_skip

FAMILIES = "pvc,bmg,acm-g10,arl-h,mtl,lnl,ptl,cri"  # the seven and cri: one family per IGA platform
# Every kernel examples/ declares (XPUKIT_KERNELS); matmul at a tile that does not spill, so the
# families compile in seconds (the declared 128x128 tile's spills are test_kernel_report's).
KERNELS = [
    ("kernels.py:scale_kernel", []),
    ("kernels.py:add_kernel", []),
    ("kernels.py:strided_copy_kernel", []),
    ("kernels.py:axpy_fp16_kernel", []),
    ("kernels.py:row_sum_kernel", []),
    ("matmul.py:matmul_kernel", ["BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,num_warps=4"]),
]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("triton")
    mp = pytest.MonkeyPatch()
    mp.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton-cache")))
    current_ocloc_or_skip()
    from tests.support.reports import report_of as build_report

    out = {
        name: build_report(str(ROOT / "examples" / name), [FAMILIES], configs, lines=True) for name, configs in KERNELS
    }
    yield out
    mp.undo()


def _add(total: dict, counts: dict) -> None:
    for key, value in counts.items():
        if isinstance(value, dict):
            _add(total.setdefault(key, {}), value)
        else:
            total[key] = total.get(key, 0) + value


@pytest.mark.container
def test_per_line_counts_add_up_to_the_totals(reports):
    """For every example kernel and family, the lines' counts summed field by field are the row's."""
    checked = 0
    for name, report in reports.items():
        for row in report["rows"]:
            assert row["error"] is None, (name, row["target"], row["error"])
            assert row["lines"], (name, row["target"], row["line_info"])
            total: dict = {}
            for line in row["lines"]:
                _add(total, line["counts"])
            assert total == row["counts"], (name, row["target"])
            checked += 1
    assert checked == len(KERNELS) * len(FAMILIES.split(","))


@pytest.mark.container
def test_loads_and_stores_land_on_their_lines(reports):
    """The kernel's tl.load lines carry global or 2D loads, its tl.store lines the stores; the
    matmul's DPAS all sit on its tl.dot line where the family has DPAS (the kit gives Triton's
    location-less DPAS calls the tl.dot's location), its FMAs on the tl.dot line where it has not.
    The matmul's 2D block loads may sit on its `for` line: Triton's pipeliner issues the next
    iteration's loads there (num_stages)."""
    from xpukit.targets import FAMILY

    for name, report in reports.items():
        for row in report["rows"]:
            by_text = {}
            for line in row["lines"]:
                by_text.setdefault(line["source"].strip(), line["counts"])
            loads = [c for text, c in by_text.items() if "tl.load(" in text]
            stores = [c for text, c in by_text.items() if text.startswith("tl.store(")]
            assert loads and stores, name
            loop = [c for text, c in by_text.items() if text.startswith("for ")] if name.startswith("matmul") else []
            for c in loads:
                pipelined = sum(x["sends"]["block2d_load"] for x in loop)
                assert c["sends"]["global_load"] + c["sends"]["block2d_load"] + pipelined > 0, (name, row["target"])
            for c in stores:
                assert c["sends"]["global_store"] + c["sends"]["block2d_store"] > 0, (name, row["target"])
            if name.startswith("matmul"):
                dot = by_text.get("acc += tl.dot(a, b)", {"dpas": 0, "fma": 0})
                if row["counts"]["dpas"]:  # triton-xpu 3.3 leaves acm-g10's DPAS unused (FMAs)
                    assert FAMILY[row["target"]].dpas
                    assert dot["dpas"] == row["counts"]["dpas"], row["target"]
                else:
                    assert dot["fma"] > 0, row["target"]


@pytest.mark.container
def test_triton_library_lines_fold_under_the_call_site(reports):
    """row_sum's tl.sum is standard.py's: DWARF's inlined range puts those instructions on the
    kernel's tl.store(... tl.sum(...)) line, naming standard.py lines in ``via``."""
    for row in reports["kernels.py:row_sum_kernel"]["rows"]:
        line = next(entry for entry in row["lines"] if "tl.sum(" in entry["source"])
        assert line["file"].endswith("examples/kernels.py")
        assert any(via.startswith("standard.py:") for via in line["via"]), row["target"]


@pytest.mark.container
def test_pcs_agree_with_iga_for_every_family(reports, tmp_path):
    """The PCs of the one parse of ocloc's disassembly equal the offsets `iga64 -Xprint-pc` prints
    decoding the kernel's text section with the family's platform (xpukit.targets.IGA_PLATFORM)."""
    from elftools.elf.elffile import ELFFile

    from xpukit.runtime.kernels.compile import build_targets, load_kernel, resolve_targets
    from xpukit.runtime.offline.isa import parse_isa
    from xpukit.runtime.offline.ocloc import find_ocloc
    from xpukit.targets import iga_platform, split_targets

    iga = shutil.which("iga64")
    assert iga, "the image carries iga64"
    spec = load_kernel(str(ROOT / "examples" / "kernels.py:row_sum_kernel"))
    tool = find_ocloc()
    builds = build_targets(
        spec.fn,
        {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32", "row_stride": "i32"},
        spec.constexprs,
        resolve_targets(tool, split_targets(FAMILIES)),
        {"generate_native_code": True},
        tool,
        asm=True,
    )
    for build in builds:
        text = tmp_path / f"{build.target}.bin"
        elf = ELFFile(io.BytesIO(build.zebin))
        text.write_bytes(elf.get_section_by_name(".text.row_sum_kernel").data())
        out = subprocess.run(
            [iga, "-d", f"-p={iga_platform(build.target)}", str(text), "-Xprint-pc"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        theirs = [int(m.group(1), 16) for m in re.finditer(r"/\*\s*\[([0-9A-Fa-f]+)\]\s*\*/", out)]
        assert theirs, build.target
        assert [ins.pc for ins in parse_isa(build.isa)] == theirs, build.target


@pytest.mark.container
def test_occupancy_agrees_with_igc_thread_count(reports):
    """threads_per_xve_max is the eu_thread_count IGC writes into .ze_info where it writes one, except
    where compute-runtime's figure differs and the row names both (cri at 256 GRF: the driver 8, IGC 4)."""
    import yaml

    from xpukit.runtime.kernels.compile import build_targets, load_kernel, resolve_targets
    from xpukit.runtime.offline.ocloc import find_ocloc
    from xpukit.targets import split_targets

    spec = load_kernel(str(ROOT / "examples" / "matmul.py:matmul_kernel"))
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"} | {
        n: "i32" for n in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn")
    }
    tool = find_ocloc()
    builds = build_targets(
        spec.fn, sig, spec.constexprs, resolve_targets(tool, split_targets(FAMILIES)),
        {"generate_native_code": True}, tool, asm=False,
    )  # fmt: skip
    rows = {r["target"]: r for r in reports["matmul.py:matmul_kernel"]["rows"]}
    from xpukit.targets import occupancy

    compared = 0
    for build in builds:
        from elftools.elf.elffile import ELFFile

        elf = ELFFile(io.BytesIO(build.zebin))
        env = yaml.safe_load(elf.get_section_by_name(".ze_info").data())["kernels"][0]["execution_env"]
        occ = occupancy(build.target, env["simd_size"], env["grf_count"], 16 * 8, 0)
        assert occ is not None and rows[build.target]["occupancy"] is not None
        if "eu_thread_count" in env:
            igc = env["eu_thread_count"]
            if occ["threads_per_xve_max"] != igc:  # only where the kit names IGC's figure beside the driver's
                ours, grf = occ["threads_per_xve_max"], env["grf_count"]
                named = f"threads per XVE at {grf} GRF: {ours} (compute-runtime; IGC {igc})"
                assert named in occ["figures"], (build.target, occ["figures"])
            compared += 1
    assert compared >= 1


def _without_debug_line(zebin: bytes) -> bytes:
    """The zebin with its .debug_line section renamed (binutils' strip does not know Intel GT's ELF
    machine, so `strip --strip-debug` refuses zebins): to every reader, no line table."""
    index = zebin.find(b".debug_line\0")
    assert index > 0
    return zebin[:index] + b".xdebug_lin\0" + zebin[index + len(b".debug_line\0") :]


@pytest.mark.container
def test_a_zebin_without_debug_line_says_no_line_information():
    """A zebin without .debug_line: the report says "no line information" and still gives totals."""
    pytest.importorskip("triton")
    current_ocloc_or_skip()
    from tests.support.reports import report_of
    from xpukit.runtime.kernels import kernel_report
    from xpukit.runtime.kernels.compile import TargetBuild
    from xpukit.runtime.offline.lines import NO_LINE_INFO, read_line_table
    from xpukit.runtime.offline.report_format import format_markdown
    from xpukit.runtime.offline.report_model import Report

    original = kernel_report._report_cell

    def without_lines(build: TargetBuild, cfg, sources=None, kernel_path=None, where=None):
        assert build.ocloc is not None
        build.ocloc = dataclasses.replace(build.ocloc, zebin=_without_debug_line(build.zebin))
        assert read_line_table(build.zebin, "scale_kernel") is None
        return original(build, cfg, sources, kernel_path, where)

    mp = pytest.MonkeyPatch()
    mp.setattr(kernel_report, "_report_cell", without_lines)
    try:
        report = report_of(str(ROOT / "examples" / "kernels.py:scale_kernel"), ["pvc"], [], lines=True)
    finally:
        mp.undo()
    row = report["rows"][0]
    assert row["line_info"] == NO_LINE_INFO and row["lines"] is None
    assert row["counts"]["instructions"] > 0
    assert f"pvc declared: {NO_LINE_INFO}" in format_markdown(Report.from_dict(report))


@pytest.mark.container
def test_the_kits_grf_rule_is_the_pinned_backends():
    """The kit retries at 256 GRF exactly when the pinned triton-xpu does: IGC's log says "spilled"
    and the large-GRF flag is not set yet; the grf_mode values it refuses are the ones the backend
    does not act on (its XPUOptions default lists those it does)."""
    compiler = pytest.importorskip("triton.backends.intel.compiler")
    from xpukit.runtime.offline import ocloc

    source = inspect.getsource(compiler)
    assert f"'{ocloc.SPILL_MARKER}' in log" in source
    assert f'find("{ocloc.LARGE_GRF_FLAG}") == -1' in source
    assert ocloc.AUTO_GRF_FLAG in source
    assert compiler.XPUOptions.__dataclass_fields__["grf_mode"].default == ocloc.GRF_MODES
    for mode in ocloc.GRF_MODES:
        assert ocloc.check_grf_mode(mode) == mode
    with pytest.raises(Exception, match="small, large, auto, default"):
        ocloc.check_grf_mode("256")
    assert "n_spills" not in source  # the pinned line predates upstream's #7950 unit


@pytest.mark.container
def test_an_unknown_grf_mode_is_one_line_naming_the_known_ones():
    """`--config grf_mode=256` used to compile silently at 128 GRF: now one line, exit non-zero."""
    pytest.importorskip("triton")
    proc = subprocess.run(
        ["python", "-m", "xpukit", "kernel-report", str(ROOT / "examples" / "kernels.py:scale_kernel"),
         "--target", "pvc", "--config", "grf_mode=256"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "grf_mode 256 is not one the pinned Triton" in lines[0] and "small, large, auto, default" in lines[0]
