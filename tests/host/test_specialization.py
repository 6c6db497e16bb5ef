"""The signature's hints in Triton's AOT notation, and the specialization each report row names."""

from __future__ import annotations

import types

import pytest

from xpukit.errors import XpukitError
from xpukit.runtime.offline.specialization import Specialization, for_signature, split_hints, unknown_block_io

pytestmark = pytest.mark.unit


def test_hints_are_read_as_tritons_aot_tool_reads_them():
    sig, hints = split_hints("x_ptr:*fp16:16, n:i32:16, stride:i64:1, alpha:fp32")
    assert sig == {"x_ptr": "*fp16", "n": "i32", "stride": "i64", "alpha": "fp32"}
    assert hints == {"x_ptr": 16, "n": 16, "stride": 1}
    _, spec = for_signature("x_ptr:*fp16:16, n:i32:16, stride:i64:1, alpha:fp32")
    assert spec == Specialization("declared", ("x_ptr",), ("n",), ("stride",))
    assert spec.divisibility == ("x_ptr", "n") and spec.constants() == {"stride": 1}


def test_without_hints_pointers_are_aligned_as_the_kits_allocations_are():
    params = [types.SimpleNamespace(name="y", do_not_specialize=False, do_not_specialize_on_alignment=True)]
    _, spec = for_signature("x:*fp32, y:*fp32, n:i32", params)
    assert spec == Specialization("default", ("x",))
    assert "no hints declared" in spec.describe()


def test_a_declared_signature_assumes_nothing_it_does_not_say():
    _, spec = for_signature("x:*fp32:16, y:*fp32, n:i32")
    assert spec.aligned_16 == ("x",) and spec.divisible_16 == () and spec.equal_1 == ()
    assert unknown_block_io(spec, {"x": "*fp32", "y": "*fp32", "n": "i32"}, []) == ("y", "n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x:*fp32:8", "is not 1 or 16"),
        ("x:*fp32:1", "a pointer takes only :16"),
        ("a:fp32:16", "integer arguments only"),
        ("n:i32:", "malformed signature entry"),
        ("n:i32:sixteen", "is not 1 or 16"),
        # a name twice: the second type won and the first one's hint stayed, without a word
        ("x:*fp16:16, x:*fp16", "x appears twice"),
        ("x:*fp16, n:i32, n:i64:16", "n appears twice"),
        # a type Triton does not know: Triton's own KeyError 'fp99' in every row
        ("x:*fp99", "unknown type '\\*fp99' for x"),
        ("n:int32", "unknown type 'int32' for n"),
        ("BLOCK:constexpr", "BLOCK=VALUE"),
    ],
)
def test_a_bad_hint_is_one_line_naming_the_fix(text, message):
    with pytest.raises(XpukitError, match=message) as caught:
        split_hints(text)
    assert "\n" not in caught.value.one_line() and "fix" in caught.value.one_line()


def test_the_record_round_trips_and_describes_itself():
    spec = Specialization("launch", ("a",), ("M", "K"), ("stride",))
    assert Specialization.from_dict(spec.to_dict()) == spec
    assert spec.describe() == "launch: 16-aligned a; divisible by 16: M, K; equal to 1: stride"


@pytest.mark.parametrize("ty", ["*fp16", "*kfp32", "*i8", "bf16", "fp8e5", "u64", "i1", "B", "**fp32"])
def test_every_type_triton_reads_is_accepted(ty):
    assert split_hints(f"x:{ty}")[0] == {"x": ty}
