"""Read Intel GPU zebins (ELF64, e_machine EM_INTELGT = 205) with pyelftools and PyYAML.

A zebin holds one ``.text.<kernel>`` section per kernel and a ``.ze_info`` section: YAML that lists,
per kernel, the execution environment (SIMD size, GRF count, spill/private sizes) and the payload
arguments, i.e. where each kernel argument sits in the cross-thread data the runtime fills. The
reader is checked against ocloc 26.27 / IGC 2.40 (``.ze_info`` version 1.73); a major version other
than 1 is refused. ``ocloc -device a,b,...`` writes an ar archive of zebins instead: ``read_archive``
reads its members.

Every failure to read (not an ELF, wrong machine, truncated, corrupt YAML...) is a ``ZebinError``:
the reader is fed files from disk and must never crash with some other exception.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import stat
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from elftools.elf.elffile import ELFFile

from xpukit.errors import XpukitError

EM_INTELGT = 205
_ELF_MAGIC = b"\x7fELF"
_AR_MAGIC = b"!<arch>\n"
_SPIRV_MAGIC = (b"\x03\x02\x23\x07", b"\x07\x23\x02\x03")
ZE_INFO_MAJOR = 1  # the .ze_info major version the reader knows
ZE_INFO_CHECKED = (1, 73)  # the newest .ze_info version the reader was checked against (ocloc 26.27)
_ELF64_HEADER_SIZE = 64

# Triton scalar types -> bytes in the kernel's argument payload. Pointers are 8 bytes (64-bit).
_SCALAR_SIZES = {
    "i1": 1,
    "i8": 1,
    "u8": 1,
    "i16": 2,
    "u16": 2,
    "fp16": 2,
    "bf16": 2,
    "i32": 4,
    "u32": 4,
    "fp32": 4,
    "f32": 4,
    "i64": 8,
    "u64": 8,
    "fp64": 8,
    "fp8e4nv": 1,
    "fp8e5": 1,
    "fp8e4b15": 1,
    "fp8e4b8": 1,
    "fp8e5b16": 1,
}


class ZebinError(XpukitError):
    """The input is not a readable zebin, or its layout disagrees with a signature."""


@dataclasses.dataclass(frozen=True)
class PayloadArg:
    """One entry of a kernel's ``payload_arguments`` in ``.ze_info``."""

    arg_type: str
    offset: int
    size: int
    arg_index: int | None = None
    addrmode: str | None = None
    addrspace: str | None = None
    access_type: str | None = None


@dataclasses.dataclass(frozen=True)
class KernelInfo:
    name: str
    text_size: int  # bytes of machine code in .text.<name>; 0 if the section is missing
    simd_size: int | None
    required_sub_group_size: int | None
    grf_count: int | None
    spill_size: int  # bytes of register spill space per thread (0 = no spills)
    private_size: int
    payload_args: tuple[PayloadArg, ...]
    barrier_count: int = 0  # named barriers the kernel uses (0: none)

    def explicit_args(self) -> dict[int, PayloadArg]:
        """arg_index -> one merged entry per kernel argument, with the offset and size of its value.

        A pointer's address is a stateless 8-byte ``arg_bypointer`` (ocloc 26.27, every family).
        acm-g10, mtl and arl-h also list a 4-byte ``arg_bypointer`` with ``addrmode: bindless`` for
        the same argument (its surface-state slot, ``bindless_args``): never the argument's value.
        Older IGC wrote a stateful entry of size 0 plus an 8-byte ``buffer_address``; the merged
        entry then takes that entry's offset and size.
        """
        primary: dict[int, PayloadArg] = {}
        address: dict[int, PayloadArg] = {}
        for arg in self.payload_args:
            if arg.arg_index is None or arg.addrmode == "bindless":
                continue
            if arg.arg_type in ("arg_bypointer", "arg_byvalue"):
                if arg.size > 0 or arg.arg_index not in primary:
                    primary[arg.arg_index] = arg
            elif arg.arg_type == "buffer_address" and arg.size > 0:
                address[arg.arg_index] = arg
        for index, arg in self.bindless_args().items():
            primary.setdefault(index, arg)  # a pointer with only a bindless slot: shown as it is
        merged = {}
        for index, arg in sorted(primary.items()):
            carrier = address.get(index)
            if arg.arg_type == "arg_bypointer" and arg.size == 0 and carrier is not None:
                arg = dataclasses.replace(arg, offset=carrier.offset, size=carrier.size)
            merged[index] = arg
        return merged

    def bindless_args(self) -> dict[int, PayloadArg]:
        """arg_index -> the argument's bindless surface slot (``addrmode: bindless``), where it has one."""
        return {
            a.arg_index: a
            for a in self.payload_args
            if a.arg_index is not None and a.arg_type == "arg_bypointer" and a.addrmode == "bindless"
        }


@dataclasses.dataclass(frozen=True)
class Zebin:
    size: int
    elf_type: str
    ze_info_version: str | None
    sections: tuple[str, ...]
    kernels: tuple[KernelInfo, ...]

    def kernel(self, name: str) -> KernelInfo:
        for k in self.kernels:
            if k.name == name:
                return k
        raise ZebinError(
            f"zebin has no kernel {name!r}",
            f"it has: {', '.join(k.name for k in self.kernels) or 'none'}",
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class ArgSlot:
    """A signature argument matched to its payload slot; ``name`` is None for hidden arguments."""

    index: int
    name: str | None
    triton_type: str | None
    kind: str  # "pointer" or "value"
    offset: int
    size: int


def read_zebin(source: bytes | bytearray | str | Path) -> Zebin:
    """Parse a zebin from bytes or a file path. Raises ``ZebinError`` for anything unreadable."""
    data, where = _load(source)
    if is_archive(data):
        raise ZebinError(
            f"{where}: a multi-device ar archive (ocloc -device a,b,...), not one zebin",
            "read its members with read_archive (invoke zebin-info lists them)",
        )
    return _parse_checked(data, where)


def _parse(data: bytes, where: str) -> Zebin:
    if len(data) < 4 or data[:4] != _ELF_MAGIC:
        raise ZebinError(f"{where}: not an ELF file (no \\x7fELF magic)", "pass a zebin written by ocloc")
    if len(data) < _ELF64_HEADER_SIZE:
        raise ZebinError(f"{where}: truncated ELF header ({len(data)} bytes)")
    if data[4] != 2:
        raise ZebinError(f"{where}: not ELF64 (EI_CLASS={data[4]})", "zebins are 64-bit ELF")
    if data[5] != 1:
        raise ZebinError(f"{where}: not little-endian (EI_DATA={data[5]})")
    # pyelftools names machine 205 differently across versions; the raw field is unambiguous.
    (machine,) = struct.unpack_from("<H", data, 18)
    if machine != EM_INTELGT:
        raise ZebinError(
            f"{where}: e_machine is {machine}, not EM_INTELGT ({EM_INTELGT})",
            "this is an ELF for another processor; pass an Intel GPU zebin",
        )
    elf = ELFFile(io.BytesIO(data))
    sections: dict[str, bytes] = {}
    names: list[str] = []
    for section in elf.iter_sections():
        name = section.name
        names.append(name)
        offset, size = section["sh_offset"], section["sh_size"]
        if section["sh_type"] == "SHT_NOBITS" or not name:
            continue
        if offset + size > len(data):
            raise ZebinError(
                f"{where}: section {name!r} runs past the end of the file "
                f"(offset {offset} + size {size} > {len(data)}): truncated zebin"
            )
        sections[name] = data[offset : offset + size]
    if ".ze_info" not in sections:
        raise ZebinError(f"{where}: no .ze_info section (patchtokens binary?)", "compile with --format zebin")
    try:
        info = yaml.safe_load(sections[".ze_info"].decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ZebinError(f"{where}: .ze_info is not valid YAML ({type(exc).__name__})") from None
    if not isinstance(info, dict) or not isinstance(info.get("kernels", []), list):
        raise ZebinError(f"{where}: .ze_info has no kernel list")
    kernels = tuple(_kernel_info(entry, sections, where) for entry in info.get("kernels") or [])
    text_names = {n[len(".text.") :] for n in names if n.startswith(".text.")}
    missing = text_names - {k.name for k in kernels}
    if missing:
        raise ZebinError(f"{where}: .text sections without .ze_info entries: {', '.join(sorted(missing))}")
    version = info.get("version")
    _check_version(version, where)
    return Zebin(
        size=len(data),
        elf_type=str(elf.header["e_type"]),
        ze_info_version=None if version is None else str(version),
        sections=tuple(names),
        kernels=kernels,
    )


def ze_info_version(version: Any) -> tuple[int, int] | None:
    """``'1.73'`` -> (1, 73); None when the field is missing or not a version."""
    match = re.fullmatch(r"(\d+)\.(\d+)", str(version).strip()) if version is not None else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def _check_version(version: Any, where: str) -> None:
    parsed = ze_info_version(version)
    if version is not None and parsed is None:
        raise ZebinError(f"{where}: .ze_info version {version!r} is not MAJOR.MINOR")
    if parsed is not None and parsed[0] != ZE_INFO_MAJOR:
        raise ZebinError(
            f"{where}: .ze_info version {version} is not one this reader knows (major {ZE_INFO_MAJOR}, "
            f"checked up to {ZE_INFO_CHECKED[0]}.{ZE_INFO_CHECKED[1]})",
            "read it with the kit release that matches its compiler",
        )


def _int(value: Any, what: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ZebinError(f"{where}: .ze_info field {what} is {value!r}, expected an integer")
    return value


def _opt_int(value: Any, what: str, where: str) -> int | None:
    return None if value is None else _int(value, what, where)


def _mapping(value: Any, what: str, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ZebinError(f"{where}: .ze_info field {what} is not a mapping")
    return value


def _kernel_info(entry: Any, sections: Mapping[str, bytes], where: str) -> KernelInfo:
    entry = _mapping(entry, "kernels[]", where)
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ZebinError(f"{where}: .ze_info kernel entry without a name")
    env = _mapping(entry.get("execution_env"), f"{name}.execution_env", where)
    attrs = _mapping(entry.get("user_attributes"), f"{name}.user_attributes", where)
    # Spill and private space appear either in execution_env or as per-thread memory buffers,
    # depending on the IGC release.
    spill = _int(env.get("spill_size", 0), "spill_size", where)
    private = _int(env.get("private_size", 0), "private_size", where)
    buffers = entry.get("per_thread_memory_buffers") or []
    if not isinstance(buffers, list):
        raise ZebinError(f"{where}: {name}.per_thread_memory_buffers is not a list")
    for buf in buffers:
        buf = _mapping(buf, "per_thread_memory_buffers[]", where)
        size = _int(buf.get("size", 0), "per_thread_memory_buffers.size", where)
        if buf.get("usage") == "spill_fill_space" or buf.get("type") == "scratch":
            spill = max(spill, size)
        elif buf.get("usage") == "private_space":
            private = max(private, size)
    raw_args = entry.get("payload_arguments") or []
    if not isinstance(raw_args, list):
        raise ZebinError(f"{where}: {name}.payload_arguments is not a list")
    args = []
    for raw in raw_args:
        raw = _mapping(raw, "payload_arguments[]", where)
        arg_type = raw.get("arg_type")
        if not isinstance(arg_type, str):
            raise ZebinError(f"{where}: {name} payload argument without arg_type")
        args.append(
            PayloadArg(
                arg_type=arg_type,
                offset=_int(raw.get("offset", 0), "offset", where),
                size=_int(raw.get("size", 0), "size", where),
                arg_index=_opt_int(raw.get("arg_index"), "arg_index", where),
                addrmode=_opt_str(raw.get("addrmode")),
                addrspace=_opt_str(raw.get("addrspace")),
                access_type=_opt_str(raw.get("access_type")),
            )
        )
    text = sections.get(f".text.{name}", b"")
    return KernelInfo(
        name=name,
        text_size=len(text),
        simd_size=_opt_int(env.get("simd_size"), "simd_size", where),
        required_sub_group_size=_opt_int(
            attrs.get("intel_reqd_sub_group_size", env.get("required_sub_group_size")),
            "required_sub_group_size",
            where,
        ),
        grf_count=_opt_int(env.get("grf_count"), "grf_count", where),
        spill_size=spill,
        private_size=private,
        payload_args=tuple(args),
        barrier_count=_int(env.get("barrier_count", 0), "barrier_count", where),
    )


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def type_size(triton_type: str) -> int:
    """Payload bytes of one Triton signature type ("*fp32" -> 8, "i32" -> 4)."""
    if triton_type.startswith("*"):
        return 8
    try:
        return _SCALAR_SIZES[triton_type]
    except KeyError:
        raise ZebinError(
            f"unknown Triton type {triton_type!r} in the signature",
            f"use a pointer (*fp32, ...) or one of: {', '.join(_SCALAR_SIZES)}",
        ) from None


def check_layout(kernel: KernelInfo, signature: Mapping[str, str]) -> list[ArgSlot]:
    """Match the payload to the Triton signature the kernel came from; raise ``ZebinError`` on mismatch.

    ``signature`` is Triton's full mapping (name -> type, "constexpr" for constexprs, which take no
    slot). Payload entries beyond the signature are hidden arguments Triton appends (a local-memory
    buffer when ``shared > 0``; two scratch pointers on newer Triton) and are returned unnamed.
    """
    params = [(n, t) for n, t in signature.items() if t != "constexpr"]
    explicit = kernel.explicit_args()
    problems: list[str] = []
    slots: list[ArgSlot] = []
    for index, (name, ty) in enumerate(params):
        arg = explicit.get(index)
        want_kind = "pointer" if ty.startswith("*") else "value"
        if arg is None:
            problems.append(f"{name} ({ty}) has no payload slot {index}")
            continue
        kind = "pointer" if arg.arg_type == "arg_bypointer" else "value"
        if kind != want_kind:
            problems.append(f"{name} ({ty}) is passed by {kind}, expected by {want_kind}")
        elif arg.size != type_size(ty):
            problems.append(f"{name} ({ty}) has {arg.size} bytes, expected {type_size(ty)}")
        slots.append(ArgSlot(index, name, ty, kind, arg.offset, arg.size))
    for index, arg in explicit.items():
        if index >= len(params):
            kind = "pointer" if arg.arg_type == "arg_bypointer" else "value"
            slots.append(ArgSlot(index, None, None, kind, arg.offset, arg.size))
    if problems:
        raise ZebinError(
            f"kernel {kernel.name}: payload does not match the signature: {'; '.join(problems)}",
            "compile with the same signature the zebin was built from",
        )
    return slots


# --------------------------------------------------------------------------- multi-device archives


@dataclasses.dataclass(frozen=True)
class ArchiveMember:
    """One member of ocloc's multi-device ar archive: a zebin (``zebin``) or something else."""

    name: str  # e.g. "64.12.60.7" (pointer size, then the device's IP version) or "64.bmg"
    size: int
    kind: str  # "zebin", "generic_ir" (the SPIR-V ocloc keeps beside them) or "other"
    data: bytes
    zebin: Zebin | None = None


def is_archive(data: bytes) -> bool:
    return data[: len(_AR_MAGIC)] == _AR_MAGIC


def read_archive(source: bytes | bytearray | str | Path) -> list[ArchiveMember]:
    """The members of an ar archive ``ocloc compile -device a,b,...`` writes, padding left out.
    Raises ``ZebinError`` for anything that is not such an archive or whose zebins are unreadable."""
    data, where = _load(source)
    if not is_archive(data):
        raise ZebinError(f"{where}: not an ar archive (no !<arch> magic)", "pass ocloc's multi-device output")
    members: list[ArchiveMember] = []
    long_names = b""
    pos = len(_AR_MAGIC)
    while pos < len(data):
        if pos + 60 > len(data):
            raise ZebinError(f"{where}: truncated ar member header at byte {pos}")
        header = data[pos : pos + 60]
        if header[58:60] != b"`\n":
            raise ZebinError(f"{where}: corrupt ar member header at byte {pos}")
        raw_name = header[:16].decode("ascii", "replace").rstrip()
        try:
            size = int(header[48:58].decode("ascii").strip())
        except ValueError:
            raise ZebinError(f"{where}: corrupt ar member size at byte {pos}") from None
        start, end = pos + 60, pos + 60 + size
        if end > len(data):
            raise ZebinError(f"{where}: ar member {raw_name!r} runs past the end of the file")
        body = data[start:end]
        pos = end + (size & 1)  # members start on even offsets
        if raw_name == "//":  # GNU long-name table
            long_names = body
            continue
        if raw_name.startswith("/") and raw_name[1:].isdigit():
            offset = int(raw_name[1:])
            name = long_names[offset:].split(b"/\n", 1)[0].decode("ascii", "replace")
        else:
            name = raw_name.rstrip("/")
        if name.startswith("pad_"):  # ocloc aligns members with padding entries
            continue
        if body[:4] == _ELF_MAGIC and len(body) >= 20 and struct.unpack_from("<H", body, 18)[0] == EM_INTELGT:
            members.append(ArchiveMember(name, size, "zebin", body, _parse_checked(body, f"{where}({name})")))
        elif body[:4] in _SPIRV_MAGIC or name == "generic_ir":  # the input SPIR-V, as ocloc keeps it
            members.append(ArchiveMember(name, size, "generic_ir", body))
        else:
            members.append(ArchiveMember(name, size, "other", body))
    return members


def _parse_checked(data: bytes, where: str) -> Zebin:
    try:
        return _parse(data, where)
    except ZebinError:
        raise
    except Exception as exc:
        raise ZebinError(f"{where}: corrupt zebin ({type(exc).__name__}: {exc})") from None


def _load(source: bytes | bytearray | str | Path) -> tuple[bytes, str]:
    if isinstance(source, (str, Path)):
        return read_file(source), str(source)
    return bytes(source), "input"


MAX_FILE_BYTES = 256 * 2**20  # the largest file the reader takes (a zebin is KBs, at most a few MB)
_READ_FIX = "pass the path of a .zebin file (invoke compile --out DIR writes one per target)"
_KINDS = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFIFO: "a pipe",
          stat.S_IFDIR: "a folder", stat.S_IFSOCK: "a socket"}  # fmt: skip


def read_file(path: str | Path) -> bytes:
    """The bytes of a zebin (or ocloc's archive) on disk, refused before they are read when the path
    is not a regular file (``/dev/zero``, a pipe: a read that never ends), is larger than
    :data:`MAX_FILE_BYTES`, or starts with neither ELF's nor ar's magic."""
    try:  # O_NONBLOCK: opening a pipe with no writer returns at once (fstat then refuses it)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ZebinError(f"cannot read {path}: {exc.strerror or exc}", _READ_FIX) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a file")
            raise ZebinError(f"{path} is {kind}, not a regular file", _READ_FIX)
        too_big = ZebinError(
            f"{path} is larger than any zebin ({info.st_size / 2**20:.0f} MiB; the reader takes up to "
            f"{MAX_FILE_BYTES >> 20} MiB)",
            _READ_FIX,
        )
        if info.st_size > MAX_FILE_BYTES:
            raise too_big
        head = os.read(fd, len(_AR_MAGIC))
        if head[:4] != _ELF_MAGIC and head != _AR_MAGIC:
            what = "it is empty" if not head else "no \\x7fELF magic"
            raise ZebinError(f"{path}: not an ELF file ({what})", "pass a zebin written by ocloc")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = head + f.read(MAX_FILE_BYTES + 1 - len(head))
    except OSError as exc:
        raise ZebinError(f"cannot read {path}: {exc.strerror or exc}", _READ_FIX) from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:  # it grew while it was read
        raise too_big
    return data
