"""``invoke zebin-info`` (``python -m xpukit zebin-info``): what the zebin reader finds in a zebin, or in
each zebin of ocloc's multi-device archive, and the ISA with ``--asm``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xpukit.runtime.kernels.compile import text_table
from xpukit.runtime.offline.isa import disassemble, zebin_device
from xpukit.runtime.offline.zebin import (
    ZE_INFO_CHECKED,
    is_archive,
    read_archive,
    read_file,
    read_zebin,
    ze_info_version,
)


def run_zebin_info(path: Path, as_json: bool = False, asm: bool = False, target: str | None = None) -> int:
    """Print what the reader finds in a zebin, or in each zebin of ocloc's multi-device archive (and
    the ISA with ``asm``). Returns 0; unreadable input raises ``ZebinError``, a zebin for another
    device than ``target`` an ``IsaError``."""
    data = read_file(path)  # refused before reading: not a regular file, too large, no ELF/ar magic
    if is_archive(data):
        return _archive_info(Path(path), data, as_json, asm)
    zebin = read_zebin(data)
    isa = disassemble(data, target) if asm else None
    if as_json:
        out = {**zebin.to_dict(), "device": zebin_device(data)}
        if isa is not None:
            out["isa"] = {"device": isa.device, "tool": isa.tool, "kernels": isa.kernels}
        print(json.dumps(out, indent=2))
        return 0
    _print_zebin(str(path), zebin, zebin_device(data), isa)
    return 0


def _archive_info(path: Path, data: bytes, as_json: bool, asm: bool) -> int:
    members = read_archive(data)
    if as_json:
        out = []
        for m in members:
            entry: dict[str, Any] = {"member": m.name, "size": m.size, "kind": m.kind}
            if m.zebin is not None:
                entry.update(m.zebin.to_dict(), device=zebin_device(m.data))
                if asm:
                    isa = disassemble(m.data)
                    entry["isa"] = {"device": isa.device, "tool": isa.tool, "kernels": isa.kernels}
            out.append(entry)
        print(json.dumps({"archive": str(path), "members": out}, indent=2))
        return 0
    zebins = [m for m in members if m.zebin is not None]
    print(
        f"{path}: multi-device ar archive (ocloc -device a,b,...), {len(zebins)} zebin(s) in {len(members)} member(s)"
    )
    print(
        _indent(
            text_table(
                ["member", "kind", "size B", "device"],
                [(m.name, m.kind, m.size, zebin_device(m.data) if m.zebin else "-") for m in members],
            )
        )
    )
    for m in zebins:
        assert m.zebin is not None
        print()
        _print_zebin(f"member {m.name}", m.zebin, zebin_device(m.data), disassemble(m.data) if asm else None)
    return 0


def _print_zebin(where: str, zebin: Any, device: str | None, isa: Any) -> None:
    print(
        f"{where}: {zebin.size} bytes, ELF64 EM_INTELGT {zebin.elf_type}, device {device or '?'}, "
        f".ze_info version {zebin.ze_info_version or '?'}{_version_note(zebin.ze_info_version)}, "
        f"{len(zebin.kernels)} kernel(s)"
    )
    for k in zebin.kernels:
        print(
            f"kernel {k.name}: .text {k.text_size} B, SIMD {k.simd_size}, "
            f"sub-group {k.required_sub_group_size or '-'}, GRF {k.grf_count}, "
            f"scratch {k.spill_size} B/thread, private {k.private_size} B/thread"
        )
        bindless = k.bindless_args()
        rows = [
            (
                i,
                "pointer" if a.arg_type == "arg_bypointer" else "value",
                a.offset,
                a.size,
                a.addrmode,
                a.addrspace,
                a.access_type,
                f"{bindless[i].offset}+{bindless[i].size}" if i in bindless and bindless[i] is not a else "-",
            )
            for i, a in k.explicit_args().items()
        ]
        header = ["arg", "kind", "offset", "size", "addrmode", "addrspace", "access", "bindless slot"]
        print(_indent(text_table(header, rows)))
        if isa is not None:
            print(f"--- ISA of {k.name} for {isa.device} ({isa.tool}) ---")
            print(isa.kernels[k.name].rstrip())


def _version_note(version: str | None) -> str:
    parsed = ze_info_version(version)
    if parsed is not None and parsed > ZE_INFO_CHECKED:
        return f" (newer than the {ZE_INFO_CHECKED[0]}.{ZE_INFO_CHECKED[1]} this reader was checked against)"
    return ""


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
