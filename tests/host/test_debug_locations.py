"""The LLVM IR edit that gives Triton's location-less calls (DPAS) the location of their op.
The IR lines are triton-xpu 3.3's own, from a pvc matmul (shortened operand lists)."""

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
"""  # noqa: E501


def test_each_call_gets_its_accumulators_location_else_its_blocks():
    out, given = locate_calls(IR)
    lines = out.splitlines()
    assert lines[2].endswith("#8, !dbg !33")  # the accumulator %175 was built on the tl.dot line
    assert lines[3].endswith("#8, !dbg !33")  # chained: the previous DPAS now has it
    assert lines[5].endswith("#3, !dbg !25")  # no located operand: the block's last location
    assert lines[9] == "  call void @_Z7barrierj(i32 1) #3"  # a new block knows no location yet
    assert "!dbg" not in out.split("@helper")[1]  # a function without debug info gets none
    assert given == 3 and out.endswith("\n")


def test_ir_without_location_less_calls_is_unchanged():
    text = "define void @f() !dbg !4 {\n  %1 = call i32 @g(), !dbg !7\n  ret void\n}\n"
    assert locate_calls(text) == (text, 0)
