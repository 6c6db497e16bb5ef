"""Intel GPU compile targets: one record per family, and every table the kit derives from it.

``FAMILIES`` holds one ``Family`` per Intel GPU family the kit names: its names, how ocloc, IGA and
Triton see it, its occupancy figures and limits, and where each came from. Adding a family is one
row; ``FAMILY``, ``ALIASES``, ``PRODUCT_FAMILY``, ``IGA_PLATFORM``, ``LIMITS``, ``OCCUPANCY``,
``PRESETS`` and the docs' tables (xpukit/host/versions/docs_tables.py) follow from it.

Ground level: imports nothing from xpukit but its error type, so the runtime (tritonc, ocloc,
zebin_stage, compile, launch) and the host kit share one definition.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from xpukit.errors import XpukitError

UNKNOWN = "unknown"
_KB = 1024


@dataclasses.dataclass(frozen=True)
class TritonProps:
    """What Triton 3.3's Intel backend reads of a device: ocloc 26.27's extension query (``_PRESET_EXTENSIONS``)
    and the SIMD widths the compiler builds (Xe-HPG/Xe-LPG: 8/16/32; Xe-HPC and later: 16/32)."""

    dpas: bool
    block_io_2d: bool
    tf32: bool
    fp64: bool
    bf16_conversions: bool
    sub_group_sizes: tuple[int, ...]
    max_work_group_size: int = 1024
    max_num_sub_groups: int = 64


@dataclasses.dataclass(frozen=True)
class TargetLimits:
    """What Intel's GPU Occupancy Calculator's device table says one work-group may use on a target:
    ``check_limits`` flags a row's GRF count and sub-group size against it where the table has the family."""

    slm_per_work_group: int  # bytes of shared local memory one work-group may allocate
    grf_counts: tuple[int, ...]  # GRF registers per thread the hardware offers (256 = large GRF mode)
    sub_group_sizes: tuple[int, ...]
    max_work_group_size: int  # work-items
    source: str


@dataclasses.dataclass(frozen=True)
class OccupancyLimits:
    """What one Xe core holds (hardware threads, one per sub-group; SLM, work-groups, barriers) and
    what one work-group may take (its SLM; its threads on Xe3 and Xe3P)."""

    xve_per_xe_core: int | None  # None: no source gives it (occupancy is then not checked)
    threads_by_grf: tuple[tuple[int, int], ...]  # (up to this many GRF, threads per XVE), ascending
    slm_per_xe_core: int  # bytes of the SLM pool work-groups share
    slm_steps_kb: tuple[int, ...]  # the sizes a work-group's SLM is rounded up to
    max_work_groups: int | None  # work-groups per Xe core (None: no source gives it)
    barriers: int | None  # barrier registers per Xe core (None: no source gives it)
    source: str
    slm_per_work_group: int = 64 * _KB  # bytes one work-group may allocate (maxProgrammableSlmSize)
    # Xe3/Xe3P: at exactly this GRF count a work-group has at most this many threads
    wg_threads_by_grf: tuple[tuple[int, int], ...] = ()
    # Where compute-runtime and the calculator disagree: (bound, the figure used and the other one)
    figures: tuple[tuple[str, str], ...] = ()

    def threads_per_xve(self, grf: int) -> int:
        for most, threads in self.threads_by_grf:
            if grf <= most:
                return threads
        return self.threads_by_grf[-1][1]


@dataclasses.dataclass(frozen=True)
class Family:
    """One Intel GPU family: its names, how ocloc, IGA and Triton see it, and what the hardware has."""

    name: str  # the kit's name (--target)
    aliases: tuple[str, ...]  # other names users and ocloc give it
    ocloc_device: str  # the -device name ocloc takes
    generation: str  # compute-runtime's release name (shared/source/dll/devices/product_config_base.inl)
    product_family: int  # PRODUCT_FAMILY in the zebin's .note.intelgt.compat (note 1)
    ip_version: int  # the graphics IP version ocloc 26.27 writes there (note 6): arch<<22 | release<<14 | step
    iga_platform: str  # IGA's platform (``iga64 -h=p``) for decoding its ISA directly
    architecture: int | None  # SYCL architecture enum; None where no source gave it
    triton_arch: str  # upstream arch_parser's name for ``architecture`` ("" when it has none)
    triton: TritonProps  # the properties the kit hands Triton 3.3
    triton_from: str | None  # None: the family's own (ocloc's query); else the family whose properties it takes
    occupancy: OccupancyLimits | None
    limits: TargetLimits | None  # the calculator's GRF counts and sub-group sizes (None: not checked)
    calculator: str | None  # its entry in the Occupancy Calculator's GPU list (None: not there)
    auto_grf: bool  # IGC picks the GRF count itself when no GRF flag is given (-autoGRFSelection)
    sources: tuple[str, ...]  # where this row's figures come from
    ran_on_gpu: str | None = None  # where a kernel of the kit ran on this GPU (None: never checked here)

    def __getattr__(self, name: str) -> Any:  # the Triton properties under their old names: family.dpas
        if name == "triton":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.triton, name)


# --------------------------------------------------------------------------- the sources

CALCULATOR_URL = "https://oneapi-src.github.io/oneAPI-samples/Tools/GPU-Occupancy-Calculator/"
_CALCULATOR = "Intel GPU Occupancy Calculator (oneAPI-samples 6f5ade58, Tools/GPU-Occupancy-Calculator/index.html)"
_DRIVER, _BOTH = "compute-runtime", "compute-runtime + Intel GPU Occupancy Calculator"
_CR = "intel/compute-runtime e37c60bf2a (2026-08)"
_EXT = "ocloc 26.27 `ocloc query CL_DEVICE_EXTENSIONS` (DPAS, 2D block IO, tf32, fp64, bf16)"
_ZEBIN = "ocloc 26.27's zebins (.note.intelgt.compat: product family, IP version; IGC picks the GRF count)"
_SYCL = "SYCL architecture: intel/llvm sycl/include/sycl/ext/oneapi/experimental/architectures.def"
_NO_SYCL = "SYCL architecture: not readable in any source at hand (unknown: Triton gets the properties as they are)"
# compute-runtime, per figure: maxProgrammableSlmSize (shared/source/<core>/hw_info_<product>.cpp); threads per XVE
# by GRF (gfx_core_helper; Xe3/Xe3P: calculateAvailableThreadCount, then adjustMaxThreadsPerEuCount); the work-group
# cap (calculateMaxWorkGroupSize; Xe3/Xe3P: calculateNumThreadsPerThreadGroup); the SLM pool (the release helper's
# preferred-SLM table, its largest entry) and steps (alignSlmSizePerThreadGroup). IGC's .ze_info may disagree.
_XE3_LPG = (
    f"{_CR}: hw_info_ptl.cpp / hw_info_nvls.cpp (maxProgrammableSlmSize 128), release_helper_common_xe3_lpg.inl "
    "(SLM pool 192 KB), gfx_core_helper_xe3_and_later.inl (threads by GRF), gfx_core_helper_xe3_core.cpp "
    "(48 threads at 160 GRF, 40 at 192), command_encoder_xe3_core.cpp (SLM steps)"
)
_XVE8 = "8 XVEs per Xe core: not in compute-runtime (the kernel driver reports it); the figure the kit's ptl row uses"

_PVC_STEPS = (0, 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)
_DG2_STEPS = (0, 1, 2, 4, 8, 16, 32, 64)
_XE3P_STEPS = (*range(17), 24, 32, 48, 64, 96, 128, 192)  # 1 KB up to 16 KB (alignSlmSizePerThreadGroup)
_TWO_MODES = ((128, 8), (256, 4))
_XE3_THREADS = ((96, 10), (128, 8), (160, 6), (192, 5), (256, 4))
_XE3_WG = ((160, 48), (192, 40))


def _barrier_figure(count: int) -> tuple[str, str]:
    return ("barriers", f"{count} barrier registers (calculator; compute-runtime 32)")


def _pool_figure(kb: int, calculator_kb: int) -> tuple[str, str]:
    return ("slm", f"SLM pool {kb} KB (compute-runtime; calculator {calculator_kb} KB)")


def _igc_figures(ours: int, igc: dict[int, int]) -> tuple[tuple[str, str], ...]:  # IGC: .ze_info's eu_thread_count
    notes = {g: f"threads per XVE at {g} GRF: {ours} (compute-runtime; IGC {n})" for g, n in igc.items()}
    return tuple((f"threads@{g}", note) for g, note in notes.items())


# The calculator lists BMG, LNL and MTL with Large_GRF_Mode false, while compute-runtime runs 256 GRF there (4
# threads per XVE): their GRF and sub-group sizes are unchecked rather than flag every 256-GRF retry on its word.
_PVC_LIMITS = TargetLimits(128 * _KB, (128, 256), (16, 32), 1024, _CALCULATOR)
_DG2_LIMITS = TargetLimits(64 * _KB, (128,), (8, 16, 32), 1024, _CALCULATOR)
_XE2_PROPS = TritonProps(True, True, True, True, True, (16, 32))  # pvc, bmg, lnl, ptl: all five extensions
_PTL_OCC = OccupancyLimits(8, _XE3_THREADS, 192 * _KB, _PVC_STEPS, None, None, _DRIVER, 128 * _KB, _XE3_WG)

# The table. The calculator (pvc, bmg, acm-g10, mtl, lnl) gives max work-groups per Xe core, barrier
# registers and SLM steps; where it and compute-runtime disagree the row names the figure it used
# (``figures``): the SLM pool follows the driver (bmg 160 KB, the calculator 128; mtl 96, the
# calculator 128), the barrier registers the calculator (compute-runtime's getMaxBarrierRegisterPerSlice
# says 32 for every family). Families the calculator lacks: work-group and barrier caps unknown, not applied.
# cri, nvl-p, nvl-s and wcl compile with ptl's Triton properties: Triton 3.3 knows none of them, ptl is
# the newest family the kit knows (Xe3, which Xe3P extends), and ocloc reports the same five extensions
# for all five (tests/image/test_families.py checks it).
FAMILIES: tuple[Family, ...] = (
    Family(
        "pvc", (), "pvc", "Xe-HPC", 1271, 0x030F0007, "xehpc", 0x030F000700, "pvc", _XE2_PROPS, None,
        OccupancyLimits(8, _TWO_MODES, 128 * _KB, _PVC_STEPS, 64, 64, _BOTH, 128 * _KB, figures=(_barrier_figure(64),)),
        _PVC_LIMITS, "Discrete GPU (Xe HPC / Data Center Max / PVC)", False,
        (_SYCL, _EXT, _ZEBIN, f"{_CR}: hw_info_pvc.cpp, gfx_core_helper", _CALCULATOR),
    ),
    Family(
        "bmg", ("bmg-g21",), "bmg", "Xe2-HPG", 1274, 0x05004000, "xe2", 0x0500400400, "bmg", _XE2_PROPS, None,
        OccupancyLimits(8, _TWO_MODES, 160 * _KB, _PVC_STEPS, 64, 64, _BOTH, 128 * _KB,
                        figures=(_pool_figure(160, 128), _barrier_figure(64))),
        None, "Discrete GPU (Xe2 HPG / Arc™ Graphics / BMG)", False,
        (_SYCL, _EXT, _ZEBIN, f"{_CR}: hw_info_bmg.cpp, release_helper_preferred_slm_xe2_hpg_160k.inl", _CALCULATOR),
    ),
    Family(
        "acm-g10", ("dg2", "dg2-g10"), "acm-g10", "Xe-HPG", 1270, 0x030DC008, "xehpg", 0x030DC00800, "dg2",
        TritonProps(True, False, False, False, True, (8, 16, 32), max_num_sub_groups=128), None,
        OccupancyLimits(16, _TWO_MODES, 128 * _KB, _DG2_STEPS, 128, 128, _BOTH, 64 * _KB,
                        figures=(_barrier_figure(128),)),
        _DG2_LIMITS, "Discrete GPU (Xe HPG / Arc™ Graphics / DG2)", False,
        (_SYCL, _EXT, _ZEBIN, f"{_CR}: hw_info_dg2.cpp", _CALCULATOR),
    ),
    Family(
        "arl-h", (), "arl-h", "Xe-LPG+", 1273, 0x03128004, "xehpg", 0x0312800400, "arl_h",
        TritonProps(True, False, False, True, True, (8, 16, 32)), None,
        OccupancyLimits(16, _TWO_MODES, 128 * _KB, _DG2_STEPS, None, None, _DRIVER, 64 * _KB),
        None, None, False,
        (_SYCL, _EXT, _ZEBIN, f"{_CR}: hw_info_arl.cpp, release_helper_preferred_slm_xe_hpg_128k.inl"),
    ),
    Family(
        "mtl", ("mtl-h",), "mtl-h", "Xe-LPG", 1272, 0x0311C004, "xehpg", 0x0311C00400, "mtl",
        TritonProps(False, False, False, True, False, (8, 16, 32)), None,
        OccupancyLimits(16, _TWO_MODES, 96 * _KB, _DG2_STEPS, 128, 128, _BOTH, 64 * _KB,
                        figures=(_pool_figure(96, 128), _barrier_figure(128))),
        None, "Integrated GPU (Xe LPG / Arc™ Graphics / MTL)", False,
        (_SYCL, _EXT, _ZEBIN, f"{_CR}: hw_info_mtl.cpp, release_helper_preferred_slm_xe_hpg_96k.inl", _CALCULATOR),
    ),
    Family(
        "lnl", ("lnl-m",), "lnl-m", "Xe2-LPG", 1275, 0x05010004, "xe2", 0x0501000400, "lnl", _XE2_PROPS, None,
        OccupancyLimits(8, _TWO_MODES, 128 * _KB, _PVC_STEPS, 64, 64, _BOTH, 128 * _KB, figures=(_barrier_figure(64),)),
        None, "Integrated GPU (Xe2 LPG / Arc™ Graphics / LNL)", False,
        (_SYCL, _EXT, _ZEBIN, f"{_CR}: hw_info_lnl.cpp", _CALCULATOR),
    ),
    Family(
        "ptl", ("ptl-h",), "ptl-h", "Xe3-LPG", 1300, 0x07800004, "xe3", None, "", _XE2_PROPS, None, _PTL_OCC,
        None, None, True, (_NO_SYCL, _EXT, _ZEBIN, _XE3_LPG, _XVE8),
    ),
    Family(
        "wcl", (), "wcl", "Xe3-LPG", 1300, 0x0780C001, "xe3", None, "", _XE2_PROPS, "ptl", _PTL_OCC,
        None, None, True,
        (_NO_SYCL, _EXT, _ZEBIN, f"{_CR}: product_config_base.inl (wcl runs PtlHwConfig), release_helper_wcl.cpp",
         _XE3_LPG, _XVE8),
    ),
    Family(
        "nvl-s", (), "nvl-s", "Xe3-LPG", 1340, 0x07810004, "xe3", None, "", _XE2_PROPS, "ptl", _PTL_OCC,
        None, None, True, (_NO_SYCL, _EXT, _ZEBIN, f"{_CR}: release_helper_nvl_s.cpp", _XE3_LPG, _XVE8),
    ),
    Family(
        "nvl-p", (), "nvl-p", "Xe3P-LPG", 1360, 0x08C28004, "3pxpc", None, "", _XE2_PROPS, "ptl",
        OccupancyLimits(
            None, (*_XE3_THREADS, (320, 3), (448, 2), (512, 1)), 192 * _KB, _XE3P_STEPS, None, None, _DRIVER,
            192 * _KB, (*_XE3_WG, (512, 16)), _igc_figures(1, {512: 2}),
        ),
        None, None, True,
        (_NO_SYCL, _EXT, _ZEBIN,
         f"{_CR}: hw_info_nvlp.cpp (maxProgrammableSlmSize 192), release_helper_common_xe3p_lpg.inl "
         "(3 threads per XVE at 320 GRF, 2 at 448), release_helper_preferred_slm_xe3p_igpu_192k.inl (SLM pool, "
         "steps), gfx_core_helper_xe3p_core.cpp (16 threads at 512 GRF)",
         "XVEs per Xe core: no source at hand (occupancy not checked)"),
    ),
    Family(
        "cri", (), "cri", "Xe3P-XPC", 1380, 0x08C2C000, "3pxpc", None, "", _XE2_PROPS, "ptl",
        OccupancyLimits(
            8, ((256, 8), (512, 4)), 384 * _KB, (*_XE3P_STEPS, 256, 320, 384), None, None, _DRIVER, 384 * _KB,
            ((512, 32),), _igc_figures(8, {160: 6, 192: 5, 256: 4}),
        ),
        None, None, True,
        (_NO_SYCL, _EXT, _ZEBIN,
         f"{_CR}: hw_info_cri.cpp (maxProgrammableSlmSize 384, 8 threads per XVE), release_helper_cri.cpp "
         "(4 threads at 512 GRF), release_helper_preferred_slm_xe3p_cri_384k.inl (SLM pool, steps), "
         "os_agnostic_product_helper_cri.inl (32 threads at 512 GRF, 64 at 160/192 for SIMD16)",
         "8 XVEs per Xe core: not in compute-runtime (the kernel driver reports it); this project's verified facts"),
    ),
)  # fmt: skip

# --------------------------------------------------------------------------- derived tables

FAMILY = {f.name: f for f in FAMILIES}
ALIASES = {alias: f.name for f in FAMILIES for alias in f.aliases}
# wcl's zebins say ptl's product family, 1300: the first family keeps it, the IP version tells them apart
PRODUCT_FAMILY = {f.product_family: f.name for f in reversed(FAMILIES)}
IP_RELEASE = {f.ip_version >> 14: f.name for f in FAMILIES}  # architecture.release, any stepping
IGA_PLATFORM = {f.name: f.iga_platform for f in FAMILIES}
SYCL_ARCH = {f.name: f.architecture for f in FAMILIES if f.architecture is not None}
TRITON_ARCH_NAME = {f.architecture: f.triton_arch for f in FAMILIES if f.architecture is not None}
LIMITS = {f.name: f.limits for f in FAMILIES if f.limits is not None}
OCCUPANCY = {f.name: f.occupancy for f in FAMILIES if f.occupancy is not None}


def zebin_family(product_family: int, ip_version: int | None = None) -> str | None:
    """The family a zebin's notes name: by its IP version's architecture and release where the table
    has them (wcl and ptl share product family 1300), else by product family (None: neither known)."""
    if ip_version:
        found = IP_RELEASE.get(ip_version >> 14)
        if found is not None:
            return found
    return PRODUCT_FAMILY.get(product_family)


def iga_platform(target: str) -> str:
    """IGA's platform name for a family, or a one-line error naming the family."""
    try:
        return IGA_PLATFORM[canonical(target)]
    except KeyError:
        raise XpukitError(
            f"no IGA platform known for {target!r}: its ISA cannot be decoded",
            f"use one of: {', '.join(IGA_PLATFORM)} (or add the family to xpukit/targets.py's FAMILIES)",
        ) from None


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
    t = f.triton
    return TargetPreset(
        f.name, f.ocloc_device, f.architecture or 0, t.max_work_group_size, t.max_num_sub_groups,
        t.sub_group_sizes, t.fp64, t.dpas, t.block_io_2d, t.bf16_conversions, t.tf32,
    )  # fmt: skip


def device_preset(device: str, extensions: Iterable[str]) -> TargetPreset:
    """A preset for an ocloc device name outside the table (``tgllp``, ``bmg-g31``, ``ptl-u``...):
    its properties from the extensions ``ocloc query CL_DEVICE_EXTENSIONS -device D`` lists, no
    architecture (unknown), and the sub-group sizes every Intel GPU compiler builds (8 is left out:
    Xe-HPC and later have none, and Triton's code is built for the smallest size given)."""
    exts = set(extensions)
    return TargetPreset(device, device, 0, 1024, 64, (16, 32), *(e in exts for e in _PRESET_EXTENSIONS))


_PRESET_EXTENSIONS = ("cl_khr_fp64", "cl_intel_subgroup_matrix_multiply_accumulate", "cl_intel_subgroup_2d_block_io",
                      "cl_intel_bfloat16_conversions", "cl_intel_subgroup_matrix_multiply_accumulate_tf32")  # fmt: skip


# Presets for compiling without the device present. On a real device the session's properties
# come from UR device info instead. The "cpu" preset has no matrix engine and no 2D block IO, so
# tl.dot lowers to plain FMAs that Intel's CPU OpenCL runtime can run.
PRESETS: dict[str, TargetPreset] = {
    **{f.name: family_preset(f) for f in FAMILIES},
    "cpu": TargetPreset("cpu", "", 0, 8192, 1024, (8, 16, 32, 64), True, False, False, False),
}


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


# --------------------------------------------------------------------------- limits

LIMITED_BY = ("threads", "grf", "slm", "barriers", "work_group_size", "slm_per_work_group")
MAX_WORK_GROUP_SIZE = 1024  # work-items (compute-runtime's CommonConstants::maxWorkgroupSize)
NOT_CHECKED = "not checked"  # what a report says where the kit has no figures for a device


def max_work_group_size(target: str, simd: int, grf: int) -> int | None:
    """The most work-items one work-group of a SIMD ``simd`` kernel at ``grf`` GRF may have on
    ``target`` (None: a device without the kit's figures): 1024, halved for a non-SIMD32 kernel at
    256 GRF (its threads have half the slots), and on Xe3/Xe3P the family's thread cap at that GRF
    count (ptl: 48 threads at 160 GRF, 40 at 192; cri: 32 at 512)."""
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


# --------------------------------------------------------------------------- static occupancy


def _slm_footprint(slm_bytes: int, steps_kb: tuple[int, ...]) -> int:
    """The SLM a work-group takes from the pool: its bytes rounded up to the family's next step."""
    kb = -(-slm_bytes // 1024)
    return next((step for step in steps_kb if step >= kb), kb) * 1024


def _occupancy(
    name: str, limits: OccupancyLimits, simd: int, grf: int, work_group: int, slm: int, barriers: int
) -> dict[str, Any]:
    """Work-groups per Xe core and what bounds them (``occupancy`` without its extras)."""
    assert limits.xve_per_xe_core is not None
    per_xve = limits.threads_per_xve(grf)
    threads = -(-work_group // simd)
    size_cap = max_work_group_size(name, simd, grf) or MAX_WORK_GROUP_SIZE
    bounds: dict[str, int] = {}
    refused = []
    if work_group > size_cap:
        bounds["work_group_size"] = 0
        refused.append(f"work-group {work_group} > {size_cap} work-items on {name} (SIMD{simd}, {grf} GRF)")
    if slm > limits.slm_per_work_group:
        bounds["slm_per_work_group"] = 0
        refused.append(f"SLM {_kb(slm)} > {_kb(limits.slm_per_work_group)} on {name}")
    slots = per_xve * limits.xve_per_xe_core // threads
    if limits.max_work_groups is not None:
        slots = min(slots, limits.max_work_groups)  # the scheduler's cap counts as thread slots
    bounds["grf" if per_xve < limits.threads_by_grf[0][1] else "threads"] = slots
    used = {f"threads@{grf}"}  # a threads-per-XVE figure in dispute at this GRF count
    if slm > 0:
        bounds["slm"] = limits.slm_per_xe_core // _slm_footprint(slm, limits.slm_steps_kb)
        used.add("slm")
    if barriers > 0 and limits.barriers is not None:
        bounds["barriers"] = limits.barriers // barriers
        used.add("barriers")
    if refused:  # it does not launch at all, whatever else would bound it
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
        "occupancy_pct": round(100 * groups * threads / (per_xve * limits.xve_per_xe_core), 1),
    }


WHAT_IF_WARPS = (1, 2, 4, 8, 16, 32)  # the num_warps a what-if table shows (and the row's own)
WHAT_IF_ASSUMES = "the row's SIMD, GRF count and barriers held; a work-group of num_warps x SIMD work-items"
_WHAT_IF_CELL = ("work_groups_per_xe_core", "occupancy_pct", "limited_by")


def occupancy_what_if(
    target: str, simd: int, grf: int, slm_bytes: int = 0, barriers: int = 0, num_warps: int | None = None
) -> dict[str, Any] | None:
    """Work-groups per Xe core across num_warps (rows) and SLM per work-group (columns: the family's
    SLM steps up to its per-work-group cap, the sizes Intel's calculator rounds to), with the row's
    SIMD, GRF and barriers held; and ``next``: from the row's cell, the nearest step along each axis
    (less or more SLM, fewer or more warps) that changes its occupancy. None: no figures for ``target``."""
    name = canonical(target)
    limits = OCCUPANCY.get(name)
    if limits is None or limits.xve_per_xe_core is None or simd <= 0:
        return None
    warps = sorted({*WHAT_IF_WARPS, *([num_warps] if num_warps else [])})
    columns = [kb * _KB for kb in limits.slm_steps_kb if kb * _KB <= limits.slm_per_work_group]
    own = 0 if slm_bytes <= 0 else _slm_footprint(slm_bytes, limits.slm_steps_kb)
    if own not in columns:
        columns.append(own)  # over the family's cap: cannot launch, shown as its own column
    cells = [[_occupancy(name, limits, simd, grf, w * simd, s, barriers) for s in columns] for w in warps]
    grid = {key: [[c[key] for c in row] for row in cells] for key in _WHAT_IF_CELL}
    steps: list[dict[str, Any]] = []
    table: dict[str, Any] = {"simd": simd, "grf": grf, "barriers": barriers, "num_warps": warps, "slm_bytes": columns,
                             **grid, "row": None, "next": steps, "assumes": WHAT_IF_ASSUMES}  # fmt: skip
    if num_warps not in warps:
        return table
    i, j = warps.index(num_warps), columns.index(own)
    table["row"] = {"num_warps": num_warps, "slm_bytes": own}
    walks = [("slm_bytes", [(i, k) for k in ks]) for ks in (range(j - 1, -1, -1), range(j + 1, len(columns)))]
    walks += [("num_warps", [(k, j) for k in ks]) for ks in (range(i - 1, -1, -1), range(i + 1, len(warps)))]
    for change, walk in walks:  # the first cell along each way whose work-groups or occupancy differ
        cell = next(((a, b) for a, b in walk if _outcome(cells[a][b]) != _outcome(cells[i][j])), None)
        if cell is not None:
            a, b = cell
            to = columns[b] if change == "slm_bytes" else warps[a]
            steps.append({"change": change, "to": to, **{key: cells[a][b][key] for key in _WHAT_IF_CELL}})
    return table


def _outcome(cell: dict[str, Any]) -> tuple[int, float]:
    return cell["work_groups_per_xe_core"], cell["occupancy_pct"]


def calculator_link(target: str, simd: int, grf: int) -> dict[str, Any] | None:
    """Where Intel's GPU Occupancy Calculator shows ``target``: its GPU list's entry, or for a family it
    lacks its page pre-filled through ``?gpu=`` (12 values, `;`-separated, in the order of its README and
    ``load_url_params``) with the kit's figures for one Xe core at the row's GRF count and SIMD first.
    None: a family without figures enough (nvl-p: XVEs per Xe core unknown)."""
    name = canonical(target)
    family, limits = FAMILY.get(name), OCCUPANCY.get(name)
    if family is None or limits is None:
        return None
    if family.calculator is not None:
        return {"url": CALCULATOR_URL, "entry": family.calculator, "prefilled": False}
    xve = limits.xve_per_xe_core
    if xve is None:
        return None
    per_xve = limits.threads_per_xve(grf)
    slots = per_xve * xve
    # No cap beyond the thread slots where no source gives one (as the kit applies none): the
    # calculator then also hides its barrier question. Large_GRF_Mode empty: the threads per XVE are
    # already the row's GRF count's, so the page offers no halving (it reads any non-empty text as true).
    groups = limits.max_work_groups if limits.max_work_groups is not None else slots
    barriers = limits.barriers if limits.barriers is not None else groups
    sizes = [simd, *(s for s in sorted(family.sub_group_sizes, reverse=True) if s != simd)]
    steps = [kb for kb in limits.slm_steps_kb if kb * _KB <= limits.slm_per_work_group]
    wg_cap = max_work_group_size(name, simd, grf) or MAX_WORK_GROUP_SIZE
    values = [xve, per_xve, xve, slots, "", json.dumps(sizes, separators=(",", ":")), limits.slm_per_xe_core // _KB,
              limits.slm_per_work_group // _KB, json.dumps(steps, separators=(",", ":")), wg_cap, groups, barriers,
              f"xpukit_{name}_one_Xe-core_GRF{grf}_SIMD{simd}"]  # fmt: skip
    return {"url": f"{CALCULATOR_URL}?gpu={';'.join(map(str, values))}", "entry": None, "prefilled": True}


UPSTREAM_N_REGS = {"default": 128, "small": 128, "large": 256}  # IXB #7416: 128 when no grf_mode is given
N_REGS_WHY = (
    "IGC picks the GRF count itself here (-autoGRFSelection); upstream's launcher reports n_regs=128 when no "
    "grf_mode is given (intel-xpu-backend-for-triton #7416)"
)


def n_regs_note(target: str, grf: int, grf_mode: str | None = None) -> dict[str, Any] | None:
    """On a family where IGC picks the GRF count itself (Xe3, Xe3P: ``-autoGRFSelection``), the zebin's
    GRF count beside the ``n_regs`` upstream's launcher reports for the same build (IXB #7416: 128 when
    no grf_mode is given; None for grf_mode auto, which it does not resolve). None elsewhere."""
    family = FAMILY.get(canonical(target))
    if family is None or not family.auto_grf:
        return None
    upstream = UPSTREAM_N_REGS.get(grf_mode or "default")
    differs = upstream is not None and upstream != grf
    return {"grf_count": grf, "upstream_n_regs": upstream, "differs": differs, "why": N_REGS_WHY}


def occupancy(target: str, simd: int, grf: int, work_group: int, slm_bytes: int = 0, barriers: int = 0,
              grf_mode: str | None = None) -> dict[str, Any] | None:  # fmt: skip
    """Static occupancy of one kernel on one Xe core (None: a family without the kit's figures).

    A work-group of ``work_group`` work-items takes ceil(work_group / simd) hardware threads; the
    GRF count the zebin records picks the threads per XVE. Work-groups per Xe core is the smallest of
    the thread, SLM, work-group-count and barrier bounds. A work-group over the family's caps (its
    size: ``max_work_group_size``; its SLM: ``slm_per_work_group``) cannot launch: zero work-groups,
    and ``cannot_launch`` says why. ``figures`` names the figures used where the sources disagree;
    ``what_if`` is ``occupancy_what_if`` for this row, ``calculator`` ``calculator_link``, ``n_regs``
    ``n_regs_note`` (``grf_mode``: the config's, None when it gave none)."""
    name = canonical(target)
    limits = OCCUPANCY.get(name)
    if limits is None or limits.xve_per_xe_core is None or simd <= 0 or work_group <= 0:
        return None
    result = _occupancy(name, limits, simd, grf, work_group, slm_bytes, barriers)
    warps = -(-work_group // simd)
    result["what_if"] = occupancy_what_if(name, simd, grf, slm_bytes, barriers, warps)
    result["calculator"] = calculator_link(name, simd, grf)
    result["n_regs"] = n_regs_note(name, grf, grf_mode)
    return result
