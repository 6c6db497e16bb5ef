"""xpukit/targets.py: one record per family and every table derived from it; the four newest families'
occupancy against compute-runtime's own rules, ported here; the what-if table against hand
computations; the Occupancy Calculator link through the calculator's own algorithm; the n_regs note.

compute-runtime (intel/compute-runtime e37c60bf2a, 2026-08), the files each rule below is ported from:
- shared/source/helpers/gfx_core_helper_xe3_and_later.inl ``calculateAvailableThreadCount`` (threads per
  XVE by GRF on Xe3 and Xe3P), then the release helper's ``adjustMaxThreadsPerEuCount``:
  release_helper_cri.cpp (4 at 512 GRF, else 8), release_helper_common_xe3p_lpg.inl (nvl-p: 3 up to
  320 GRF, 2 up to 448);
- shared/source/helpers/gfx_core_helper_xehp_and_later.inl ``calculateMaxWorkGroupSize`` (halved for
  SIMD != 32 at 256 GRF) and xe3_core/, xe3p_core/gfx_core_helper_*.cpp ``calculateNumThreadsPerThreadGroup``
  with cri's ``adjustMaxThreadsPerThreadGroup`` (xe3p_core/cri/os_agnostic_product_helper_cri.inl);
- maxProgrammableSlmSize: xe3p_core/hw_info_cri.cpp 384, xe3p_core/hw_info_nvlp.cpp 192,
  xe3_core/hw_info_nvls.cpp and hw_info_ptl.cpp (wcl runs PtlHwConfig: dll/devices/product_config_base.inl) 128;
- the SLM a work-group is programmed with, ``alignSlmSizePerThreadGroup``: release_helper_preferred_slm_
  xe3p_cri_384k.inl and _xe3p_igpu_192k.inl (1 KB steps up to 16 KB, then 24 ... 384), Xe3's in
  xe3_core/command_encoder_xe3_core.cpp; the SLM pool, the largest preferred-SLM entry
  (release_helper_common_xe3_lpg.inl 192 KB, the Xe3P files 192 and 384 KB).
"""

from __future__ import annotations

import dataclasses
import json
import math
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support import compute_runtime
from xpukit import targets
from xpukit.targets import (
    FAMILIES,
    FAMILY,
    OCCUPANCY,
    PRESETS,
    calculator_link,
    check_limits,
    max_work_group_size,
    n_regs_note,
    occupancy,
    occupancy_what_if,
    zebin_family,
)

pytestmark = pytest.mark.unit
KB = 1024
ELEVEN = ["pvc", "bmg", "acm-g10", "arl-h", "mtl", "lnl", "ptl", "wcl", "nvl-s", "nvl-p", "cri"]


# --------------------------------------------------------------------------- the derived tables


def test_every_table_is_derived_from_the_one_record_per_family():
    assert [f.name for f in FAMILIES] == ELEVEN
    assert {f.name: f for f in FAMILIES} == targets.FAMILY
    assert {f.name: f.iga_platform for f in FAMILIES} == targets.IGA_PLATFORM
    assert {a: f.name for f in FAMILIES for a in f.aliases} == targets.ALIASES
    assert {f.name: f.limits for f in FAMILIES if f.limits is not None} == targets.LIMITS
    assert {f.name: f.occupancy for f in FAMILIES if f.occupancy is not None} == targets.OCCUPANCY
    assert {f.name: f.architecture for f in FAMILIES if f.architecture is not None} == targets.SYCL_ARCH
    assert [n for n, p in PRESETS.items() if p.ocloc_device] == ELEVEN and set(PRESETS) == {*ELEVEN, "cpu"}
    # IGA's platforms: Xe-HPG's encoding for mtl and arl-h, Xe3P's for cri and nvl-p (their sends are sendg)
    assert {f.name: f.iga_platform for f in FAMILIES if f.name in ("mtl", "nvl-s", "wcl", "nvl-p", "cri")} == {
        "mtl": "xehpg", "wcl": "xe3", "nvl-s": "xe3", "nvl-p": "3pxpc", "cri": "3pxpc",
    }  # fmt: skip
    assert targets.iga_platform("ptl-h") == "xe3"
    with pytest.raises(targets.XpukitError, match="no IGA platform known for 'tgllp'"):
        targets.iga_platform("tgllp")
    # No alias names another family, no two families share a device or an IP release.
    assert not set(targets.ALIASES) & set(FAMILY)
    assert len({f.ocloc_device for f in FAMILIES}) == len({f.ip_version >> 14 for f in FAMILIES}) == len(FAMILIES)


def test_a_zebin_names_its_family_by_ip_version_where_product_families_collide():
    """wcl's zebins say ptl's product family (1300), read off ocloc 26.27's zebins; their IP versions
    (30.3.1 and 30.0.4: architecture.release.step) tell them apart, any stepping of either."""
    assert [f.name for f in FAMILIES if f.product_family == 1300] == ["ptl", "wcl"]
    assert targets.PRODUCT_FAMILY[1300] == "ptl"
    assert zebin_family(1300, FAMILY["wcl"].ip_version) == "wcl"
    assert zebin_family(1300, (30 << 22) | (3 << 14)) == "wcl"  # another stepping
    assert zebin_family(1300, FAMILY["ptl"].ip_version) == zebin_family(1300) == "ptl"
    assert zebin_family(1300, (30 << 22) | (1 << 14)) == "ptl"  # a release outside the table: its product family
    assert zebin_family(1380, 0x08C2C000) == "cri" and zebin_family(1360) == "nvl-p"
    assert zebin_family(9999, 0x0) is None
    for f in FAMILIES:
        assert zebin_family(f.product_family, f.ip_version) == f.name


def test_the_newest_families_compile_with_ptls_triton_properties():
    """cri, nvl-p, nvl-s and wcl take ptl's Triton 3.3 properties (tests/image/test_families.py checks
    that ocloc reports the same extensions for each): same SPIR-V, their own ocloc device."""
    for name in ("cri", "nvl-p", "nvl-s", "wcl"):
        family, preset = FAMILY[name], PRESETS[name]
        assert family.triton_from == "ptl" and family.triton == FAMILY["ptl"].triton
        assert family.dpas and family.block_io_2d and family.sub_group_sizes == (16, 32)  # the old names still read
        assert preset.ocloc_device == name and preset.architecture == 0
        assert preset.codegen_key() == PRESETS["ptl"].codegen_key()
        ours = dataclasses.replace(preset, name="ptl", ocloc_device="ptl-h")
        assert ours == PRESETS["ptl"]
    assert all(f.triton_from is None for f in FAMILIES[:7])
    assert dataclasses.replace(FAMILY["cri"]).name == "cri"  # a copy of a record (its __getattr__ guards)


def test_the_docs_tables_list_every_family():
    from xpukit.host.versions import docs_tables

    for table in (docs_tables.targets_table(None), docs_tables.families_table(None), docs_tables.occupancy_table(None)):
        for f in FAMILIES:
            assert f"| `{f.name}` |" in table
    status = docs_tables.families_table(None)
    assert status.count(docs_tables.NO_GPU) == len(FAMILIES)  # no family ran on its GPU here
    assert "| `wcl` | Xe3-LPG | `xe3` | `ptl`'s (nearest known) |" in status
    assert docs_tables._steps((0, 1, 2, 4)) == "0, 1, 2, 4" and docs_tables._steps((*range(17), 24)) == "0-16, 24"


# --------------------------------------------------------------------------- compute-runtime's figures


def driver_threads_per_xve(family: str, grf: int) -> int:
    """calculateAvailableThreadCount (Xe3 and later), then adjustMaxThreadsPerEuCount."""
    threads = 1
    for most, count in ((96, 10), (128, 8), (160, 6), (192, 5), (256, 4)):
        if grf <= most:
            threads = count
            break
    if family == "cri":
        return 4 if grf == 512 else 8
    if family == "nvl-p" and grf > 256:  # B0 and later (NVL_P_A0 has no 320/448 GRF)
        threads = 3 if grf <= 320 else 2 if grf <= 448 else threads
    return threads


def driver_max_work_group_size(family: str, simd: int, grf: int) -> int:
    return compute_runtime.max_work_group_size(simd, grf, xe3=True, cri=family == "cri")


# getSupportedNumGrfs: release_helper_ptl_h.cpp, _wcl.cpp, _nvl_s.cpp; release_helper_common_xe3p_lpg.inl; _cri.cpp
_XE3_GRFS = (32, 64, 96, 128, 160, 192, 256)
GRFS = {"nvl-s": _XE3_GRFS, "wcl": _XE3_GRFS, "nvl-p": (*_XE3_GRFS, 320, 448, 512), "cri": (*_XE3_GRFS, 512)}
DRIVER = {  # maxProgrammableSlmSize, SLM pool (KB), whether SLM is aligned in 1 KB steps up to 16 KB (Xe3P)
    "cri": (384, 384, True), "nvl-p": (192, 192, True), "nvl-s": (128, 192, False), "wcl": (128, 192, False),
}  # fmt: skip
XE3_ALIGN = (0, 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384)  # command_encoder_xe3_core.cpp
XE3P_ALIGN = (24, 32, 48, 64, 96, 128, 192, 256, 320, 384)  # above 16 KB


def driver_slm_kb(family: str, slm_kb: int) -> int:
    if not DRIVER[family][2]:
        return next(step for step in XE3_ALIGN if step >= slm_kb)
    return slm_kb if slm_kb <= 16 else next(step for step in XE3P_ALIGN if step >= slm_kb)


@pytest.mark.parametrize("family", sorted(DRIVER))
@pytest.mark.parametrize(
    ("wg", "simd", "grf", "slm_kb"),
    [(128, 16, 64, 0), (128, 32, 64, 5), (256, 16, 96, 13), (512, 16, 128, 17), (1024, 16, 160, 0),
     (1024, 16, 192, 40), (768, 16, 160, 0), (640, 16, 192, 100), (1024, 16, 256, 0), (512, 16, 256, 129),
     (1024, 32, 256, 150), (512, 16, 512, 0), (256, 32, 512, 200), (1024, 32, 512, 0), (64, 16, 320, 1),
     (64, 16, 448, 300), (2048, 32, 128, 0), (128, 16, 128, 385)],
)  # fmt: skip
def test_the_newest_families_follow_compute_runtime(family, wg, simd, grf, slm_kb):
    if grf not in GRFS[family]:
        pytest.skip(f"{family} builds no {grf}-GRF kernel")
    wg_kb, pool_kb, _ = DRIVER[family]
    assert max_work_group_size(family, simd, grf) == driver_max_work_group_size(family, simd, grf)
    assert OCCUPANCY[family].threads_per_xve(grf) == driver_threads_per_xve(family, grf)
    over = check_limits(family, slm_kb * KB, grf, simd, wg)
    assert over is not None and (slm_kb > wg_kb) == any(o.startswith("SLM") for o in over)
    occ = occupancy(family, simd, grf, wg, slm_kb * KB)
    if family == "nvl-p":  # XVEs per Xe core: no source at hand, so no occupancy (its caps above still hold)
        assert occ is None and FAMILY[family].occupancy.xve_per_xe_core is None
        return
    assert occ is not None and occ["threads_per_xve_max"] == driver_threads_per_xve(family, grf)
    if wg > driver_max_work_group_size(family, simd, grf) or slm_kb > wg_kb:
        assert occ["work_groups_per_xe_core"] == 0 and occ["cannot_launch"]
        return
    groups = driver_threads_per_xve(family, grf) * 8 // math.ceil(wg / simd)  # 8 XVEs per Xe core
    if slm_kb:
        groups = min(groups, pool_kb // driver_slm_kb(family, slm_kb))
    assert occ["work_groups_per_xe_core"] == groups
    igc = IGC_THREADS.get(family, {}).get(grf)
    ours = driver_threads_per_xve(family, grf)
    assert occ["figures"] == ([f"threads per XVE at {grf} GRF: {ours} (compute-runtime; IGC {igc})"] if igc else [])


# IGC's eu_thread_count in .ze_info where it differs from compute-runtime's (read off ocloc 26.27 zebins built
# with -ze-exp-register-file-size N): cri 6, 5, 4 at 160, 192, 256 GRF (the driver: 8 below 512); nvl-p 2 at
# 512 (the driver: 1). The kit counts the driver's and names IGC's.
IGC_THREADS = {"cri": {160: 6, 192: 5, 256: 4}, "nvl-p": {512: 2}}


def test_where_igc_counts_other_threads_the_row_names_both():
    occ = occupancy("cri", 16, 256, 128)
    assert occ is not None and occ["threads_per_xve_max"] == 8
    assert occ["figures"] == ["threads per XVE at 256 GRF: 8 (compute-runtime; IGC 4)"]
    assert occupancy("cri", 16, 64, 128)["figures"] == []  # type: ignore[index]  # IGC says 8 there too
    assert dict(FAMILY["nvl-p"].occupancy.figures) == {
        "threads@512": "threads per XVE at 512 GRF: 1 (compute-runtime; IGC 2)"
    }


# --------------------------------------------------------------------------- what-ifs


def test_what_if_on_pvc_by_hand():
    """pvc, SIMD16, 128 GRF, 40 KB of SLM, one barrier, 4 warps. By hand: 8 threads x 8 XVEs = 64
    slots, the calculator's 64 work-groups and 64 barrier registers; 40 KB rounds up to the 48 KB step
    and 128 // 48 = 2 work-groups (slm): 2 x 4 threads / 64 = 12.5 %."""
    occ = occupancy("pvc", 16, 128, 64, 40 * KB, barriers=1)
    assert occ is not None and (occ["work_groups_per_xe_core"], occ["occupancy_pct"]) == (2, 12.5)
    table = occ["what_if"]
    assert table == occupancy_what_if("pvc", 16, 128, 40 * KB, 1, 4)
    assert table["num_warps"] == [1, 2, 4, 8, 16, 32]
    assert table["slm_bytes"] == [k * KB for k in (0, 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)]
    wgs = {
        kb: [row[table["slm_bytes"].index(kb * KB)] for row in table["work_groups_per_xe_core"]]
        for kb in (0, 32, 48, 128)
    }
    assert wgs[0] == [64, 32, 16, 8, 4, 2]  # 64 // warps (the work-group and barrier caps: 64)
    assert wgs[32] == [4, 4, 4, 4, 4, 2]  # 128 // 32 = 4, until 32 warps leave room for 2
    assert wgs[48] == [2] * 6 and wgs[128] == [1] * 6
    assert table["limited_by"][2][8] == "slm" and table["limited_by"][5][0] == "threads"
    assert table["occupancy_pct"][5][0] == 100.0 and table["occupancy_pct"][0][11] == 1.6  # 1 of 64 slots
    assert table["row"] == {"num_warps": 4, "slm_bytes": 48 * KB}
    # The next step each way: 32 KB doubles the work-groups; 96 KB halves them; 2 or 8 warps keep 2
    # work-groups with 4 or 16 threads (6.2 % or 25 %).
    assert [(n["change"], n["to"], n["work_groups_per_xe_core"], n["occupancy_pct"]) for n in table["next"]] == [
        ("slm_bytes", 32 * KB, 4, 25.0), ("slm_bytes", 96 * KB, 1, 6.2),
        ("num_warps", 2, 2, 6.2), ("num_warps", 8, 2, 25.0),
    ]  # fmt: skip
    assert json.loads(json.dumps(occ)) == occ  # JSON-ready


def test_what_if_on_xe3_families_by_hand():
    """cri, SIMD16, the 64 GRF IGC picks, 20 KB of SLM, 8 warps: 8 threads x 8 XVEs = 64 slots, 8
    work-groups (threads, 100 %); 20 KB is programmed as 24 KB (Xe3P's steps), 384 // 24 = 16. Less SLM
    changes nothing; 64 KB leaves 6 (75 %); 4 warps 16 work-groups, 16 warps 4. ptl at 96 GRF: 10
    threads per XVE, 80 slots; at 160 GRF 32 warps still fit (48 threads), at 256 GRF a SIMD16 work-group
    of 32 warps is 512 work-items, the cap: 64 warps (1024) cannot launch."""
    table = occupancy_what_if("cri", 16, 64, 20 * KB, 0, 8)
    assert table is not None and table["slm_bytes"][:18] == [k * KB for k in range(17)] + [24 * KB]
    assert table["slm_bytes"][-3:] == [256 * KB, 320 * KB, 384 * KB]
    row = table["num_warps"].index(8)
    assert table["row"] == {"num_warps": 8, "slm_bytes": 24 * KB}
    assert table["work_groups_per_xe_core"][row][table["slm_bytes"].index(24 * KB)] == 8
    assert [(n["change"], n["to"], n["work_groups_per_xe_core"], n["occupancy_pct"]) for n in table["next"]] == [
        ("slm_bytes", 64 * KB, 6, 75.0), ("num_warps", 4, 16, 100.0), ("num_warps", 16, 4, 100.0),
    ]  # fmt: skip
    ptl = occupancy_what_if("ptl", 16, 96, 0, 0, 4)
    assert ptl is not None and [r[0] for r in ptl["work_groups_per_xe_core"]] == [80, 40, 20, 10, 5, 2]
    assert [r[0] for r in ptl["occupancy_pct"]] == [100.0, 100.0, 100.0, 100.0, 100.0, 80.0]
    assert occupancy_what_if("ptl", 16, 160, 0, 0, 4)["work_groups_per_xe_core"][-1][0] == 1  # type: ignore[index]
    big = occupancy_what_if("ptl", 16, 256, 0, 0, 64)
    assert big is not None and big["num_warps"][-1] == 64 and big["work_groups_per_xe_core"][-1][0] == 0
    assert big["limited_by"][-1][0] == "work_group_size"
    assert occupancy_what_if("nvl-p", 16, 64) is None and occupancy_what_if("tgllp", 16, 128) is None


def test_what_if_over_the_slm_cap_gets_its_own_column():
    table = occupancy_what_if("mtl", 32, 128, 67584, 1, 4)  # the declared matmul's 66 KB: over mtl's 64 KB
    assert table is not None and table["slm_bytes"][-1] == 66 * KB and table["row"]["slm_bytes"] == 66 * KB
    assert {row[-1] for row in table["work_groups_per_xe_core"]} == {0}
    assert table["next"][0]["change"] == "slm_bytes" and table["next"][0]["to"] == 64 * KB


# --------------------------------------------------------------------------- the calculator link


def calculator_work_groups(gpu: list[str], wg: int, sg: int, slm_kb: int, barrier: bool) -> int:
    """oneAPI-samples 6f5ade58 Tools/GPU-Occupancy-Calculator/index.html: load_url_params' fields, the
    SLM rounding and Max_Work_Group_Size check of cal_occupancy, compute_ss_occupancy (large GRF off)."""
    max_threads, slm_ss, slm_wg = int(gpu[3]), int(gpu[6]), int(gpu[7])
    steps, max_wg_size, max_num_wg, barriers = json.loads(gpu[8]), int(gpu[9]), int(gpu[10]), int(gpu[11])
    if wg > max_wg_size or slm_kb > slm_wg:
        return 0
    slm_kb = next((s for s in steps if slm_kb <= s), slm_kb)
    if barrier:
        max_num_wg = barriers
    by_threads = max_threads // math.ceil(wg / sg)
    by_slm = max_num_wg if slm_kb == 0 else slm_ss // slm_kb
    return min(by_threads, by_slm, max_num_wg)


@pytest.mark.parametrize("family", ["arl-h", "ptl", "wcl", "nvl-s", "cri"])
@pytest.mark.parametrize("grf", [64, 96, 128, 160, 192, 256, 512])
def test_the_calculator_link_opens_it_prefilled_with_the_kits_figures(family, grf):
    """A family the calculator lacks links its page with ``?gpu=`` (the parameter its README documents
    and load_url_params reads, 12 values and a name): its own algorithm on those values gives the kit's
    work-groups per Xe core, at the row's GRF count and SIMD."""
    if (family == "arl-h" and grf not in (128, 256)) or (family != "cri" and grf == 512):
        pytest.skip("a GRF count the family does not build")
    for simd in (16, 32):
        link = calculator_link(family, simd, grf)
        assert link is not None and link["prefilled"] and link["entry"] is None
        url = urlsplit(link["url"])
        assert f"{url.scheme}://{url.netloc}{url.path}" == targets.CALCULATOR_URL
        assert url.netloc == "oneapi-src.github.io" and url.path == "/oneAPI-samples/Tools/GPU-Occupancy-Calculator/"
        values = parse_qs(url.query)["gpu"][0].split(";")
        assert len(values) == 13 and values[12] == f"xpukit_{family}_one_Xe-core_GRF{grf}_SIMD{simd}"
        assert json.loads(values[5])[0] == simd and values[4] == ""  # the row's SIMD first; no large-GRF halving
        for wg, slm_kb, barrier in [(64, 0, False), (128, 3, True), (256, 17, False), (512, 40, True), (1024, 0, False),
                                    (128, 100, False), (32, 129, False), (64, 300, False)]:  # fmt: skip
            occ = occupancy(family, simd, grf, wg, slm_kb * KB, int(barrier))
            assert occ is not None and occ["calculator"] == link
            assert occ["work_groups_per_xe_core"] == calculator_work_groups(values, wg, simd, slm_kb, barrier)


def test_families_the_calculator_has_name_its_entry():
    entries = {  # index.html's GPU list, the "name" of each entry
        "pvc": "Discrete GPU (Xe HPC / Data Center Max / PVC)",
        "bmg": "Discrete GPU (Xe2 HPG / Arc™ Graphics / BMG)",
        "acm-g10": "Discrete GPU (Xe HPG / Arc™ Graphics / DG2)",
        "mtl": "Integrated GPU (Xe LPG / Arc™ Graphics / MTL)",
        "lnl": "Integrated GPU (Xe2 LPG / Arc™ Graphics / LNL)",
    }
    for f in FAMILIES:
        link = calculator_link(f.name, 16, 128)
        if f.name in entries:
            assert link == {"url": targets.CALCULATOR_URL, "entry": entries[f.name], "prefilled": False}
        elif f.name == "nvl-p":
            assert link is None  # its XVE count is unknown: no link with a made-up figure
        else:
            assert link is not None and link["prefilled"]


# --------------------------------------------------------------------------- n_regs


def test_n_regs_on_families_where_igc_picks_the_grf_count():
    """Xe3/Xe3P: IGC picks the GRF count (64 for a small kernel, read off ocloc 26.27's zebins), while
    upstream's launcher reports n_regs=128 when no grf_mode is given (IXB #7416)."""
    assert [f.name for f in FAMILIES if f.auto_grf] == ["ptl", "wcl", "nvl-s", "nvl-p", "cri"]
    note = n_regs_note("cri", 64)
    assert note is not None and (note["grf_count"], note["upstream_n_regs"], note["differs"]) == (64, 128, True)
    assert "#7416" in note["why"]
    assert n_regs_note("ptl", 128)["differs"] is False  # type: ignore[index]
    assert n_regs_note("ptl", 256, "large")["upstream_n_regs"] == 256  # type: ignore[index]
    assert n_regs_note("ptl", 96, "auto")["upstream_n_regs"] is None  # type: ignore[index]
    assert n_regs_note("pvc", 128) is None and n_regs_note("tgllp", 64) is None
    assert occupancy("wcl", 16, 64, 128)["n_regs"] == n_regs_note("wcl", 64)  # type: ignore[index]
    assert occupancy("pvc", 16, 128, 128)["n_regs"] is None  # type: ignore[index]
