"""xpukit.runtime.offline.isa: Xe ISA from real zebins through the real ocloc and IGA, and its counts.

The tests that run on the host, with no engine; the others are in tests/image/test_isa.py.
"""

from __future__ import annotations

import pytest

from tests.support.isa import assert_counts_match
from xpukit.runtime.offline import isa


@pytest.mark.unit
def test_send_kinds_from_iga_messages():
    """IGA's decoded messages as ocloc 22.43 prints them, one per kind."""
    cases = {
        ("ugm", "load.ugm.d32x32t.a32.ca.ca.bti[255]"): "global_load",
        ("ugm", "store.ugm.d32.a64"): "global_store",
        ("slm", "load.slm.d32x4.a32"): "slm_load",
        ("slm", "store.slm.d16u32.a32"): "slm_store",
        ("ugm", "load_block2d.ugm.d16.a64"): "block2d_load",
        ("ugm", "store_block2d.ugm.d32.a64"): "block2d_store",
        ("ugm", "atomic_fadd.ugm.d32.a64"): "atomic",
        ("ugm", "load.ugm.d32x16t.a32.ss[a0.2]"): "scratch_fill",
        ("ugm", "store.ugm.d32x16t.a32.ss[a0.2]"): "scratch_spill",
        ("dc0", "hword scratch block read x2"): "scratch_fill",
        ("dc0", "hword scratch block write x8"): "scratch_spill",
        ("gtwy", "signal barrier"): "barrier",
        ("gtwy", "end of thread"): "eot",
        ("ugm", "fence.ugm.invalidate.gpu"): "fence",
    }
    for (sfid, message), kind in cases.items():
        assert isa.send_kind(sfid, message) == kind, message


@pytest.mark.unit
def test_count_isa_skips_labels_padding_and_reads_predicates():
    text = "\n".join(
        [
            "L0:",
            "(W)     mov (16|M0)   r127.0<1>:ud  0x0:ud",
            "(W&f0.0) goto (32|M0)  L96   L96",
            "        math.exp (16|M0)  r3.0<1>:f  r4.0<1;1,0>:f",
            "        dpas.8x8 (16|M0)  r43:f  null:f  r2:hf  r72.0:hf  {Atomic}",
            "        send.ugm (1|M0)  r1  r127  null:0  0xFF000000  0x6228E500  {$0} // wr:1+0, rd:2; load.ugm.d32.a64",
            "        sync.bar                 null",
            "        illegal",
        ]
    )
    counts = assert_counts_match(text)
    assert (counts.moves, counts.control_flow, counts.math, counts.dpas, counts.barriers) == (1, 1, 1, 1, 1)
    assert counts.sends["global_load"] == 1


@pytest.mark.unit
def test_fma_alu_and_spill_bytes():
    """Lines as ocloc 22.43 disassembles acm-g10's tl.dot (legacy dataport scratch, 32-byte hwords)."""
    text = "\n".join(
        [
            "        mad (16|M0)  r10.0<1>:f  r10.0<1;0>:f  r20.0<1;0>:f  r30.0<1;0>:f",
            "        mad (16|M16) r11.0<1>:f  r11.0<1;0>:f  r21.0<1;0>:f  r31.0<1;0>:f",
            "        add (16|M0)  r1.0<1>:d  r2.0<1;1,0>:d  16:w",
            "        shl (16|M0)  r1.0<1>:d  r2.0<1;1,0>:d  2:w",
            "        send.dc0 (16|M0)  null  r188  r9:2  0x0  0x020F1000  {A@3,$3} "
            "// wr:1h+2, rd:0; hword scratch block write x2",
            "(W)     send.dc0 (16|M0)  r3  r188  null:0  0x0  0x024C2000  {$5} "
            "// wr:1h+0, rd:4; hword scratch block read x4",
        ]
    )
    counts = isa.count_isa(text)
    assert (counts.fma, counts.alu, counts.math, counts.dpas) == (2, 2, 0, 0)
    assert counts.sends["scratch_spill"] == counts.sends["scratch_fill"] == 1
    assert (counts.scratch_spill_bytes, counts.scratch_fill_bytes) == (64, 128)
    # LSC messages: data size x vector, times the lanes unless transposed.
    assert isa.send_bytes(16, "store.ugm.d32x4.a32.ss[a0.2][A+0x0]") == 256
    assert isa.send_bytes(16, "load.ugm.d32x8t.a32.ss[a0.2][A+0x0]") == 32
    assert isa.send_bytes(16, "load.ugm.d32.a64") == 64


@pytest.mark.unit
def test_not_a_zebin_is_one_line(tmp_path):
    from xpukit.runtime.offline.zebin import ZebinError

    bogus = tmp_path / "x.zebin"
    bogus.write_bytes(b"hello")
    with pytest.raises(ZebinError):
        isa.disassemble(bogus)


# Real Xe3P lines: ocloc 26.27 disassembly of cri zebins (examples/kernels.py:row_sum_kernel at its
# declared config, and examples/matmul.py:matmul_kernel at 256x256x32, which has 65,536 B of scratch
# per thread), as `invoke kernel-report ... --target cri --lines` records them.
CRI_ISA = """\
(W) sendg.ugm (1|M0) r1 r63:1 null:0 s0.16 0x281680 {A@1,$0} // rd:64 B; load.ugm.d32x16t.a32u.ovf.ca.ca.uc [s0.16+src0]
sendg.ugm (32|M0) r16 r12:4 null:0 s0.16 0x9000 {I@1,$1} // rd:128 B; load.ugm.d32.a64 [s0.16+src0]
sendg.slm (32|M0) null r34:2 r36:2 0x1004 {A@1,$3} // rd:0 B; store.slm.d32.a32 [src0]
(W) sendg.slm (1|M0) null r0:1 null:0 0x1F {$4} // rd:0 B; fence.slm.none.group
(W) sendg.gtwy (1|M0) null r0:1 null:0 0x84 {$5} // rd:0 B; signal barrier
(W) sync.bar 0x0
sendg.slm (32|M0) r40 r38:2 null:0 0x1000 {I@2,$6} // rd:128 B; load.slm.d32.a32 [src0]
(W) sendg.ugm (1|M0) null r49:1 r50:1 s0.16 0x9404 {I@1,$11} // rd:0 B; store.ugm.d32t.a64 [s0.16+src0]
sendg.ugm (1|M0) r35 r148:1 null:0 0x30008A03 {$14} // load_block2d.ugm.d16v.a64 [src0+(0xC0,0x0)]
sendg.ugm (1|M0) null r81:1 r182:8 0x9007 {$28} // rd:0 B; store_block2d.ugm.d32.a64 [src0]
(W) sendg.ugm (1|M0) null r34:1 r157:4 s0.56 0x1D60000D784 {$8} // rd:0 B; store.ugm.d32x64t.a32 surf[s0.56][src0+0xEB00]
(W) sendg.ugm (1|M0) r157 r34:1 null:0 s0.56 0x1D60000D780 {$4} // rd:256 B; load.ugm.d32x64t.a32 surf[s0.56][src0+0xEB00]
(W) sendg.gtwy (1|M0) null r0:1 null:0 0x0 {EOT,$12} // rd:0 B; end of thread
"""  # noqa: E501 (IGA's lines as printed)


@pytest.mark.unit
def test_xe3p_sendg_lines_count_as_sends():
    """On cri IGA prints sends as ``sendg`` (and ``sendgx``): they used to count as 0 sends (752 of
    the 2,479 of a cri 256x256x32 matmul). Their decoded messages give the kinds as on other families; the scratch
    surface shows as ``surf[sN.M]`` (spills and fills, 256 B per thread each here)."""
    counts = isa.count_isa(CRI_ISA)
    assert counts.send_total == 12 and counts.barriers == 1 and counts.instructions == 13
    expected = {"global_load": 2, "global_store": 1, "slm_load": 1, "slm_store": 1, "fence": 1, "barrier": 1,
                "block2d_load": 1, "block2d_store": 1, "scratch_spill": 1, "scratch_fill": 1, "eot": 1}  # fmt: skip
    assert {kind: n for kind, n in counts.sends.items() if n} == expected
    assert (counts.scratch_spill_bytes, counts.scratch_fill_bytes) == (256, 256)
    # sendgx is Xe3P's other send opcode: a send whatever IGA decodes, "other" when nothing says more.
    gx = isa.parse_isa("(W) sendgx.ugm (1|M0) r1 r2:1 null:0 0x0 {$1}\n")
    assert [i.category for i in gx] == ["send:other"]
