"""Occupancy a launch gets: the kit's static occupancy and limits against two independent references.

- Intel's GPU Occupancy Calculator (oneAPI-samples 6f5ade58, Tools/GPU-Occupancy-Calculator/index.html):
  its device table for the five families it has (pvc, acm-g10, mtl, lnl, bmg) and its algorithm
  (``cal_occupancy``, which refuses a work-group over Max_Work_Group_Size and offers no SLM above
  SLM_Size_Per_Work_Group, and ``compute_ss_occupancy``), ported below, not re-called from the kit.
- compute-runtime (intel/compute-runtime e37c60bf2a) for arl-h and ptl, which the calculator lacks:
  maxProgrammableSlmSize, calculateAvailableThreadCount, calculateMaxWorkGroupSize (with Xe3's
  calculateNumThreadsPerThreadGroup), the SLM a work-group is programmed with (Xe-HPG: the next power
  of two; Xe3: computeSlmValues' encodings) and getMaxWorkGroupCount's per-Xe-core bounds.

Then the cases the issue measured: the declared matmul's 66 KB of SLM on mtl (cannot launch), a
device without the kit's figures ("not checked", never "-"), and grf_mode small's GRF rule label.
"""

from __future__ import annotations

import math

import pytest

from tests.support import compute_runtime
from xpukit.targets import FAMILIES, check_limits, max_work_group_size, occupancy

pytestmark = pytest.mark.unit

_PVC_STEPS = [0, 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128]
_DG2_STEPS = [0, 1, 2, 4, 8, 16, 32, 64]
# The calculator's device_info entries, as its index.html lists them (KB where it says KB).
CALCULATOR = {
    "bmg": {"EU_Per_Sub_Slice": 8, "Max_Threads_Per_Sub_Slice": 64, "Large_GRF_Mode": False,
            "Subgroup_Sizes": [32, 16], "SLM_Size_Per_Sub_Slice": 128, "SLM_Size_Per_Work_Group": 128,
            "TG_SLM_Sizes": _PVC_STEPS, "Max_Work_Group_Size": 1024, "Max_Num_Of_Workgroups": 64,
            "Max_Num_Of_Barrier_Registers": 64},
    "lnl": {"EU_Per_Sub_Slice": 8, "Max_Threads_Per_Sub_Slice": 64, "Large_GRF_Mode": False,
            "Subgroup_Sizes": [32, 16], "SLM_Size_Per_Sub_Slice": 128, "SLM_Size_Per_Work_Group": 128,
            "TG_SLM_Sizes": _PVC_STEPS, "Max_Work_Group_Size": 1024, "Max_Num_Of_Workgroups": 64,
            "Max_Num_Of_Barrier_Registers": 64},
    "mtl": {"EU_Per_Sub_Slice": 16, "Max_Threads_Per_Sub_Slice": 128, "Large_GRF_Mode": False,
            "Subgroup_Sizes": [32, 16, 8], "SLM_Size_Per_Sub_Slice": 128, "SLM_Size_Per_Work_Group": 64,
            "TG_SLM_Sizes": _DG2_STEPS, "Max_Work_Group_Size": 1024, "Max_Num_Of_Workgroups": 128,
            "Max_Num_Of_Barrier_Registers": 128},
    "pvc": {"EU_Per_Sub_Slice": 8, "Max_Threads_Per_Sub_Slice": 64, "Large_GRF_Mode": True,
            "Subgroup_Sizes": [32, 16], "SLM_Size_Per_Sub_Slice": 128, "SLM_Size_Per_Work_Group": 128,
            "TG_SLM_Sizes": _PVC_STEPS, "Max_Work_Group_Size": 1024, "Max_Num_Of_Workgroups": 64,
            "Max_Num_Of_Barrier_Registers": 64},
    "acm-g10": {"EU_Per_Sub_Slice": 16, "Max_Threads_Per_Sub_Slice": 128, "Large_GRF_Mode": False,
                "Subgroup_Sizes": [32, 16, 8], "SLM_Size_Per_Sub_Slice": 128, "SLM_Size_Per_Work_Group": 64,
                "TG_SLM_Sizes": _DG2_STEPS, "Max_Work_Group_Size": 1024, "Max_Num_Of_Workgroups": 128,
                "Max_Num_Of_Barrier_Registers": 128},
}  # fmt: skip
# Where the row uses compute-runtime's SLM pool instead of the calculator's, and says so in its
# ``figures`` (asserted below): the reference runs the calculator's algorithm on that figure.
DRIVER_POOL_KB = {"bmg": 160, "mtl": 96}


def calculator_work_groups(family: str, wg: int, sg: int, slm_kb: int, large_grf: bool, barrier: bool) -> int:
    """Work-groups per Xe core by the calculator's cal_occupancy + compute_ss_occupancy (0: refused)."""
    gpu = CALCULATOR[family]
    if wg > gpu["Max_Work_Group_Size"] or slm_kb > gpu["SLM_Size_Per_Work_Group"]:
        return 0  # cal_occupancy alerts on the work-group; the SLM slider stops at the per-work-group size
    for size in gpu["TG_SLM_Sizes"]:  # "Round of SLM value to Allowed values for TG SLM Size"
        if slm_kb <= size:
            slm_kb = size
            break
    pool_kb = DRIVER_POOL_KB.get(family, gpu["SLM_Size_Per_Sub_Slice"])
    max_num_wg = gpu["Max_Num_Of_Barrier_Registers"] if barrier else gpu["Max_Num_Of_Workgroups"]
    threads_ss = gpu["Max_Threads_Per_Sub_Slice"] // (2 if large_grf else 1)
    num_wg_threads = threads_ss // math.ceil(wg / sg)
    num_wg_slm = max_num_wg if slm_kb == 0 else pool_kb // slm_kb
    return min(num_wg_threads, num_wg_slm, max_num_wg)


CASES = [
    # (work-group, sub-group, SLM KB, large GRF)
    (128, 16, 0, False), (256, 32, 0, False), (512, 16, 16, False), (64, 16, 48, False),
    (1024, 32, 8, False), (32, 16, 0, False), (128, 32, 3, False), (256, 16, 20, False),
    (64, 16, 40, False), (128, 32, 64, False), (128, 32, 66, False), (256, 16, 100, False),
    (128, 16, 128, False), (128, 16, 129, False), (2048, 32, 0, False), (1024, 8, 0, False),
    (128, 16, 0, True), (256, 16, 24, True), (512, 16, 0, True), (1024, 32, 8, True),
]  # fmt: skip


@pytest.mark.parametrize("family", sorted(CALCULATOR))
@pytest.mark.parametrize("barrier", [False, True])
@pytest.mark.parametrize(("wg", "sg", "slm_kb", "large"), CASES)
def test_work_groups_per_xe_core_follow_the_occupancy_calculator(family, barrier, wg, sg, slm_kb, large):
    gpu = CALCULATOR[family]
    if large and not gpu["Large_GRF_Mode"]:
        pytest.skip("the calculator offers large GRF mode on pvc only")
    if sg not in gpu["Subgroup_Sizes"]:
        pytest.skip(f"the calculator offers sub-groups {gpu['Subgroup_Sizes']} on {family}")
    ours = occupancy(family, sg, 256 if large else 128, wg, slm_kb * 1024, barriers=int(barrier))
    assert ours is not None
    assert ours["work_groups_per_xe_core"] == calculator_work_groups(family, wg, sg, slm_kb, large, barrier)
    if ours["work_groups_per_xe_core"] == 0:
        assert ours["cannot_launch"] and ours["limited_by"] in ("work_group_size", "slm_per_work_group")
    elif slm_kb and family in DRIVER_POOL_KB:
        pool = DRIVER_POOL_KB[family]
        calc = gpu["SLM_Size_Per_Sub_Slice"]
        assert f"SLM pool {pool} KB (compute-runtime; calculator {calc} KB)" in ours["figures"]


def test_the_per_work_group_caps_are_the_calculators_and_the_drivers():
    """SLM per work-group: 64 KB on the Xe-HPG line (acm-g10, mtl, arl-h), 128 KB on pvc, Xe2 and Xe3,
    192 KB on nvl-p, 384 KB on cri (calculator's SLM_Size_Per_Work_Group where it has the family;
    compute-runtime's maxProgrammableSlmSize for all eleven)."""
    driver_kb = {"pvc": 128, "bmg": 128, "acm-g10": 64, "arl-h": 64, "mtl": 64, "lnl": 128, "ptl": 128,
                 "wcl": 128, "nvl-s": 128, "nvl-p": 192, "cri": 384}  # fmt: skip
    assert sorted(driver_kb) == sorted(f.name for f in FAMILIES)
    for family, kb in driver_kb.items():
        if family in CALCULATOR:
            assert CALCULATOR[family]["SLM_Size_Per_Work_Group"] == kb
        assert check_limits(family, kb * 1024, None, None, None) == []
        assert check_limits(family, kb * 1024 + 1, None, None, None) == [
            f"SLM {kb * 1024 + 1} B > {kb * 1024} B per work-group"
        ]
        occ = occupancy(family, 16, 128, 64, kb * 1024 + 1)
        if family == "nvl-p":  # its XVEs per Xe core are unknown: occupancy not checked, the caps still are
            assert occ is None
            continue
        assert occ is not None and occ["work_groups_per_xe_core"] == 0 and occ["threads_per_xve"] == 0
        assert occ["cannot_launch"] == f"SLM {(kb * 1024 + 1) / 1024:g} KB > {kb} KB on {family}"


# compute-runtime's figures for the families the calculator lacks.
def _xe3_threads(grf: int) -> int:  # gfx_core_helper_xe3_core: calculateAvailableThreadCount
    return next(t for most, t in ((96, 10), (128, 8), (160, 6), (192, 5), (256, 4)) if grf <= most)


DRIVER = {
    "arl-h": {"xve": 16, "threads": lambda grf: 4 if grf == 256 else 8, "slm_wg_kb": 64, "pool_kb": 128, "xe3": False},
    "ptl": {"xve": 8, "threads": _xe3_threads, "slm_wg_kb": 128, "pool_kb": 192, "xe3": True},
}  # fmt: skip


def driver_max_work_group_size(family: str, simd: int, grf: int) -> int:
    return compute_runtime.max_work_group_size(simd, grf, xe3=DRIVER[family]["xe3"])


def driver_slm_kb(family: str, slm_kb: int) -> int:
    """The SLM a work-group is programmed with: Xe-HPG the next power of two (alignSlmSizePerThreadGroup),
    Xe3 computeSlmValues' encodings (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128 KB)."""
    if not DRIVER[family]["xe3"]:
        return 1 << max(0, math.ceil(math.log2(slm_kb)))
    return next(step for step in (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128) if step >= slm_kb)


def driver_work_groups(family: str, wg: int, simd: int, grf: int, slm_kb: int) -> int:
    fig = DRIVER[family]
    if wg > driver_max_work_group_size(family, simd, grf) or slm_kb > fig["slm_wg_kb"]:
        return 0
    groups = fig["threads"](grf) * fig["xve"] // math.ceil(wg / simd)
    if slm_kb:
        groups = min(groups, fig["pool_kb"] // driver_slm_kb(family, slm_kb))
    return groups


@pytest.mark.parametrize("family", sorted(DRIVER))
@pytest.mark.parametrize(
    ("wg", "simd", "grf", "slm_kb"),
    [(128, 16, 128, 0), (256, 32, 128, 0), (512, 16, 128, 16), (64, 16, 128, 48), (1024, 16, 128, 8),
     (1024, 16, 256, 0), (512, 16, 256, 3), (1024, 32, 256, 0), (128, 16, 96, 5), (1024, 16, 160, 0),
     (768, 16, 160, 0), (640, 16, 192, 20), (768, 16, 192, 0), (1024, 32, 160, 40), (128, 32, 128, 64),
     (128, 32, 128, 66), (128, 16, 128, 100), (128, 16, 128, 129), (2048, 32, 128, 0)],
)  # fmt: skip
def test_work_groups_per_xe_core_follow_compute_runtime(family, wg, simd, grf, slm_kb):
    if not DRIVER[family]["xe3"] and grf not in (128, 256):
        pytest.skip("Xe-HPG builds 128 or 256 GRF")
    ours = occupancy(family, simd, grf, wg, slm_kb * 1024)
    assert ours is not None
    assert ours["work_groups_per_xe_core"] == driver_work_groups(family, wg, simd, grf, slm_kb)
    assert ours["threads_per_xve_max"] == DRIVER[family]["threads"](grf)
    assert max_work_group_size(family, simd, grf) == driver_max_work_group_size(family, simd, grf)
    assert ours["figures"] == []  # one source for these: nothing to choose between


def test_work_group_size_cap_on_every_family():
    """1024 work-items, 512 for a non-SIMD32 kernel at 256 GRF; on ptl (Xe3) 768 at 160 GRF, 640 at 192."""
    for f in FAMILIES:
        assert max_work_group_size(f.name, 32, 128) == 1024 and max_work_group_size(f.name, 16, 256) == 512
        assert check_limits(f.name, 0, None, 16, 1024) == []
        assert "work-group 1024 > 512 at SIMD16, 256 GRF" in (check_limits(f.name, 0, 256, 16, 1024) or [])
    assert check_limits("ptl", 0, 160, 16, 1024) == ["work-group 1024 > 768 at SIMD16, 160 GRF"]
    assert max_work_group_size("ptl", 16, 192) == 640 and max_work_group_size("bmg", 16, 192) == 1024
    assert max_work_group_size("tgllp", 16, 128) is None


# --------------------------------------------------------------------------- what a report says


def _report(target: str, **row: object) -> dict:
    from xpukit.runtime.offline.isa import SEND_KINDS, IsaCounts

    counts = IsaCounts(100, dict.fromkeys(SEND_KINDS, 0), dpas=0, math=0, moves=0, control_flow=0, barriers=1)
    base = {"target": target, "config": "declared", "error": None, "simd": 32, "grf": 128, "grf_mode": "default",
            "grf_retry": False, "work_group": 128, "scratch_bytes": 0, "private_bytes": 0, "slm_bytes": 0,
            "counts": counts.to_dict(), "limits": [], "occupancy": None, "spills": None}  # fmt: skip
    return {"kernel": "matmul_kernel", "ocloc": "ocloc", "targets": [target], "configs": [{"label": "declared"}],
            "rows": [base | row]}  # fmt: skip


def _cells(report: dict) -> dict[str, str]:
    from tests.support.reports import as_report
    from xpukit.runtime.offline.report_format import format_markdown

    lines = format_markdown(as_report(report)).splitlines()
    header = [c.strip() for c in lines[2].strip("|").split("|")]
    return dict(zip(header, (c.strip() for c in lines[4].strip("|").split("|")), strict=True))


def test_the_declared_matmul_cannot_launch_on_mtl():
    """examples/matmul.py's declared 128x128x32 tile as compiled for mtl with no launch hints
    (measured: SIMD32, 128 GRF, 4 warps, 67,584 B of SLM; with a launch's hints it takes 16,384 B): over
    mtl's 64 KB per work-group, so 0 work-groups, and the over-limit column says it cannot launch.
    On pvc (128 KB) it fits."""
    slm = 67584
    for family in ("mtl", "arl-h", "acm-g10"):
        occ = occupancy(family, 32, 128, 128, slm, barriers=1)
        assert occ is not None and occ["work_groups_per_xe_core"] == 0 and occ["limited_by"] == "slm_per_work_group"
        assert occ["cannot_launch"] == f"SLM 66 KB > 64 KB on {family}" and occ["figures"] == []
        limits = check_limits(family, slm, 128, 32, 128)
        assert limits == ["SLM 67584 B > 65536 B per work-group"]
        cells = _cells(_report(family, slm_bytes=slm, limits=limits, occupancy=occ))
        refused = f"cannot launch: SLM 66 KB > 64 KB on {family}"
        assert cells["over limit"] == f"{refused}; SLM 67584 B > 65536 B per work-group"
        assert cells["occupancy"].startswith("0/8 thr/XVE, 0 WG/Xe core (slm_per_work_group): cannot launch")
    pvc = occupancy("pvc", 16, 128, 64, slm, barriers=1)
    assert pvc is not None and pvc["work_groups_per_xe_core"] > 0 and pvc["cannot_launch"] is None
    assert check_limits("pvc", slm, 128, 16, 64) == []


def test_the_row_names_the_figure_it_used_where_the_sources_disagree():
    occ = occupancy("bmg", 16, 128, 128, 40 * 1024, barriers=1)
    assert occ is not None and occ["limited_by"] == "slm" and occ["work_groups_per_xe_core"] == 160 // 48
    assert occ["figures"] == [
        "SLM pool 160 KB (compute-runtime; calculator 128 KB)",
        "64 barrier registers (calculator; compute-runtime 32)",
    ]
    cell = _cells(_report("bmg", simd=16, slm_bytes=40 * 1024, occupancy=occ))["occupancy"]
    assert cell == (
        "3/8 thr/XVE, 3 WG/Xe core (slm) [SLM pool 160 KB (compute-runtime; calculator 128 KB); "
        "64 barrier registers (calculator; compute-runtime 32)]"
    )
    mtl = occupancy("mtl", 32, 128, 128, 40 * 1024)
    assert mtl is not None and mtl["figures"] == ["SLM pool 96 KB (compute-runtime; calculator 128 KB)"]
    # No SLM, no barriers: no disagreeing figure was used.
    assert occupancy("bmg", 16, 128, 128)["figures"] == []  # type: ignore[index]

    from xpukit.runtime.offline.line_view import occupancy_summary
    from xpukit.runtime.offline.report_model import Occupancy, Row

    summary = occupancy_summary(Row("bmg", "declared", occupancy=Occupancy.from_dict(occ)))
    assert "figures used: SLM pool 160 KB (compute-runtime; calculator 128 KB)" in summary


def test_a_device_without_the_kits_figures_is_not_checked():
    """tgllp compiles (ocloc knows it) but the kit has no figures for it: JSON null and "not checked",
    never "-" (which the legend defines as "none exceeded") or 0 work-groups."""
    from xpukit.runtime.offline.line_view import occupancy_summary
    from xpukit.runtime.offline.report_format import LEGEND, diff_reports

    assert check_limits("tgllp", 10**9, 128, 16, 4096) is None
    assert occupancy("tgllp", 16, 128, 128, 10**9) is None
    report = _report("tgllp", limits=None, occupancy=None)
    cells = _cells(report)
    assert cells["over limit"] == "not checked" and cells["occupancy"] == "not checked"
    assert "-: none exceeded" in LEGEND and "not checked: the kit has no figures for this device" in LEGEND
    from tests.support.reports import as_report

    assert occupancy_summary(as_report(report).rows[0]) == (
        "occupancy not checked (the kit has no figures for this device)"
    )
    # A known family within its limits still says "-".
    assert _cells(_report("pvc", occupancy=occupancy("pvc", 32, 128, 128)))["over limit"] == "-"
    checked = _report("tgllp", limits=[])
    assert ("tgllp", "declared", "over limit", "not checked", "-") in diff_reports(
        as_report(report), as_report(checked)
    )


def test_grf_small_with_spills_names_what_igc_kept():
    """grf_mode small on a spilling kernel: Triton 3.3 appends the 256-GRF flag after the 128-GRF one
    and IGC keeps 128 (measured on pvc, examples/matmul.py's declared tile: GRF 128, 32,768 B of
    scratch per thread). The rule's label comes from the zebin's GRF count, not the flags."""
    from xpukit.runtime.kernels.kernel_report import _grf_rule
    from xpukit.runtime.offline.report_model import Row as ReportRow

    flags = "-cl-intel-128-GRF-per-thread -cl-intel-256-GRF-per-thread"
    kept = ReportRow("pvc", "grf_mode=small", grf=128, grf_mode="small", grf_retry=True, build_flags=flags,
                     scratch_bytes=32768)  # fmt: skip
    assert _grf_rule(kept).startswith("asked for 256, IGC kept 128: still spills (")
    clean = ReportRow("pvc", "grf_mode=small", grf=128, grf_mode="small", grf_retry=True, build_flags=flags)
    assert _grf_rule(clean).startswith("asked for 256, IGC kept 128 (")
    retried = ReportRow("pvc", "declared", grf=256, grf_retry=True, build_flags="-cl-intel-256-GRF-per-thread")
    assert _grf_rule(retried).startswith("retried at 256 GRF")
