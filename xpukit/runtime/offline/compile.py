"""The logic behind ``invoke compile`` and ``invoke zebin-info``.

``invoke compile path.py:kernel --target pvc --target acm-g10 --out DIR`` compiles a @triton.jit
function to SPIR-V and zebin per target through Triton's pipeline (with the zebin stage, so Triton's
cache holds both) and writes ``DIR/<target>/<kernel>.{spv,zebin,json}``.

Signature and constexprs come from the command line or from a module-level ``XPUKIT_KERNELS`` dict
next to the kernel::

    XPUKIT_KERNELS = {"scale_kernel": {"signature": "x_ptr:*fp32, n:i32", "constexprs": {"BLOCK": 1024}}}
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from xpukit.errors import UsageError, XpukitError
from xpukit.runtime.offline.isa import count_isa, disassemble
from xpukit.runtime.offline.ocloc import find_ocloc
from xpukit.runtime.offline.zebin import ZebinError, check_layout, read_zebin
from xpukit.runtime.triton.tritonc import compile_kernel, parse_signature
from xpukit.targets import PRESETS, split_targets

DECLARATIONS = "XPUKIT_KERNELS"


def root_cause(exc: BaseException) -> str:
    """The innermost cause in one line. Triton's CompilationError text is the source with a caret;
    the reason ("arange's range must be a power of 2") is its __cause__."""
    inner = exc
    while inner.__cause__ is not None:
        inner = inner.__cause__
    lines = [ln.strip() for ln in str(inner).splitlines() if ln.strip()]
    text = f"{type(inner).__name__}: {lines[0] if lines else ''}"
    outer = str(exc).strip().splitlines()
    if inner is not exc and outer:
        text += f" ({type(exc).__name__} {outer[0]})"  # e.g. "CompilationError at 2:38:"
    return text


class KernelCompileError(XpukitError):
    """Triton could not compile the kernel (front end or backend)."""


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    fn: Any
    name: str
    path: Path
    signature: str | None
    constexprs: dict[str, Any]


def load_kernel(spec: str) -> KernelSpec:
    """Import ``path.py:function`` and return the function with any declared signature/constexprs."""
    file_part, sep, func_name = spec.rpartition(":")
    if not sep or not file_part or not func_name:
        raise XpukitError(f"malformed kernel {spec!r}", "write path/to/file.py:kernel_name")
    path = Path(file_part).expanduser().resolve()
    if not path.is_file():
        raise XpukitError(f"kernel file {file_part} not found", "give the path to a .py file")
    module_name = f"xpukit_kernels_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    module = sys.modules.get(module_name)
    if module is None:
        import_spec = importlib.util.spec_from_file_location(module_name, path)
        if import_spec is None or import_spec.loader is None:
            raise XpukitError(f"cannot import {path}", "give a Python source file")
        module = importlib.util.module_from_spec(import_spec)
        # The source tree may be mounted read-only: do not try to write __pycache__ next to it.
        saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True
        sys.modules[module_name] = module
        try:
            import_spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(module_name, None)
            raise XpukitError(f"importing {path} failed: {type(exc).__name__}: {exc}", "fix the kernel file") from None
        finally:
            sys.dont_write_bytecode = saved
    fn = getattr(module, func_name, None)
    if fn is None:
        raise UsageError(f"{path.name} has no function {func_name!r}", "check the name after the colon")
    if not getattr(fn, "arg_names", None):
        raise XpukitError(f"{func_name} in {path.name} is not a @triton.jit function", "decorate it with @triton.jit")
    declared = getattr(module, DECLARATIONS, {}).get(func_name, {})
    if not isinstance(declared, Mapping):
        raise XpukitError(f"{DECLARATIONS}[{func_name!r}] in {path.name} is not a dict")
    constexprs = declared.get("constexprs", {})
    if isinstance(constexprs, (list, tuple)):
        constexprs = parse_constexprs(constexprs)
    return KernelSpec(fn, func_name, path, declared.get("signature"), dict(constexprs))


def parse_constexprs(items: Sequence[str]) -> dict[str, Any]:
    """``["BLOCK=1024", "ACT='relu'"]`` -> ``{"BLOCK": 1024, "ACT": "relu"}`` (Python literals)."""
    result: dict[str, Any] = {}
    for item in items:
        for part in filter(None, (p.strip() for p in item.split(","))):
            name, sep, text = (s.strip() for s in part.partition("="))
            if not sep or not name.isidentifier() or not text:
                raise XpukitError(f"malformed constexpr {part!r}", "write NAME=VALUE, e.g. BLOCK=1024")
            try:
                result[name] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                raise XpukitError(
                    f"constexpr {name} value {text!r} is not a Python literal",
                    "use a number, True/False or a quoted string",
                ) from None
    return result


def write_whole(path: Path, data: bytes) -> None:
    """Write through a temporary file and rename: an interrupt (Ctrl-C) never leaves half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _json_default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def run_compile(
    kernel: str,
    targets: list[str],
    out_dir: Path,
    signature: str | None,
    constexprs: list[str],
    num_warps: int | None = None,
    grf_mode: str | None = None,
    ocloc: str | None = None,
    asm: bool = False,
) -> int:
    """Compile ``kernel`` for every target; print a table. Returns 0, or 1 if a payload layout
    disagrees with the signature. Usage and compile errors raise ``XpukitError`` subclasses."""
    spec = load_kernel(kernel)
    sig_text = signature if signature is not None else spec.signature
    if not sig_text:
        raise XpukitError(
            f"no signature for {spec.name}",
            f"pass --signature 'x:*fp32,n:i32' or declare it in {DECLARATIONS} next to the kernel",
        )
    sig = parse_signature(sig_text)
    cex = {**spec.constexprs, **parse_constexprs(constexprs)}
    for name in list(cex):
        sig.pop(name, None)  # a constexpr given on the command line overrides a declared type
    full_signature = {n: ("constexpr" if n in cex else sig.get(n, "?")) for n in spec.fn.arg_names}
    tool = find_ocloc(ocloc)
    names = split_targets(targets)
    if names == ["all"]:  # every GPU preset this ocloc can build
        names = [n for n, p in PRESETS.items() if p.ocloc_device and tool.supports(p.ocloc_device)]
    devices = {t: tool.require_target(t) for t in names}  # fail before compiling anything
    options: dict[str, Any] = {"generate_native_code": True}
    if num_warps is not None:
        # invoke hands untyped options over as strings
        try:
            options["num_warps"] = int(num_warps)
        except ValueError:
            raise XpukitError(f"num_warps {num_warps!r} is not an integer", "pass e.g. --num-warps 4") from None
    if grf_mode is not None:
        options["grf_mode"] = grf_mode

    rows = []
    status = 0
    out_dir = Path(out_dir)
    for target in names:
        try:
            compiled = compile_kernel(spec.fn, sig, cex, target, options)
        except XpukitError:
            raise
        except Exception as exc:
            # Triton's own reason in one line; the whole text stays chained for --debug.
            raise KernelCompileError(
                f"{spec.name} failed to compile for {target}: {root_cause(exc)[:120]}",
                "fix the kernel or its signature/constexprs (--debug shows Triton's full message)",
            ) from exc
        zebin_bytes = compiled.asm["zebin"]
        info = read_zebin(zebin_bytes).kernel(compiled.metadata.name)
        try:
            layout = [dataclasses.asdict(s) for s in check_layout(info, full_signature)]
            layout_error = None
        except ZebinError as exc:
            layout, layout_error, status = [], exc.one_line(), 1
        target_dir = out_dir / target
        target_dir.mkdir(parents=True, exist_ok=True)
        write_whole(target_dir / f"{spec.name}.spv", compiled.asm["spv"])
        write_whole(target_dir / f"{spec.name}.zebin", zebin_bytes)
        counts = None
        if asm:  # <kernel>.isa next to the zebin (ocloc disasm through IGA)
            isa_text = disassemble(zebin_bytes, devices[target]).kernels[info.name]
            write_whole(target_dir / f"{spec.name}.isa", isa_text.encode())
            counts = count_isa(isa_text)
        meta = compiled.metadata._asdict()
        record = {
            "kernel": spec.name,
            "source": str(spec.path),
            "target": target,
            "signature": full_signature,
            "constexprs": cex,
            "ocloc": {"path": tool.path, "version": tool.version, "device": devices[target]},
            "zebin": {k: v for k, v in dataclasses.asdict(info).items() if k != "payload_args"},
            "arguments": layout,
            "layout_error": layout_error,
            "launch": {"local_size": [meta["num_warps"] * meta["threads_per_warp"], 1, 1]},
            "metadata": meta,
        }
        text = json.dumps(record, indent=2, default=_json_default)
        write_whole(target_dir / f"{spec.name}.json", (text + "\n").encode())
        row: list[Any] = [target, len(zebin_bytes), info.simd_size, info.grf_count, info.spill_size]
        if counts is not None:
            spills = f"{counts.sends['scratch_spill']}/{counts.sends['scratch_fill']}"
            row += [counts.instructions, spills, counts.dpas, counts.fma]
        rows.append(row)
        if layout_error:
            print(f"{target}: {layout_error}", file=sys.stderr)

    exts = "spv,zebin,json" + (",isa" if asm else "")
    print(f"{spec.name} -> {out_dir}/<target>/{spec.name}.{{{exts}}}  ({tool.describe()})")
    # scratch B/thr is the zebin's per-thread spill space; spill traffic (sends) needs the ISA (--asm).
    header = ["target", "size B", "SIMD", "GRF", "scratch B/thr"]
    print(_table(header + (["instr", "spill st/ld", "DPAS", "FMA"] if asm else []), rows))
    return status


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [list(map(str, header))] + [["-" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def run_zebin_info(path: Path, as_json: bool = False, asm: bool = False, target: str | None = None) -> int:
    """Print what the reader finds in a zebin (and its ISA with ``asm``). Returns 0; unreadable input
    raises ``ZebinError``, a zebin for another device than ``target`` an ``IsaError``."""
    zebin = read_zebin(Path(path))
    isa = None
    if asm:
        isa = disassemble(Path(path), target)
    if as_json:
        data = zebin.to_dict()
        if isa is not None:
            data["isa"] = {"device": isa.device, "tool": isa.tool, "kernels": isa.kernels}
        print(json.dumps(data, indent=2))
        return 0
    print(
        f"{path}: {zebin.size} bytes, ELF64 EM_INTELGT {zebin.elf_type}, "
        f".ze_info version {zebin.ze_info_version or '?'}, {len(zebin.kernels)} kernel(s)"
    )
    for k in zebin.kernels:
        print(
            f"kernel {k.name}: .text {k.text_size} B, SIMD {k.simd_size}, "
            f"sub-group {k.required_sub_group_size or '-'}, GRF {k.grf_count}, "
            f"scratch {k.spill_size} B/thread, private {k.private_size} B/thread"
        )
        rows = [
            (
                i,
                "pointer" if a.arg_type == "arg_bypointer" else "value",
                a.offset,
                a.size,
                a.addrmode,
                a.addrspace,
                a.access_type,
            )
            for i, a in k.explicit_args().items()
        ]
        header = ["arg", "kind", "offset", "size", "addrmode", "addrspace", "access"]
        print(_indent(_table(header, rows)))
        if isa is not None:
            print(f"--- ISA of {k.name} for {isa.device} ({isa.tool}) ---")
            print(isa.kernels[k.name].rstrip())
    return 0


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
