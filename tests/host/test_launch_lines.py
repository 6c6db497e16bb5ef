"""The launch ABI across Triton lines (issue 30): which hidden arguments follow the user's, from
each line's metadata as that line writes it (read from upstream's driver and compiler on each
branch; the metadata objects here are written to those rules, since only the 3.3 line runs here):

* 3.3 (triton-xpu 3.3.0b1): no scratch fields; a trailing local-memory argument when shared > 0.
* release/3.8: global and profile scratch pointers, then the local-memory argument when shared > 0.
* main / 3.9 (after #7606): the two scratch pointers and no local-memory argument, unless compiled
  with dynamic_shared_memory (an option, so in the metadata); upstream's launcher decides by the
  kernel's declared parameter count, and so does the kit when it has the SPIR-V.

The SPIR-V modules are built with the kit's own serializer (no spirv-as here); the image tests
check the parameter count on a real Triton 3.3 kernel (tests/image/test_launch_kernels.py)."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest

from xpukit.runtime.offline import spirv as spv
from xpukit.runtime.triton.launch import LaunchABI

pytestmark = pytest.mark.unit

SIGNATURE = {"x": "*fp32", "out": "*fp32", "n": "i32"}
FN = SimpleNamespace(arg_names=["x", "out", "n", "BLOCK"])


def metadata(line: str, shared: int, dynamic: bool = False) -> SimpleNamespace:
    md = SimpleNamespace(name="k", num_warps=4, threads_per_warp=16, shared=shared)
    if line in ("3.8", "main"):
        md.global_scratch_size, md.global_scratch_align = 0, 1
        md.profile_scratch_size, md.profile_scratch_align = 128, 8
    if line == "main":
        md.dynamic_shared_memory = dynamic  # XPUOptions' field since #7606, carried in the metadata
    return md


@pytest.mark.parametrize(
    ("line", "shared", "dynamic", "scratch", "local_index"),
    [
        ("3.3", 0, False, [], None),
        ("3.3", 512, False, [], 3),
        ("3.8", 0, False, ["global_scratch_size", "profile_scratch_size"], None),
        ("3.8", 512, False, ["global_scratch_size", "profile_scratch_size"], 5),
        ("main", 0, False, ["global_scratch_size", "profile_scratch_size"], None),
        ("main", 512, False, ["global_scratch_size", "profile_scratch_size"], None),
        ("main", 512, True, ["global_scratch_size", "profile_scratch_size"], 5),
    ],
)
def test_hidden_arguments_per_line(line, shared, dynamic, scratch, local_index):
    abi = LaunchABI.from_metadata(FN, SIGNATURE, metadata(line, shared, dynamic))
    assert [name for name, _size, _align in abi.scratch] == scratch
    assert abi.local_index == local_index
    assert abi.kinds == "PPi"  # the user's arguments are the same on every line


def test_scratch_sizes_and_alignment_come_from_the_metadata():
    abi = LaunchABI.from_metadata(FN, SIGNATURE, metadata("3.8", 0))
    assert abi.scratch == [("global_scratch_size", 0, 1), ("profile_scratch_size", 128, 8)]


def module(kernel: str, params: int) -> bytes:
    """A SPIR-V module whose entry point ``kernel`` declares ``params`` parameters."""
    padded = kernel.encode().ljust((len(kernel) // 4 + 1) * 4, b"\0")  # NUL-terminated, whole words
    name_words = list(struct.unpack(f"<{len(padded) // 4}I", padded))
    ins = [spv.Instruction(spv.OP_ENTRY_POINT, (6, 10, *name_words))]
    ins.append(spv.Instruction(spv.OP_FUNCTION, (2, 10, 0, 3)))
    ins += [spv.Instruction(spv.OP_FUNCTION_PARAMETER, (4, 20 + i)) for i in range(params)]
    ins.append(spv.Instruction(spv.OP_FUNCTION_END, ()))
    return spv.serialize([spv.MAGIC, 0x00010400, 0, 100, 0], ins)


def test_parameter_count_reads_the_entry_point():
    assert spv.parameter_count(module("k", 6), "k") == 6
    assert spv.parameter_count(module("k", 0), "k") == 0
    assert spv.parameter_count(module("k", 3), "other") is None


@pytest.mark.parametrize(("declared", "local_index"), [(5, None), (6, 5)])
def test_the_declared_count_decides_on_main_as_upstreams_launcher_does(declared, local_index):
    """A main-line kernel with shared memory: static (5 = 3 user + 2 scratch) or dynamic (6), whatever
    the option said: a partitioned shared layout makes it dynamic without the option."""
    for dynamic in (False, True):
        abi = LaunchABI.from_metadata(FN, SIGNATURE, metadata("main", 512, dynamic), kernel_params=declared)
        assert abi.local_index == local_index


def test_a_count_that_fits_neither_layout_falls_back_to_the_lines_rule():
    abi = LaunchABI.from_metadata(FN, SIGNATURE, metadata("3.8", 512), kernel_params=9)
    assert abi.local_index == 5
