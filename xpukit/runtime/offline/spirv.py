"""SPIR-V at the word level: read a module's instructions and make Triton's SPIR-V loadable by
Intel's CPU OpenCL runtime.

The CPU runtime rejects ``OpCapability KernelAttributesINTEL`` ("requires unsupported
capability 5892"). :func:`patch_for_cpu` drops that capability, the
``SPV_INTEL_kernel_attributes`` extension and every execution mode that needs the capability
(Triton emits ``MaxWorkgroupSizeINTEL``). Those modes are hints; dropping them changes no
kernel semantics. Instructions are walked by their word counts, never by byte search.
"""

from __future__ import annotations

import dataclasses
import struct

from xpukit.errors import XpukitError

MAGIC = 0x07230203
HEADER_WORDS = 5

OP_EXTENSION = 10
OP_ENTRY_POINT = 15
OP_EXECUTION_MODE = 16
OP_CAPABILITY = 17
OP_EXECUTION_MODE_ID = 331

CAP_KERNEL_ATTRIBUTES_INTEL = 5892
EXT_KERNEL_ATTRIBUTES = "SPV_INTEL_kernel_attributes"
# Execution modes enabled by KernelAttributesINTEL (SPIR-V grammar, SPV_INTEL_kernel_attributes).
MODES_NEEDING_KERNEL_ATTRIBUTES = {
    5893: "MaxWorkgroupSizeINTEL",
    5894: "MaxWorkDimINTEL",
    5895: "NoGlobalOffsetINTEL",
}


class SpirvError(XpukitError):
    """Not a well-formed SPIR-V module."""


@dataclasses.dataclass(frozen=True)
class Instruction:
    opcode: int
    operands: tuple[int, ...]  # the words after the first

    def words(self) -> list[int]:
        return [((len(self.operands) + 1) << 16) | self.opcode, *self.operands]


def _words(data: bytes) -> tuple[list[int], str]:
    if len(data) < HEADER_WORDS * 4 or len(data) % 4:
        raise SpirvError(
            f"not SPIR-V: {len(data)} bytes is not a whole number of words with a header",
            "pass the module Triton produced (CompiledKernel.asm['spv'])",
        )
    for endian in ("<", ">"):
        if struct.unpack_from(endian + "I", data)[0] == MAGIC:
            return list(struct.unpack(f"{endian}{len(data) // 4}I", data)), endian
    raise SpirvError("not SPIR-V: bad magic number", "pass the module Triton produced (CompiledKernel.asm['spv'])")


def parse(data: bytes) -> tuple[list[int], list[Instruction], str]:
    """Split a module into its 5 header words and instructions; also returns the byte order."""
    words, endian = _words(data)
    header, i, out = words[:HEADER_WORDS], HEADER_WORDS, []
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0 or i + count > len(words):
            raise SpirvError(
                f"malformed SPIR-V: instruction at word {i} (opcode {opcode}) has word count {count}",
                "the module is truncated or corrupt; recompile the kernel",
            )
        out.append(Instruction(opcode, tuple(words[i + 1 : i + count])))
        i += count
    return header, out, endian


def serialize(header: list[int], instructions: list[Instruction], endian: str = "<") -> bytes:
    words = list(header)
    for ins in instructions:
        words.extend(ins.words())
    return struct.pack(f"{endian}{len(words)}I", *words)


def literal_string(words: tuple[int, ...] | list[int]) -> str:
    """Decode a SPIR-V literal string (UTF-8, NUL-terminated, packed little-endian in words)."""
    raw = b"".join(struct.pack("<I", w) for w in words)
    return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace")


def entry_points(data: bytes) -> list[str]:
    """Names of the module's entry points (Triton: one, the kernel's name)."""
    _, instructions, _ = parse(data)
    return [literal_string(i.operands[2:]) for i in instructions if i.opcode == OP_ENTRY_POINT]


def _cpu_incompatible(ins: Instruction) -> bool:
    if ins.opcode == OP_CAPABILITY:
        return ins.operands[:1] == (CAP_KERNEL_ATTRIBUTES_INTEL,)
    if ins.opcode == OP_EXTENSION:
        return literal_string(ins.operands) == EXT_KERNEL_ATTRIBUTES
    if ins.opcode in (OP_EXECUTION_MODE, OP_EXECUTION_MODE_ID):
        return len(ins.operands) >= 2 and ins.operands[1] in MODES_NEEDING_KERNEL_ATTRIBUTES
    return False


def needs_cpu_patch(data: bytes) -> bool:
    return any(_cpu_incompatible(i) for i in parse(data)[1])


def patch_for_cpu(data: bytes) -> bytes:
    """Drop what Intel's CPU OpenCL runtime rejects; returns the module unchanged if nothing is."""
    header, instructions, endian = parse(data)
    kept = [i for i in instructions if not _cpu_incompatible(i)]
    if len(kept) == len(instructions):
        return bytes(data)
    return serialize(header, kept, endian)


OP_NAME = 5
OP_FUNCTION = 54
OP_FUNCTION_PARAMETER = 55
OP_FUNCTION_END = 56
OP_CONVERT_U_TO_PTR = 120


def address_parameters(data: bytes, kernel: str) -> set[int]:
    """Indices of the kernel's integer parameters that it turns straight into pointers
    (``OpConvertUToPtr`` of the parameter itself: Triton's ``int.to(tl.pointer_type(...))``).
    Launchers check those arguments against live device memory like typed pointers."""
    _, instructions, _ = parse(data)
    # The LLVM translator names the kernel's body after it and makes the entry point a wrapper
    # that calls it with the same parameters; without that name, look at the entry point itself.
    names = {i.operands[0] for i in instructions if i.opcode == OP_NAME and literal_string(i.operands[1:]) == kernel}
    entries = {
        i.operands[1] for i in instructions if i.opcode == OP_ENTRY_POINT and literal_string(i.operands[2:]) == kernel
    }
    params: dict[int, int] = {}
    found: set[int] = set()
    inside = False
    for ins in instructions:
        if ins.opcode == OP_FUNCTION:
            inside = ins.operands[1] in (names or entries)
        elif not inside:
            continue
        elif ins.opcode == OP_FUNCTION_PARAMETER:
            params[ins.operands[1]] = len(params)
        elif ins.opcode == OP_CONVERT_U_TO_PTR and ins.operands[2] in params:
            found.add(params[ins.operands[2]])
        elif ins.opcode == OP_FUNCTION_END:
            break
    return found


def parameter_count(data: bytes, kernel: str) -> int | None:
    """How many parameters the entry point ``kernel`` declares (user arguments plus Triton's hidden
    ones), or None when the module has no such entry point."""
    _, instructions, _ = parse(data)
    entries = {
        i.operands[1] for i in instructions if i.opcode == OP_ENTRY_POINT and literal_string(i.operands[2:]) == kernel
    }
    count, inside = 0, False
    for ins in instructions:
        if ins.opcode == OP_FUNCTION:
            inside = ins.operands[1] in entries
        elif inside and ins.opcode == OP_FUNCTION_PARAMETER:
            count += 1
        elif inside and ins.opcode == OP_FUNCTION_END:
            return count
    return None
