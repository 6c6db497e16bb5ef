"""xpukit.runtime.offline.zebin: reading zebins, checking payload layouts, and fuzzing the reader.

Unit tests use a small synthetic zebin built in this file (ELF64, e_machine 205, a .text.<kernel>
section and a .ze_info YAML shaped like ocloc 22.43's), so they run where no ocloc exists. The
container tests read zebins that real ocloc produces at test time.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.zebin import FUZZ, assert_reader_contract, mutations, ze_info_span
from xpukit.runtime.offline.zebin import EM_INTELGT, ZebinError, check_layout, read_zebin, type_size

ZE_INFO = """---
version:         '1.20'
kernels:
  - name:            scale_kernel
    user_attributes:
      intel_reqd_sub_group_size: 32
    execution_env:
      grf_count:       128
      simd_size:       32
    payload_arguments:
      - arg_type:        global_id_offset
        offset:          0
        size:            12
      - arg_type:        arg_bypointer
        offset:          0
        size:            0
        arg_index:       0
        addrmode:        stateful
        addrspace:       global
        access_type:     readonly
      - arg_type:        arg_bypointer
        offset:          32
        size:            8
        arg_index:       0
        addrmode:        stateless
        addrspace:       global
        access_type:     readonly
      - arg_type:        arg_bypointer
        offset:          40
        size:            8
        arg_index:       1
        addrmode:        stateless
        addrspace:       global
        access_type:     readwrite
      - arg_type:        arg_byvalue
        offset:          48
        size:            4
        arg_index:       2
      - arg_type:        arg_byvalue
        offset:          52
        size:            4
        arg_index:       3
    per_thread_memory_buffers:
      - type:            scratch
        usage:           spill_fill_space
        size:            256
...
"""
SCALE_SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "a": "fp32", "n": "i32", "BLOCK": "constexpr"}


def build_elf(sections: list[tuple[str, int, bytes]], machine: int = EM_INTELGT, elf_class: int = 2) -> bytes:
    """A minimal little-endian ELF64 relocatable with the given (name, sh_type, data) sections."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n, _, _ in sections) + b".shstrtab\0"
    body = bytearray()
    headers = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    name_off = 1
    for name, sh_type, data in [*sections, (".shstrtab", 3, names)]:
        offset = 64 + len(body)
        body += data
        headers.append(struct.pack("<IIQQQQIIQQ", name_off, sh_type, 0, 0, offset, len(data), 0, 0, 1, 0))
        name_off += len(name) + 1
    shoff = 64 + len(body)
    ident = b"\x7fELF" + bytes([elf_class, 1, 1, 0, 1]) + b"\0" * 7
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 1, machine, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(headers), len(headers) - 1
    )
    return header + bytes(body) + b"".join(headers)


def synthetic_zebin(ze_info: str | bytes = ZE_INFO, machine: int = EM_INTELGT, text: bytes = b"\0" * 64) -> bytes:
    info = ze_info if isinstance(ze_info, bytes) else ze_info.encode()
    return build_elf([(".text.scale_kernel", 1, text), (".ze_info", 0xFF000011, info)], machine)


# --- reader ---------------------------------------------------------------------------------------


@pytest.mark.unit
def test_reads_synthetic_zebin(tmp_path):
    path = tmp_path / "k.zebin"
    path.write_bytes(synthetic_zebin())
    zebin = read_zebin(path)
    assert zebin.ze_info_version == "1.20"
    assert zebin.elf_type == "ET_REL"
    (kernel,) = zebin.kernels
    assert (kernel.name, kernel.text_size, kernel.simd_size, kernel.grf_count) == (
        "scale_kernel",
        64,
        32,
        128,
    )
    assert kernel.required_sub_group_size == 32
    assert kernel.spill_size == 256 and kernel.private_size == 0
    args = kernel.explicit_args()
    assert [(i, a.offset, a.size) for i, a in args.items()] == [
        (0, 32, 8),
        (1, 40, 8),
        (2, 48, 4),
        (3, 52, 4),
    ]
    assert zebin.to_dict()["kernels"][0]["name"] == "scale_kernel"


@pytest.mark.unit
def test_layout_matches_signature_and_constexprs_vanish():
    kernel = read_zebin(synthetic_zebin()).kernel("scale_kernel")
    slots = check_layout(kernel, SCALE_SIGNATURE)
    assert [(s.name, s.kind, s.offset, s.size) for s in slots] == [
        ("x_ptr", "pointer", 32, 8),
        ("y_ptr", "pointer", 40, 8),
        ("a", "value", 48, 4),
        ("n", "value", 52, 4),
    ]


@pytest.mark.unit
@pytest.mark.parametrize(
    ("signature", "message"),
    [
        ({"x_ptr": "*fp32", "y_ptr": "*fp32", "a": "i64", "n": "i32"}, "a \\(i64\\) has 4 bytes, expected 8"),
        (
            {"x_ptr": "*fp32", "y_ptr": "*fp32", "a": "*fp32", "n": "i32"},
            "passed by value, expected by pointer",
        ),
        ({"x_ptr": "*fp32", "y_ptr": "*fp32", "a": "fp32", "n": "i32", "m": "i32"}, "m \\(i32\\) has no"),
    ],
)
def test_layout_mismatch_is_reported(signature, message):
    kernel = read_zebin(synthetic_zebin()).kernel("scale_kernel")
    with pytest.raises(ZebinError, match=message):
        check_layout(kernel, signature)


@pytest.mark.unit
def test_type_sizes():
    assert [type_size(t) for t in ("*fp16", "i64", "fp32", "i32", "fp16", "i8")] == [8, 8, 4, 4, 2, 1]
    with pytest.raises(ZebinError, match="unknown Triton type"):
        type_size("complex128")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not an ELF"),
        (b"PK\x03\x04 a zip file", "not an ELF"),
        (b"\x7fELF\x02\x01", "truncated ELF header"),
        (synthetic_zebin()[:40], "truncated ELF header"),
        (synthetic_zebin()[:400], "corrupt zebin|truncated"),
        (synthetic_zebin(machine=62), "e_machine is 62, not EM_INTELGT"),
        (build_elf([(".text.k", 1, b"")], elf_class=1), "not ELF64"),
        (build_elf([(".text.k", 1, b"")]), "no .ze_info"),
        (synthetic_zebin(ze_info="kernels: [unclosed"), "not valid YAML"),
        (synthetic_zebin(ze_info="- just a list"), "no kernel list"),
        (synthetic_zebin(ze_info="kernels:\n  - name: other\n"), "without .ze_info entries: scale_kernel"),
        (synthetic_zebin(ze_info="kernels:\n  - execution_env: {}\n"), "without a name"),
        (
            synthetic_zebin(ze_info="kernels:\n  - name: scale_kernel\n    execution_env: {simd_size: x}\n"),
            "simd_size is 'x'",
        ),
        (synthetic_zebin(ze_info="kernels: [{name: scale_kernel, payload_arguments: 3}]"), "not a list"),
        (synthetic_zebin(ze_info=b"kernels: \xff\xfe"), "corrupt zebin|not valid YAML"),
    ],
)
def test_bad_input_gives_zebin_error(data, message):
    with pytest.raises(ZebinError, match=message):
        read_zebin(data)


@pytest.mark.unit
def test_unreadable_path_and_unknown_kernel(tmp_path):
    with pytest.raises(ZebinError, match="cannot read") as err:
        read_zebin(tmp_path / "missing.zebin")
    assert "invoke compile --out" in err.value.fix
    with pytest.raises(ZebinError, match=r"no kernel 'nope'.*scale_kernel"):
        read_zebin(synthetic_zebin()).kernel("nope")


# --- fuzzing --------------------------------------------------------------------------------------


@pytest.mark.unit
def test_fuzz_synthetic_zebin():
    """4000 mutated/truncated synthetic zebins: a Zebin or a ZebinError, never anything else."""
    base = synthetic_zebin()

    @FUZZ
    @given(mutations(base, ze_info_span(base)))
    def check(data: bytes) -> None:
        assert_reader_contract(data)

    check()


@pytest.mark.unit
@settings(max_examples=500, deadline=None, database=None)
@given(st.binary(max_size=512))
def test_fuzz_random_bytes(data):
    assert_reader_contract(data)
    assert_reader_contract(b"\x7fELF\x02\x01\x01" + data)


# --- real zebins ----------------------------------------------------------------------------------
