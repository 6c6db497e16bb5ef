"""The LLVM IR edit that gives what Triton's IR leaves without a location (DPAS calls, a block
load's hoisted address set-up) the location of its op, and line 0 where none is known. The IR
lines are triton-xpu 3.3's own, from a pvc matmul (shortened operand lists)."""

from __future__ import annotations

import pytest

from xpukit.runtime.triton.debug_locations import locate_calls

pytestmark = pytest.mark.unit

IR = """define spir_kernel void @k(ptr addrspace(1) %0) !dbg !18 {
  %175 = insertelement <8 x float> %174, float %112, i64 7, !dbg !33
  %232 = call spir_func <8 x float> @_Z38intel_sub_group_f16_f16_matrix_mad_k16Dv8_sDv8_iDv8_f(<8 x i16> %149, <8 x i32> %164, <8 x float> %175) #8
  %233 = call spir_func <8 x float> @_Z38intel_sub_group_f16_f16_matrix_mad_k16Dv8_sDv8_iDv8_f(<8 x i16> %150, <8 x i32> %164, <8 x float> %232) #8
  %240 = load float, ptr addrspace(1) %0, align 4, !dbg !25
  call void @_Z7barrierj(i32 1) #3
  br label %241

241:
  call void @_Z7barrierj(i32 1) #3
  ret void, !dbg !35
}
declare spir_func void @_Z7barrierj(i32)
define internal void @helper() {
  call void @_Z7barrierj(i32 1)
  ret void
}
!40 = !{}
"""  # noqa: E501


def test_each_call_gets_its_accumulators_location_else_its_blocks():
    out, given = locate_calls(IR)
    lines = out.splitlines()
    assert lines[2].endswith("#8, !dbg !33")  # the accumulator %175 was built on the tl.dot line
    assert lines[3].endswith("#8, !dbg !33")  # chained: the previous DPAS now has it
    assert lines[5].endswith("#3, !dbg !25")  # no located operand: the block's last location
    assert lines[9] == "  call void @_Z7barrierj(i32 1) #3, !dbg !41"  # a new block's first: line 0
    assert "!dbg" not in out.split("@helper")[1].split("!40")[0]  # a function without debug info gets none
    assert lines[-1] == "!41 = !DILocation(line: 0, scope: !18)"  # in the kernel's scope, numbered anew
    assert lines[6] == "  br label %241, !dbg !25"  # a branch: its block's last location
    assert given == 5 and out.endswith("\n")


def test_ir_without_location_less_instructions_is_unchanged():
    text = (
        "define void @f() !dbg !4 {\n  %1 = call i32 @g(), !dbg !7\n  %2 = phi i32 [ 0, %3 ]\n  ret void, !dbg !7\n}\n"
    )
    assert locate_calls(text) == (text, 0)  # a phi takes none: its moves belong to the edges


HOISTED = """define spir_kernel void @matmul_kernel(ptr addrspace(1) %0, i32 %3, i32 %5) !dbg !18 {
  %38 = shl nuw i32 %5, 1
  %40 = ptrtoint ptr addrspace(1) %0 to i64
  %41 = trunc i64 %40 to i32
  %42 = and i32 %41, 63
  %43 = add i32 %42, %38
  %44 = lshr i32 %42, 1
  %99 = add i32 %3, 1
  br label %.lr.ph

.lr.ph:
  %53 = phi i32 [ %145, %.lr.ph ], [ 0, %1 ]
  call spir_func void @_Z42intel_sub_group_2d_block_read_16b_32r16x2cPU3AS1viiiDv2_iPt(ptr addrspace(1) %0, i32 %43, i32 %3), !dbg !25
  %145 = or disjoint i32 %44, %53, !dbg !30
  br i1 true, label %.lr.ph, label %exit, !dbg !31

exit:
  ret void, !dbg !35
}
!35 = !{}
"""  # noqa: E501


def test_hoisted_values_take_their_users_location_and_the_rest_line_0():
    """LLVM hoists a block load's address arithmetic out of the loop without its location: each value
    goes with the first located instruction that uses it (through chains), an unused one to line 0."""
    out, given = locate_calls(HOISTED)
    by_name = {line.split("=")[0].strip(): line for line in out.splitlines() if " = " in line}
    assert by_name["%43"].endswith(", !dbg !25") and by_name["%38"].endswith(", !dbg !25")  # the block read
    assert by_name["%40"].endswith(", !dbg !25") and by_name["%42"].endswith(", !dbg !25")  # via %43, first user
    assert by_name["%44"].endswith(", !dbg !30")
    assert by_name["%99"].endswith(", !dbg !36") and "!dbg" not in by_name["%53"]
    assert out.splitlines()[-1] == "!36 = !DILocation(line: 0, scope: !18)"
    assert "  br label %.lr.ph, !dbg !36" in out.splitlines()  # no located operand, no block location yet
    assert given == 8


INLINED = """define spir_kernel void @softmax_kernel(ptr addrspace(1) %0) !dbg !18 {
  %7 = fmul float %5, 2.0
  %8 = call float @_Z21sub_group_reduce_maxf(float %7), !dbg !40
  ret void, !dbg !35
}
!35 = !DILocation(line: 37, column: 4, scope: !18)
!40 = !DILocation(line: 184, column: 40, scope: !41, inlinedAt: !42)
!42 = distinct !DILocation(line: 190, column: 12, scope: !43, inlinedAt: !44)
!44 = !DILocation(line: 35, column: 24, scope: !18)
"""


def test_a_location_borrowed_from_an_inlined_body_is_its_call_sites():
    """%7, hoisted by LLVM, feeds a tl.max's reduction (standard.py:184, inlined twice over): it
    takes the kernel's own call site, line 35 (!44), since it sits outside the inlined ranges IGC
    records and would show as a library line of its own."""
    out, given = locate_calls(INLINED)
    assert out.splitlines()[1] == "  %7 = fmul float %5, 2.0, !dbg !44" and given == 1
