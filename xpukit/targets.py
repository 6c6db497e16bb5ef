"""Intel GPU compile targets: the presets the kit compiles for, their aliases, and --target lists.

Ground level: imports nothing from xpukit but its error type, so the runtime (tritonc, ocloc,
zebin_stage, compile, launch) and the host kit share one definition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from xpukit.errors import XpukitError

# The targets table: one row per Intel GPU family the kit names. Sources, per column:
# - architecture: SYCL's experimental architecture enum (intel/llvm, sycl/include/sycl/ext/oneapi/
#   experimental/architectures.def: intel_gpu_pvc 0x030f000700, intel_gpu_acm_g10 0x030dc00800,
#   intel_gpu_mtl_h 0x0311c00400, intel_gpu_arl_h 0x0312800400, intel_gpu_bmg_g21 0x0500400400,
#   intel_gpu_lnl_m 0x0501000400). intel_gpu_ptl_h's value was not readable in any source at hand:
#   None, so Triton's arch parser gives "" for ptl and the backend uses this table's properties as
#   they are (no ``ocloc query``); the zebin stage takes ptl's ocloc device from the table.
# - triton_arch: the name upstream's arch_parser.c gives that enum value (acm-g10 is "dg2" there).
# - product_family: PRODUCT_FAMILY in a zebin's .note.intelgt.compat (read off ocloc 26.27's zebins).
# - dpas / block_io_2d / tf32 / fp64 / bf16: ``ocloc query CL_DEVICE_EXTENSIONS -device D`` of ocloc
#   26.27 (cl_intel_subgroup_matrix_multiply_accumulate, cl_intel_subgroup_2d_block_io,
#   cl_intel_subgroup_matrix_multiply_accumulate_tf32, cl_khr_fp64, cl_intel_bfloat16_conversions).
# - sub_group_sizes: SIMD widths the compiler builds (Xe-HPG/Xe-LPG: 8/16/32; Xe-HPC and later: 16/32).
# - limits: see LIMITS below; "unknown" where no public source gives them.
UNKNOWN = "unknown"


@dataclasses.dataclass(frozen=True)
class Family:
    """One Intel GPU family: its names, how ocloc and Triton see it, and what the hardware has."""

    name: str  # the kit's name (--target)
    aliases: tuple[str, ...]  # other names users and ocloc give it
    ocloc_device: str  # the -device name ocloc takes
    product_family: int  # PRODUCT_FAMILY in the zebin's .note.intelgt.compat
    architecture: int | None  # SYCL architecture enum; None where no source gave it
    triton_arch: str  # upstream arch_parser's name for ``architecture``
    dpas: bool
    block_io_2d: bool
    tf32: bool
    fp64: bool
    bf16_conversions: bool
    sub_group_sizes: tuple[int, ...]
    max_work_group_size: int = 1024
    max_num_sub_groups: int = 64


FAMILIES: tuple[Family, ...] = (
    Family("pvc", (), "pvc", 1271, 0x030F000700, "pvc", True, True, True, True, True, (16, 32)),
    Family("bmg", ("bmg-g21",), "bmg", 1274, 0x0500400400, "bmg", True, True, True, True, True, (16, 32)),
    Family(
        "acm-g10", ("dg2", "dg2-g10"), "acm-g10", 1270, 0x030DC00800, "dg2",
        True, False, False, False, True, (8, 16, 32), max_num_sub_groups=128,
    ),
    Family("arl-h", (), "arl-h", 1273, 0x0312800400, "arl_h", True, False, False, True, True, (8, 16, 32)),
    Family("mtl", ("mtl-h",), "mtl-h", 1272, 0x0311C00400, "mtl", False, False, False, True, False, (8, 16, 32)),
    Family("lnl", ("lnl-m",), "lnl-m", 1275, 0x0501000400, "lnl", True, True, True, True, True, (16, 32)),
    Family("ptl", ("ptl-h",), "ptl-h", 1300, None, "", True, True, True, True, True, (16, 32)),
)  # fmt: skip
FAMILY = {f.name: f for f in FAMILIES}
# IGA's platform per family (``iga64 -h=p``: 12p72 xehpc, 12p71 xehpg, 2 xe2, 3 xe3), for decoding a
# kernel's text with IGA directly; ocloc disasm picks it from the device. mtl (Xe-LPG) and arl-h
# (Xe-LPG+) use Xe-HPG's encoding. tests/image checks each against ocloc's own disassembly.
IGA_PLATFORM = {
    "pvc": "xehpc",
    "bmg": "xe2",
    "acm-g10": "xehpg",
    "arl-h": "xehpg",
    "mtl": "xehpg",
    "lnl": "xe2",
    "ptl": "xe3",
}


def iga_platform(target: str) -> str:
    """IGA's platform name for a family, or a one-line error naming the family."""
    try:
        return IGA_PLATFORM[canonical(target)]
    except KeyError:
        raise XpukitError(
            f"no IGA platform known for {target!r}: its ISA cannot be decoded",
            f"use one of: {', '.join(IGA_PLATFORM)} (or add the family to xpukit/targets.py's IGA_PLATFORM)",
        ) from None


# Kept for callers that read the enum by name (launch.py maps a device's IP version through it).
SYCL_ARCH = {f.name: f.architecture for f in FAMILIES if f.architecture is not None}
TRITON_ARCH_NAME = {f.architecture: f.triton_arch for f in FAMILIES if f.architecture is not None}
ALIASES = {alias: f.name for f in FAMILIES for alias in f.aliases}
PRODUCT_FAMILY = {f.product_family: f.name for f in FAMILIES}


@dataclasses.dataclass(frozen=True)
class TargetPreset:
    """Device properties Triton's Intel backend reads from ``GPUTarget.arch``."""

    name: str
    ocloc_device: str  # the -device name ocloc takes; "" for the CPU device
    architecture: int
    max_work_group_size: int
    max_num_sub_groups: int
    sub_group_sizes: tuple[int, ...]
    has_fp64: bool
    has_subgroup_matrix_multiply_accumulate: bool
    has_subgroup_2d_block_io: bool
    has_bfloat16_conversions: bool
    has_subgroup_matrix_multiply_accumulate_tensor_float32: bool = False

    def props(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["sub_group_sizes"] = list(self.sub_group_sizes)
        return data

    def codegen_key(self) -> tuple[Any, ...]:
        """What Triton's Intel backend (triton-xpu 3.3, make_ttgir and min_dot_size) reads of the
        properties to generate code: targets with the same key get the same SPIR-V, so the kit
        compiles it once and runs ocloc per target (tests/image/test_families.py checks it)."""
        return (
            min(self.sub_group_sizes),
            self.has_subgroup_2d_block_io,
            self.has_subgroup_matrix_multiply_accumulate,
            self.has_subgroup_matrix_multiply_accumulate_tensor_float32,
            self.has_bfloat16_conversions,
        )


def family_preset(f: Family) -> TargetPreset:
    return TargetPreset(
        f.name,
        f.ocloc_device,
        f.architecture or 0,
        f.max_work_group_size,
        f.max_num_sub_groups,
        f.sub_group_sizes,
        f.fp64,
        f.dpas,
        f.block_io_2d,
        f.bf16_conversions,
        f.tf32,
    )


def device_preset(device: str, extensions: Iterable[str]) -> TargetPreset:
    """A preset for an ocloc device name outside the table (``tgllp``, ``bmg-g31``, ``nvl-s``...):
    its properties from the extensions ``ocloc query CL_DEVICE_EXTENSIONS -device D`` lists, no
    architecture (unknown), and the sub-group sizes every Intel GPU compiler builds (8 is left out:
    Xe-HPC and later have none, and Triton's code is built for the smallest size given)."""
    exts = set(extensions)
    return TargetPreset(
        device,
        device,
        0,
        1024,
        64,
        (16, 32),
        "cl_khr_fp64" in exts,
        "cl_intel_subgroup_matrix_multiply_accumulate" in exts,
        "cl_intel_subgroup_2d_block_io" in exts,
        "cl_intel_bfloat16_conversions" in exts,
        "cl_intel_subgroup_matrix_multiply_accumulate_tf32" in exts,
    )


# Presets for compiling without the device present. On a real device the session's properties
# come from UR device info instead. The "cpu" preset has no matrix engine and no 2D block IO, so
# tl.dot lowers to plain FMAs that Intel's CPU OpenCL runtime can run.
PRESETS: dict[str, TargetPreset] = {
    **{f.name: family_preset(f) for f in FAMILIES},
    "cpu": TargetPreset("cpu", "", 0, 8192, 1024, (8, 16, 32, 64), True, False, False, False),
}
GPU_PRESETS = tuple(name for name, p in PRESETS.items() if p.ocloc_device)


def canonical(name: str) -> str:
    """The preset name for a target or one of its aliases (unknown names pass through)."""
    return ALIASES.get(name, name)


def preset(name: str) -> TargetPreset:
    """The preset for a target name or alias, or an error listing the known ones."""
    try:
        return PRESETS[canonical(name)]
    except KeyError:
        raise XpukitError(f"unknown target {name!r}", f"use one of: {', '.join(PRESETS)}") from None


def preset_for_architecture(architecture: int | None) -> TargetPreset | None:
    if not architecture:
        return None
    return next((p for p in PRESETS.values() if p.ocloc_device and p.architecture == architecture), None)


DEFAULT_TARGET = "pvc"  # what --target means when it is not given


def split_targets(targets: str | Iterable[str] | None) -> list[str]:
    """``"pvc, dg2"`` or ``["pvc", "bmg,lnl"]`` -> preset names in order, aliases resolved, no repeats;
    None (not given) is the default target. An empty value is an error, not the default."""
    if targets is None:
        return [DEFAULT_TARGET]
    items = [targets] if isinstance(targets, str) else list(targets)
    names = [canonical(t.strip()) for item in items for t in item.split(",") if t.strip()]
    if not names:
        raise XpukitError("no target given", "pass --target pvc (comma-separated for several, or all)")
    return list(dict.fromkeys(names))


@dataclasses.dataclass(frozen=True)
class TargetLimits:
    """What Intel's GPU Occupancy Calculator's device table says one work-group may use on a target:
    ``check_limits`` flags a row's GRF count and sub-group size against it where the table has the family."""

    slm_per_work_group: int  # bytes of shared local memory one work-group may allocate
    grf_counts: tuple[int, ...]  # GRF registers per thread the hardware offers (256 = large GRF mode)
    sub_group_sizes: tuple[int, ...]
    max_work_group_size: int  # work-items
    source: str


# Every figure is from Intel's GPU Occupancy Calculator (oneapi-src/oneAPI-samples,
# Tools/GPU-Occupancy-Calculator/index.html, its device table): "Xe HPC / Data Center Max" (pvc):
# SLM_Size_Per_Work_Group 128 (KB), Large_GRF_Mode true, Subgroup_Sizes [32, 16],
# Max_Work_Group_Size 1024; "Xe HPG / Arc Graphics" and "Data Center Flex" (DG2, acm-g10):
# SLM_Size_Per_Work_Group 64, Large_GRF_Mode false, Subgroup_Sizes [32, 16, 8], Max_Work_Group_Size 1024.
# Without large GRF mode a thread has 128 GRFs. The calculator also lists BMG, LNL (since 2025-01) and
# MTL, each with Large_GRF_Mode false, while compute-runtime runs 256 GRF there (4 threads per XVE): their
# GRF and sub-group sizes are left unchecked rather than flag every 256-GRF retry on one source's word.
# The per-work-group SLM and work-group-size caps apply to every family: OCCUPANCY below.
_CALCULATOR = "Intel GPU Occupancy Calculator (oneAPI-samples)"
LIMITS: dict[str, TargetLimits] = {
    "pvc": TargetLimits(128 * 1024, (128, 256), (16, 32), 1024, _CALCULATOR),
    "acm-g10": TargetLimits(64 * 1024, (128,), (8, 16, 32), 1024, _CALCULATOR),
}


# --------------------------------------------------------------------------- static occupancy


@dataclasses.dataclass(frozen=True)
class OccupancyLimits:
    """What one Xe core holds (hardware threads, one per sub-group; SLM, work-groups, barriers) and
    what one work-group may take (its SLM; its threads on Xe3)."""

    xve_per_xe_core: int
    threads_by_grf: tuple[tuple[int, int], ...]  # (up to this many GRF, threads per XVE), ascending
    slm_per_xe_core: int  # bytes of the SLM pool work-groups share
    slm_steps_kb: tuple[int, ...] | None  # the sizes a work-group's SLM is rounded up to (None: 1 KB)
    max_work_groups: int | None  # work-groups per Xe core (None: no source gives it)
    barriers: int | None  # barrier registers per Xe core (None: no source gives it)
    source: str
    slm_per_work_group: int = 64 * 1024  # bytes one work-group may allocate (maxProgrammableSlmSize)
    # Xe3: at exactly this GRF count a work-group has at most this many threads (SIMD16)
    wg_threads_by_grf: tuple[tuple[int, int], ...] = ()
    # Where compute-runtime and the calculator disagree: (bound, the figure used and the other one)
    figures: tuple[tuple[str, str], ...] = ()

    def threads_per_xve(self, grf: int) -> int:
        for most, threads in self.threads_by_grf:
            if grf <= most:
                return threads
        return self.threads_by_grf[-1][1]


_PVC_STEPS = (0, 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)
_DG2_STEPS = (0, 1, 2, 4, 8, 16, 32, 64)
_TWO_MODES = ((128, 8), (256, 4))
_KB = 1024
# Sources: compute-runtime (intel/compute-runtime e37c60bf2a, 2026-08): hw_info_<product>.cpp
# (maxProgrammableSlmSize: the most SLM one work-group may allocate, 64 KB on the Xe-HPG line, 128 KB
# on pvc, Xe2 and Xe3; above it the driver refuses the launch), gfx_core_helper (threads per XVE by
# GRF; the work-group size cap: 1024 work-items, halved when SIMD != 32 at 256 GRF, and on Xe3 at
# most 48 threads at 160 GRF and 40 at 192, calculateNumThreadsPerThreadGroup), the SLM pool, and
# the SLM steps a work-group's SLM is programmed in (Xe-HPG: powers of two, alignSlmSizePerThreadGroup;
# pvc, Xe2, Xe3: computeSlmValues' encodings). Intel's GPU Occupancy Calculator (oneAPI-samples
# 6f5ade58, 2026-06): Max_Num_Of_Workgroups, Max_Num_Of_Barrier_Registers, TG_SLM_Sizes.
# Where they differ the row names the figure it used (``figures``): the SLM pool follows the driver
# (bmg 160 KB, the calculator 128; mtl 96 KB, the calculator 128), the barrier registers follow the
# calculator (64 or 128; compute-runtime's getMaxBarrierRegisterPerSlice says 32 for every family).
# arl-h and ptl are not in the calculator: their work-group and barrier caps are unknown and not
# applied. docs/isa.md and docs/lines.md.
_DRIVER, _BOTH = "compute-runtime", "compute-runtime + Intel GPU Occupancy Calculator"


def _barrier_figure(count: int) -> tuple[str, str]:
    return ("barriers", f"{count} barrier registers (calculator; compute-runtime 32)")


def _pool_figure(kb: int, calculator_kb: int) -> tuple[str, str]:
    return ("slm", f"SLM pool {kb} KB (compute-runtime; calculator {calculator_kb} KB)")


OCCUPANCY: dict[str, OccupancyLimits] = {
    "pvc": OccupancyLimits(
        8, _TWO_MODES, 128 * _KB, _PVC_STEPS, 64, 64, _BOTH, 128 * _KB, figures=(_barrier_figure(64),)
    ),
    "bmg": OccupancyLimits(
        8, _TWO_MODES, 160 * _KB, _PVC_STEPS, 64, 64, _BOTH, 128 * _KB,
        figures=(_pool_figure(160, 128), _barrier_figure(64)),
    ),
    "acm-g10": OccupancyLimits(
        16, _TWO_MODES, 128 * _KB, _DG2_STEPS, 128, 128, _BOTH, 64 * _KB, figures=(_barrier_figure(128),)
    ),
    "arl-h": OccupancyLimits(16, _TWO_MODES, 128 * _KB, _DG2_STEPS, None, None, _DRIVER, 64 * _KB),
    "mtl": OccupancyLimits(
        16, _TWO_MODES, 96 * _KB, _DG2_STEPS, 128, 128, _BOTH, 64 * _KB,
        figures=(_pool_figure(96, 128), _barrier_figure(128)),
    ),
    "lnl": OccupancyLimits(
        8, _TWO_MODES, 128 * _KB, _PVC_STEPS, 64, 64, _BOTH, 128 * _KB, figures=(_barrier_figure(64),)
    ),
    "ptl": OccupancyLimits(
        8, ((96, 10), (128, 8), (160, 6), (192, 5), (256, 4)), 192 * _KB, _PVC_STEPS, None, None, _DRIVER,
        128 * _KB, wg_threads_by_grf=((160, 48), (192, 40)),
    ),
}  # fmt: skip
LIMITED_BY = ("threads", "grf", "slm", "barriers", "work_group_size", "slm_per_work_group")
MAX_WORK_GROUP_SIZE = 1024  # work-items (compute-runtime's CommonConstants::maxWorkgroupSize)
NOT_CHECKED = "not checked"  # what a report says where the kit has no figures for a device


def max_work_group_size(target: str, simd: int, grf: int) -> int | None:
    """The most work-items one work-group of a SIMD ``simd`` kernel at ``grf`` GRF may have on
    ``target`` (None: a device without the kit's figures): 1024, halved for a non-SIMD32 kernel at
    256 GRF (its threads have half the slots), and on Xe3 at most 48 threads at 160 GRF and 40 at 192."""
    limits = OCCUPANCY.get(canonical(target))
    if limits is None:
        return None
    size = MAX_WORK_GROUP_SIZE // 2 if simd != 32 and grf == 256 else MAX_WORK_GROUP_SIZE
    threads = dict(limits.wg_threads_by_grf).get(grf)
    return min(size, threads * simd) if threads is not None else size


def _kb(size: int) -> str:
    return f"{size / 1024:g} KB"


def check_limits(
    target: str, slm_bytes: int | None, grf: int | None, sub_group: int | None, work_group: int | None
) -> list[str] | None:
    """One short line per limit a kernel exceeds on ``target`` (empty: within every limit the kit has).
    The per-work-group SLM and work-group-size caps apply to every family; GRF counts and sub-group
    sizes where the calculator's table has the family. None: a device without the kit's figures, so
    nothing was checked (a report says "not checked", never "none exceeded")."""
    name = canonical(target)
    caps, table = OCCUPANCY.get(name), LIMITS.get(name)
    if caps is None and table is None:
        return None
    over = []
    slm_cap = caps.slm_per_work_group if caps is not None else table.slm_per_work_group if table else None
    if slm_bytes is not None and slm_cap is not None and slm_bytes > slm_cap:
        over.append(f"SLM {slm_bytes} B > {slm_cap} B per work-group")
    if table is not None and grf is not None and grf not in table.grf_counts:
        over.append(f"GRF {grf} not in {'/'.join(map(str, table.grf_counts))}")
    if table is not None and sub_group is not None and sub_group not in table.sub_group_sizes:
        over.append(f"sub-group {sub_group} not in {'/'.join(map(str, table.sub_group_sizes))}")
    size_cap = table.max_work_group_size if table is not None else None
    if sub_group and grf:
        size_cap = max_work_group_size(name, sub_group, grf) or size_cap
    if work_group is not None and size_cap is not None and work_group > size_cap:
        why = f" at SIMD{sub_group}, {grf} GRF" if size_cap < MAX_WORK_GROUP_SIZE else ""
        over.append(f"work-group {work_group} > {size_cap}{why}")
    return over


def _slm_footprint(slm_bytes: int, steps_kb: tuple[int, ...] | None) -> int:
    """The SLM a work-group takes from the pool: its bytes rounded up to the family's next step."""
    kb = -(-slm_bytes // 1024)
    if steps_kb:
        kb = next((step for step in steps_kb if step >= kb), kb)
    return kb * 1024


def occupancy(
    target: str, simd: int, grf: int, work_group: int, slm_bytes: int = 0, barriers: int = 0
) -> dict[str, Any] | None:
    """Static occupancy of one kernel on one Xe core (None: a family without the kit's figures).

    A work-group of ``work_group`` work-items takes ceil(work_group / simd) hardware threads; the
    GRF count the zebin records picks the threads per XVE. Work-groups per Xe core is the smallest of
    the thread, SLM, work-group-count and barrier bounds. A work-group over the family's caps (its
    size: ``max_work_group_size``; its SLM: ``slm_per_work_group``) cannot launch: zero work-groups,
    and ``cannot_launch`` says why. ``figures`` names the figures used where the sources disagree."""
    name = canonical(target)
    limits = OCCUPANCY.get(name)
    if limits is None or simd <= 0 or work_group <= 0:
        return None
    per_xve = limits.threads_per_xve(grf)
    threads = -(-work_group // simd)
    size_cap = max_work_group_size(name, simd, grf) or MAX_WORK_GROUP_SIZE
    bounds: dict[str, int] = {}
    refused = []
    if work_group > size_cap:
        bounds["work_group_size"] = 0
        refused.append(f"work-group {work_group} > {size_cap} work-items on {name} (SIMD{simd}, {grf} GRF)")
    if slm_bytes > limits.slm_per_work_group:
        bounds["slm_per_work_group"] = 0
        refused.append(f"SLM {_kb(slm_bytes)} > {_kb(limits.slm_per_work_group)} on {name}")
    slots = per_xve * limits.xve_per_xe_core // threads
    if limits.max_work_groups is not None:
        slots = min(slots, limits.max_work_groups)  # the scheduler's cap counts as thread slots
    bounds["grf" if per_xve < limits.threads_by_grf[0][1] else "threads"] = slots
    used = set()
    if slm_bytes > 0:
        bounds["slm"] = limits.slm_per_xe_core // _slm_footprint(slm_bytes, limits.slm_steps_kb)
        used.add("slm")
    if barriers > 0 and limits.barriers is not None:
        bounds["barriers"] = limits.barriers // barriers
        used.add("barriers")
    if refused:
        # It does not launch at all, whatever else would bound it.
        limited_by = "work_group_size" if "work_group_size" in bounds else "slm_per_work_group"
    else:
        limited_by = min(bounds, key=lambda bound: (bounds[bound], LIMITED_BY.index(bound)))
    groups = bounds[limited_by]
    return {
        "threads_per_xve": round(groups * threads / limits.xve_per_xe_core, 2),  # resident, on average
        "threads_per_xve_max": per_xve,
        "work_groups_per_xe_core": groups,
        "limited_by": limited_by,
        "cannot_launch": "; ".join(refused) or None,
        # A work-group that cannot launch used no figure worth naming.
        "figures": [] if refused else [note for bound, note in limits.figures if bound in used],
    }
