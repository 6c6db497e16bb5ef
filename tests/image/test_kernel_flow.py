"""xpukit.runtime.offline.kernel_flow on real zebins: live GRF bytes equal to IGA's own ``liveTotals``
on every instruction of every kernel examples/ has, the matmul's K loop, and stall sources that agree
with the annotations counted straight from ``ocloc disasm``'s text.

Needs ocloc 26.27, iga64 and Triton: the image. IGA's figures come from the same iga64
(``-Xprint-json -Xprint-defs``), read tolerantly (its JSON is malformed around Xe3P's ``sendg``).
Small kernels assembled with ``iga64 -a`` pin the predication rules on their own.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.families import current_ocloc_or_skip

MAIN = ("pvc", "bmg", "ptl")  # every kernel, every instruction compared with IGA
OTHERS = ("acm-g10", "arl-h", "mtl", "lnl", "wcl", "nvl-s")  # the kit's other families
XE3P = ("cri", "nvl-p")  # IGA platform 3pxpc: sendg
SMALL = ("vector_add", "row_sum", "softmax")  # compared with IGA on every family (IGA is quick on them)
# name: (file:kernel, signature (None: the one XPUKIT_KERNELS declares), constexprs, options, targets)
KERNELS = {
    "scale": ("kernels.py:scale_kernel", None, {}, {}, MAIN),
    "add": ("kernels.py:add_kernel", None, {}, {}, MAIN),
    "strided_copy": ("kernels.py:strided_copy_kernel", None, {}, {}, MAIN),
    "axpy_fp16": ("kernels.py:axpy_fp16_kernel", None, {}, {}, MAIN),
    "row_sum": ("kernels.py:row_sum_kernel", None, {}, {}, MAIN + OTHERS + XE3P),
    "matmul": ("matmul.py:matmul_kernel", None, {}, {}, MAIN),  # the declared 128x128x32 tile, hints
    "matmul64": (
        "matmul.py:matmul_kernel", None, {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, {"num_warps": 4},
        MAIN + OTHERS + XE3P,
    ),
    "vector_add": (
        "tutorial_01_vector_add.py:add_kernel", "x_ptr:*fp32, y_ptr:*fp32, output_ptr:*fp32, n_elements:i32",
        {"BLOCK_SIZE": 1024}, {}, MAIN + OTHERS + XE3P,
    ),
    "softmax": (
        "tutorial_02_fused_softmax.py:softmax_kernel",
        "out_ptr:*fp32, in_ptr:*fp32, in_row_stride:i32, out_row_stride:i32, n_rows:i32, n_cols:i32",
        {"BLOCK_SIZE": 1024}, {"num_warps": 4}, MAIN + OTHERS + XE3P,
    ),
    "softmax_rows": (
        "dpnp_triton.py:softmax_rows",
        "out_ptr:*fp32, in_ptr:*fp32, in_row_stride:i32, out_row_stride:i32, n_rows:i32, n_cols:i32",
        {"BLOCK": 1024}, {"num_warps": 4}, MAIN,
    ),
    "scale_addresses": (
        "xpu_triton_ur.py:triton_scale_kernel", "in_addr:i64, out_addr:i64, scale:fp32, n_elements:i32",
        {"BLOCK_SIZE": 1024}, {}, MAIN,
    ),
    "scale_typed": (
        "xpu_triton_ur.py:scale_typed_kernel", "in_ptr:*fp32, out_ptr:*fp32, scale:fp32, n_elements:i32",
        {"BLOCK_SIZE": 1024}, {}, MAIN,
    ),
}  # fmt: skip
LOOPLESS = ("scale", "add", "strided_copy", "axpy_fp16", "row_sum", "vector_add", "scale_addresses", "scale_typed")


def _compile(kernel: str, signature: str | None, constexprs: dict, options: dict, targets: tuple) -> dict:
    """target -> (the kernel's .text bytes, ocloc disasm's text), compiled as kernel-report does."""
    from elftools.elf.elffile import ELFFile

    from xpukit.runtime.kernels.compile import build_targets, load_kernel, resolve_targets
    from xpukit.runtime.offline.ocloc import find_ocloc
    from xpukit.runtime.offline.specialization import for_signature

    spec = load_kernel(str(ROOT / "examples" / kernel))
    types, special = for_signature(signature if signature is not None else spec.signature)
    consts = {**spec.constexprs, **constexprs, **special.constants()}
    tool = find_ocloc()
    builds = build_targets(
        spec.fn, {k: v for k, v in types.items() if k not in consts}, consts, resolve_targets(tool, list(targets)),
        {"generate_native_code": True, **options}, tool, asm=True,
        divisible=[n for n in special.divisibility if n not in consts],
    )  # fmt: skip
    out = {}
    for build in builds:
        assert build.error is None, (kernel, build.target, build.error)
        elf = ELFFile(io.BytesIO(build.zebin))
        out[build.target] = (elf.get_section_by_name(f".text.{build.compiled.metadata.name}").data(), build.isa)
    return out


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    pytest.importorskip("triton")
    current_ocloc_or_skip()
    assert shutil.which("iga64"), "the image carries iga64"
    mp = pytest.MonkeyPatch()
    mp.setenv("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton-cache")))
    try:
        yield {
            (name, target): code
            for name, (kernel, sig, consts, options, targets) in KERNELS.items()
            for target, code in _compile(kernel, sig, consts, options, targets).items()
        }
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def flows(compiled):
    from xpukit.runtime.offline.kernel_flow import analyze_kernel

    return {key: analyze_kernel(text, key[1]) for key, (text, _) in compiled.items()}


_ELEMENT = re.compile(r'\{"kind":"I", "id":\d+, "pc":(\d+)')
_LIVE = re.compile(r'"liveTotals":\{"r":(\d+)')


def iga_live_totals(text: bytes, target: str, tmp_path: Path) -> dict[int, int]:
    """IGA's liveTotals.r per PC (``iga64 -Xprint-json -Xprint-defs``), read element by element: each
    instruction element starts with its pc and carries one liveTotals before the next element."""
    from xpukit.runtime.offline.flow import resolve_platform

    path = tmp_path / f"{target}.text"
    path.write_bytes(text)
    cmd = ["iga64", "-d", f"-p={resolve_platform(target)}", str(path), "-Xprint-pc", "-Xprint-json", "-Xprint-defs"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    starts = [(m.start(), int(m.group(1))) for m in _ELEMENT.finditer(out)]
    totals = {}
    for (at, pc), (end, _) in zip(starts, [*starts[1:], (len(out), 0)], strict=True):
        (live,) = _LIVE.findall(out, at, end)
        totals[pc] = int(live)
    return totals


@pytest.mark.container
@pytest.mark.parametrize("target", MAIN)
def test_live_bytes_equal_igas_live_totals_on_every_example_kernel(compiled, flows, target, tmp_path):
    """Every kernel examples/ has (the matmul with its declared hints and tile, and at 64x64x32),
    every instruction: the kit's count of live GRF bytes is IGA's liveTotals.r."""
    compared = 0
    for name in KERNELS:
        flow = flows[(name, target)]
        iga = iga_live_totals(compiled[(name, target)][0], target, tmp_path)
        assert set(iga) == set(flow.pcs), (name, target)
        differ = {pc: (flow.liveness.live_bytes[pc], iga[pc]) for pc in iga if flow.liveness.live_bytes[pc] != iga[pc]}
        assert not differ, (name, target, dict(list(differ.items())[:5]))
        assert flow.liveness.exact and flow.liveness.peak_bytes == max(iga.values()) > 0
        compared += len(iga)
    assert compared > 3000


@pytest.mark.container
def test_every_other_family_and_xe3p(compiled, flows, tmp_path):
    """acm-g10, arl-h, mtl, lnl, wcl, nvl-s, cri and nvl-p (Xe3P: sendg, IGA's JSON malformed): the small kernels
    equal IGA's liveTotals; the matmul (8,700 instructions of FMAs on acm-g10, where IGA's own analysis
    takes minutes) is analyzed with its K loop."""
    for target in OTHERS + XE3P:
        for name in SMALL:
            flow = flows[(name, target)]
            iga = iga_live_totals(compiled[(name, target)][0], target, tmp_path)
            assert {pc: flow.liveness.live_bytes[pc] for pc in iga} == iga, (name, target)
        matmul = flows[("matmul64", target)]
        assert [loop.depth for loop in matmul.loops.loops] == [1], target
        if target in XE3P:
            iga = iga_live_totals(compiled[("matmul64", target)][0], target, tmp_path)
            assert {pc: matmul.liveness.live_bytes[pc] for pc in iga} == iga, target


@pytest.mark.container
def test_pcs_are_parse_isas(compiled, flows):
    """The analysis' PCs are the PCs of isa.parse_isa's instructions, the ones the line table maps."""
    from xpukit.runtime.offline.isa import parse_isa

    for key, (_, asm) in compiled.items():
        assert list(flows[key].pcs) == [ins.pc for ins in parse_isa(asm)], key


@pytest.mark.container
def test_the_matmul_k_loop_holds_the_dpas(compiled, flows):
    """One loop (the K loop), depth 1, every DPAS inside it (acm-g10, arl-h and mtl: every SIMD FMA,
    all but the one scalar (W) mad of the address math); kernels without a loop: depth 0 everywhere."""
    for target in MAIN + OTHERS + XE3P:
        for name in ("matmul", "matmul64"):
            if (name, target) not in flows:
                continue
            flow = flows[(name, target)]
            (loop,) = flow.loops.loops
            assert loop.depth == 1 and not flow.loops.irreducible
            work = [
                ins.pc
                for ins in _parsed(compiled[(name, target)][1])
                if ins.category in ("dpas", "fma") and not ins.text.startswith("(W)")
            ]
            assert len(work) >= 16, (name, target)
            assert all(flow.loops.depth[pc] == 1 and loop.start_pc <= pc < loop.end_pc for pc in work)
            assert loop.start_pc <= loop.header_pc < loop.end_pc
            assert any(flow.loops.depth[pc] == 0 for pc in flow.pcs)
    for name in LOOPLESS:
        for target in MAIN:
            assert set(flows[(name, target)].loops.depth.values()) == {0}, (name, target)


def _parsed(asm: str) -> list:
    from xpukit.runtime.offline.isa import parse_isa

    return parse_isa(asm)


def _annotations(asm: str) -> dict[str, int]:
    """Counts taken straight from ocloc disasm's text: token waits, distance waits, waiting syncs."""
    counts = {"sbid": 0, "dist": 0, "sync": 0, "sync_tokens": 0}
    for line in asm.splitlines():
        code = line.partition("//")[0]
        options = re.findall(r"\{([^}]*)\}", code)
        for item in ",".join(options).split(","):
            item = item.strip()
            counts["sbid"] += bool(re.fullmatch(r"\$\d+\.(dst|src)", item))
            counts["dist"] += bool(re.fullmatch(r"[A-Z]?@\d+", item))
        words = code.split()
        op = next((w for w in words if not w.startswith("(")), "")
        if op.startswith("sync.") and op != "sync.nop":
            counts["sync"] += 1
            counts["sync_tokens"] += len(re.findall(r"\$\d+", code.split("{")[0]))
    return counts


@pytest.mark.container
def test_stall_sources_agree_with_the_annotations(compiled, flows):
    """Per kernel: totals are the per-instruction sums; sbid, dist and sync are the counts taken from
    ocloc's own text; send waits are at most the token waits plus the syncs' listed tokens; the
    matmul's first DPAS waits for a 2D block load's token: a send-to-use wait."""
    for key, (_, asm) in compiled.items():
        flow = flows[key]
        stalls = flow.stalls
        assert stalls.totals == {k: sum(c[k] for c in stalls.by_pc.values()) for k in stalls.totals}, key
        expected = _annotations(asm)
        assert {k: stalls.totals[k] for k in ("sbid", "dist", "sync")} == {
            k: expected[k] for k in ("sbid", "dist", "sync")
        }, key
        assert stalls.totals["send"] <= expected["sbid"] + expected["sync_tokens"], key
        assert stalls.totals["sbid"] + stalls.totals["dist"] > 0, key
    for target in ("pvc", "bmg", "ptl"):
        flow = flows[("matmul64", target)]
        texts = {ins.pc: ins.text for ins in _parsed(compiled[("matmul64", target)][1])}
        first_dpas = min(pc for pc, text in texts.items() if "dpas" in text and flow.loops.depth[pc])
        waiting = [pc for pc in flow.pcs if pc <= first_dpas and flow.loops.depth[pc] and flow.stalls.by_pc[pc]["send"]]
        assert waiting, target
        loads = {pc for pc, text in texts.items() if "load_block2d" in text}
        assert any(set(flow.stalls.waits_on[pc]) & loads for pc in waiting), target


# --------------------------------------------------------------------------- assembled kernels

_HEAD = """L0:
        mov (16|M0)              r10.0<1>:f    r2.0<1;1,0>:f
        mov (16|M0)              r11.0<1>:f    r3.0<1;1,0>:f
        cmp (16|M0)   (lt)f0.0   null<1>:f     r4.0<1;1,0>:f     0.0:f
"""
_TAIL = """        send.ugm (16|M0)         null     r20     r13:2  0x0    0x08000504           {$1}
(W)     send.gtwy (1|M0)         null     r127    null:0  0x0    0x02000010           {EOT}
"""
SNIPPETS = {
    # a predicated pair kills r12 for the unpredicated use; r13 written under f0.0 only for the f0.0 use
    "pair": _HEAD
    + """(f0.0)  mov (16|M0)              r12.0<1>:f    r10.0<1;1,0>:f
(~f0.0) mov (16|M0)              r12.0<1>:f    r11.0<1;1,0>:f
(f0.0)  mov (16|M0)              r13.0<1>:f    r10.0<1;1,0>:f
(f0.0)  add (16|M0)              r14.0<1>:f    r12.0<1;1,0>:f    r13.0<1;1,0>:f
        add (16|M0)              r13.0<1>:f    r12.0<1;1,0>:f    r13.0<1;1,0>:f
"""
    + _TAIL,
    # the flag is written between the two halves of the pair: no kill
    "flag_rewritten": _HEAD
    + """(f0.0)  mov (16|M0)              r12.0<1>:f    r10.0<1;1,0>:f
        cmp (16|M0)   (lt)f0.0   null<1>:f     r5.0<1;1,0>:f     0.0:f
(~f0.0) mov (16|M0)              r12.0<1>:f    r11.0<1;1,0>:f
        add (16|M0)              r13.0<1>:f    r12.0<1;1,0>:f    r10.0<1;1,0>:f
"""
    + _TAIL,
    # the two halves in two blocks: no kill
    "two_blocks": _HEAD
    + """        cmp (16|M0)   (lt)f1.0   null<1>:f     r5.0<1;1,0>:f     0.0:f
(f0.0)  mov (16|M0)              r12.0<1>:f    r10.0<1;1,0>:f
(W&f1.0) jmpi                    L96
L96:
(~f0.0) mov (16|M0)              r12.0<1>:f    r11.0<1;1,0>:f
        add (16|M0)              r13.0<1>:f    r12.0<1;1,0>:f    r10.0<1;1,0>:f
"""
    + _TAIL,
    # sel's flag is a source: its write kills
    "sel": _HEAD
    + """        mov (16|M0)              r12.0<1>:f    r3.0<1;1,0>:f
(f0.0)  sel (16|M0)              r12.0<1>:f    r10.0<1;1,0>:f    r11.0<1;1,0>:f
        sel (16|M0)   (lt)f1.0   r14.0<1>:f    r12.0<1;1,0>:f    r10.0<1;1,0>:f
(f0.0)  add (16|M0)              r13.0<1>:f    r12.0<1;1,0>:f    r14.0<1;1,0>:f
"""
    + _TAIL,
    # a loop around a predicated pair
    "loop": _HEAD
    + """L48:
(f0.0)  mov (16|M0)              r12.0<1>:f    r10.0<1;1,0>:f
(~f0.0) mov (16|M0)              r12.0<1>:f    r11.0<1;1,0>:f
        add (16|M0)              r13.0<1>:f    r12.0<1;1,0>:f    r11.0<1;1,0>:f
        add (16|M0)              r10.0<1>:f    r12.0<1;1,0>:f    r10.0<1;1,0>:f
        cmp (16|M0)   (lt)f1.0   null<1>:f     r10.0<1;1,0>:f    0.0:f
(W&f1.0) jmpi                    L48
"""
    + _TAIL,
}


def _assemble(asm: str, tmp_path: Path, name: str) -> bytes:
    source = tmp_path / f"{name}.asm"
    source.write_text(asm)
    subprocess.run(["iga64", "-a", "-p=xehpc", str(source), "-o", str(tmp_path / f"{name}.bin")], check=True)
    return (tmp_path / f"{name}.bin").read_bytes()


def _naive(listing, kills_when_predicated: bool) -> list[int]:
    """Textbook liveness over the same CFG where a predicated write always (or never) kills."""
    blocks = listing.blocks
    live_in = [0] * len(blocks)
    changed = True
    while changed:
        changed = False
        for block in reversed(blocks):
            live = 0
            for s in block.succs:
                live |= live_in[s]
            for ins in reversed(listing.instructions[block.start : block.end]):
                if kills_when_predicated or not ins.flag_pred:
                    live &= ~ins.grf_defs
                live |= ins.grf_uses
            if live != live_in[block.index]:
                live_in[block.index], changed = live, True
    out = []
    for block in blocks:
        live = 0
        for s in block.succs:
            live |= live_in[s]
        rows = []
        for ins in reversed(listing.instructions[block.start : block.end]):
            if kills_when_predicated or not ins.flag_pred:
                live &= ~ins.grf_defs
            live |= ins.grf_uses
            rows.append(live.bit_count())
        out += rows[::-1]
    return out


@pytest.mark.container
def test_predication_rules_equal_igas(tmp_path):
    """Assembled kernels, one rule each: the kit equals IGA's liveTotals on every instruction, and
    both textbook readings of a predicated write (it kills; it never kills) miss on some of them."""
    from xpukit.runtime.offline import flow, liveness

    naive_missed = {True: 0, False: 0}
    for name, asm in SNIPPETS.items():
        text = _assemble(asm, tmp_path, name)
        listing = flow.parse_listing(flow.iga_listing(text, "xehpc"), "xehpc")
        ours = liveness.analyze_liveness(listing)
        iga = iga_live_totals(text, "pvc", tmp_path)
        assert [ours.live_bytes[ins.pc] for ins in listing.instructions] == [
            iga[ins.pc] for ins in listing.instructions
        ]
        for kills in (True, False):
            naive_missed[kills] += _naive(listing, kills) != [iga[ins.pc] for ins in listing.instructions]
    assert naive_missed[True] and naive_missed[False], naive_missed


@pytest.mark.container
def test_iga_errors_are_one_line(tmp_path):
    from xpukit.runtime.offline.flow import FlowError
    from xpukit.runtime.offline.kernel_flow import analyze_kernel

    with pytest.raises(FlowError, match="could not decode") as bad:
        analyze_kernel(bytes(range(64)), "pvc")
    assert "\n" not in bad.value.one_line() and bad.value.fix
