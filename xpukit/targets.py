"""Intel GPU compile targets: the presets the kit compiles for, their aliases, and --target lists.

Ground level: imports nothing from xpukit but its error type, so the runtime (tritonc, ocloc,
zebin_stage, compile, launch) and the host kit share one definition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from xpukit.errors import XpukitError

# SYCL experimental architecture enum values (sycl::ext::oneapi::experimental::architecture).
SYCL_ARCH = {
    "pvc": 0x030F000700,
    "acm-g10": 0x030DC00800,  # a.k.a. dg2-g10
    "bmg": 0x0500400400,  # bmg-g21
    "lnl": 0x0501000400,  # lnl-m
    "mtl": 0x0311C00400,  # mtl-h
}
# Triton's backend names an architecture by a short name of its own: acm-g10 is "dg2" there.
TRITON_ARCH_NAME = {
    SYCL_ARCH["pvc"]: "pvc",
    SYCL_ARCH["acm-g10"]: "dg2",
    SYCL_ARCH["bmg"]: "bmg",
    SYCL_ARCH["lnl"]: "lnl",
    SYCL_ARCH["mtl"]: "mtl",
}
# Other names users (and ocloc) give the same parts; --target accepts them and means the preset.
ALIASES = {"dg2": "acm-g10", "dg2-g10": "acm-g10", "bmg-g21": "bmg", "lnl-m": "lnl", "mtl-h": "mtl"}


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

    def props(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("ocloc_device")
        data["sub_group_sizes"] = list(self.sub_group_sizes)
        return data


# Presets for compiling without the device present. On a real device the session's properties
# come from UR device info instead. The "cpu" preset has no matrix engine and no 2D block IO, so
# tl.dot lowers to plain FMAs that Intel's CPU OpenCL runtime can run.
PRESETS: dict[str, TargetPreset] = {
    p.name: p
    for p in (
        TargetPreset("pvc", "pvc", SYCL_ARCH["pvc"], 1024, 64, (16, 32), True, True, True, True),
        TargetPreset("acm-g10", "acm-g10", SYCL_ARCH["acm-g10"], 1024, 128, (8, 16, 32), False, True, False, True),
        TargetPreset("bmg", "bmg", SYCL_ARCH["bmg"], 1024, 64, (16, 32), True, True, True, True),
        TargetPreset("lnl", "lnl", SYCL_ARCH["lnl"], 1024, 64, (16, 32), True, True, True, True),
        TargetPreset("mtl", "mtl", SYCL_ARCH["mtl"], 1024, 64, (8, 16, 32), False, False, False, True),
        TargetPreset("cpu", "", 0, 8192, 1024, (8, 16, 32, 64), True, False, False, False),
    )
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
    """What one work-group of a kernel may use on a target; ``kernel-report`` flags a row over any."""

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
# Without large GRF mode a thread has 128 GRFs. The calculator's table has no Xe2/Xe-LPG entry
# (bmg, lnl, mtl): their limits are not checked rather than guessed.
_CALCULATOR = "Intel GPU Occupancy Calculator (oneAPI-samples)"
LIMITS: dict[str, TargetLimits] = {
    "pvc": TargetLimits(128 * 1024, (128, 256), (16, 32), 1024, _CALCULATOR),
    "acm-g10": TargetLimits(64 * 1024, (128,), (8, 16, 32), 1024, _CALCULATOR),
}


def check_limits(
    target: str, slm_bytes: int | None, grf: int | None, sub_group: int | None, work_group: int | None
) -> list[str]:
    """One short line per limit a kernel exceeds on ``target`` (empty: within every known limit).
    A target with no sourced limits is not checked."""
    limits = LIMITS.get(canonical(target))
    if limits is None:
        return []
    over = []
    if slm_bytes is not None and slm_bytes > limits.slm_per_work_group:
        over.append(f"SLM {slm_bytes} B > {limits.slm_per_work_group} B per work-group")
    if grf is not None and grf not in limits.grf_counts:
        over.append(f"GRF {grf} not in {'/'.join(map(str, limits.grf_counts))}")
    if sub_group is not None and sub_group not in limits.sub_group_sizes:
        over.append(f"sub-group {sub_group} not in {'/'.join(map(str, limits.sub_group_sizes))}")
    if work_group is not None and work_group > limits.max_work_group_size:
        over.append(f"work-group {work_group} > {limits.max_work_group_size}")
    return over
