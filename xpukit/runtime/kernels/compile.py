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
import heapq
import importlib.util
import json
import linecache
import os
import sys
import sysconfig
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from xpukit.errors import UsageError, XpukitError
from xpukit.layout import REPO_ROOT
from xpukit.runtime.kernels.staging import staged_output
from xpukit.runtime.offline.isa import count_isa, disassemble
from xpukit.runtime.offline.ocloc import (
    CompileResult,
    Ocloc,
    builds_may_run,
    find_ocloc,
    stop_builds,
)
from xpukit.runtime.offline.specialization import for_signature
from xpukit.runtime.offline.zebin import (
    ZebinError,
    check_layout,
    read_zebin,
)
from xpukit.runtime.triton.tritonc import compile_kernel
from xpukit.targets import FAMILIES, TargetPreset, split_targets

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


@dataclasses.dataclass
class TargetBuild:
    """One target's SPIR-V (shared with the targets of the same codegen properties) and zebin."""

    target: str
    preset: TargetPreset
    compiled: Any  # Triton's CompiledKernel of the SPIR-V (compiled for ``spirv_from``)
    spirv_from: str  # the target whose properties Triton compiled the SPIR-V with
    ocloc: CompileResult | None = None
    isa: str | None = None
    error: BaseException | None = None
    reused: bool = False  # zebin and ISA from NATIVE_MEMORY: the same SPIR-V, device and flags built before

    @property
    def zebin(self) -> bytes:
        assert self.ocloc is not None
        return self.ocloc.zebin


@dataclasses.dataclass
class _Outcome:
    retried: bool  # the build retried at 256 GRF (the pinned rule: it spilled at 128)
    seconds: float  # ocloc and disasm, wall time


class NativeMemory:
    """What earlier ocloc builds in this process learnt; ``--watch`` rebuilds in one process.

    ``results``: zebin and ISA by SPIR-V hash + device + flags, so a family whose SPIR-V did not change
    (a save that undoes the last edit, a target of an unchanged config) is not compiled again.
    ``history``: per kernel x config x target, whether its last build retried at 256 GRF (the next
    build then starts the 256-GRF compile at once, ``Ocloc.compile_spirv(speculate_large=True)``) and
    how long it took (the longest builds start first). ``counts``: built / reused / speculation used
    or discarded, for the watch's log line."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self.results: OrderedDict[tuple[Any, ...], tuple[CompileResult, str | None]] = OrderedDict()
        self.history: dict[tuple[Any, ...], _Outcome] = {}
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> tuple[CompileResult, str | None] | None:
        with self.lock:
            found = self.results.get(key)
            if found is not None:
                self.results.move_to_end(key)
            return found

    def put(self, key: tuple[Any, ...], value: tuple[CompileResult, str | None]) -> None:
        with self.lock:
            self.results[key] = value
            while len(self.results) > self.size:
                self.results.popitem(last=False)

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1


NATIVE_MEMORY = NativeMemory()


def resolve_targets(tool: Ocloc, targets: Sequence[str]) -> dict[str, TargetPreset]:
    """Target names (``all`` = every family this ocloc builds) -> their presets, checked before any
    compile: a name ocloc does not know fails here."""
    names = list(targets)
    if names == ["all"]:
        tool.require_current()
        names = [f.name for f in FAMILIES if tool.supports(f.ocloc_device)]
    return {t: tool.target_preset(t) for t in names}


def build_targets(
    fn: Any,
    signature: Mapping[str, str],
    constexprs: Mapping[str, Any],
    presets: Mapping[str, TargetPreset],
    options: Mapping[str, Any],
    tool: Ocloc,
    asm: bool = False,
    memory: NativeMemory | None = None,
    divisible: Sequence[str] = (),
    on_built: Callable[[TargetBuild], None] | None = None,
) -> list[TargetBuild]:
    """Triton -> SPIR-V once per distinct set of codegen properties (``TargetPreset.codegen_key``),
    then ocloc (and ``ocloc disasm`` with ``asm``) per target, as many at once as there are cores.
    ocloc starts on a group's SPIR-V while Triton compiles the next group's; the groups and targets
    whose builds took longest last time go first. A target that failed carries its exception in
    ``error``; the others are still built. The builds are the ones a serial run gives (a test).
    ``memory``: what earlier builds learnt (default: this process's ``NATIVE_MEMORY``); ``divisible``:
    the arguments compiled with ``tt.divisibility = 16`` (``specialization.Specialization``);
    ``on_built``: called with each target's build as soon as its ocloc is done, one build at a time
    in a thread of its own (what a report does with a zebin overlaps the builds still running)."""
    known = memory if memory is not None else NATIVE_MEMORY
    workers = max(1, min(len(presets), os.cpu_count() or 1))
    groups: dict[tuple[Any, ...], list[str]] = {}
    for target, preset in presets.items():
        groups.setdefault(preset.codegen_key(), []).append(target)
    spirv_options = {k: v for k, v in options.items() if k != "generate_native_code"}
    config_key = (
        f"{getattr(fn, '__module__', '')}.{getattr(fn, '__name__', fn)}",
        repr(sorted(constexprs.items())),
        repr(sorted(spirv_options.items())),
        repr(sorted(divisible)),
    )

    def history_key(build: TargetBuild) -> tuple[Any, ...]:
        return (*config_key, build.preset.ocloc_device)

    def expected_seconds(target: str) -> float:
        last = known.history.get((*config_key, presets[target].ocloc_device))
        return last.seconds if last is not None else 0.0

    def native(build: TargetBuild) -> None:
        if build.error is not None:
            return
        started = time.monotonic()
        try:
            flags = build.compiled.metadata.build_flags or ""
            spirv = build.compiled.asm["spv"]
            device = build.preset.ocloc_device
            name = build.compiled.metadata.name
            key = (tool.path, tool.version, hashlib.sha256(spirv).hexdigest(), device, flags, asm, name)
            if (found := known.get(key)) is not None:
                build.ocloc, build.isa = found
                build.reused = True
                known.count("reused")
                return
            last = known.history.get(history_key(build))
            build.ocloc = tool.compile_spirv(spirv, device, flags, speculate_large=last is not None and last.retried)
            if asm:
                build.isa = disassemble(build.ocloc.zebin, device, ocloc=tool).kernels[name]
            known.put(key, (build.ocloc, build.isa))
            known.count("built")
            if build.ocloc.speculation:
                known.count(f"speculation {build.ocloc.speculation}")
            known.history[history_key(build)] = _Outcome(build.ocloc.retried_large_grf, time.monotonic() - started)
        except XpukitError as exc:
            build.error = exc

    # What ``on_built`` does with a zebin (Python, holding the GIL) runs in one thread of its own, so
    # a worker starts its next ocloc at once: two workers analysing at the same time would share the
    # GIL while no ocloc runs on either core.
    rows = ThreadPoolExecutor(max_workers=1) if on_built is not None and workers > 1 else None
    analysed: list[Future[None]] = []

    def native_then(build: TargetBuild) -> None:
        native(build)
        if rows is not None and on_built is not None:
            analysed.append(rows.submit(on_built, build))
        elif on_built is not None:
            on_built(build)

    # Every pool task builds whichever waiting target took longest last time, so the workers go
    # longest first across groups: a group's short builds, queued first, do not hold back the long
    # build of a group whose SPIR-V came later (it would otherwise run last, alone on one core).
    waiting: list[tuple[float, int, TargetBuild]] = []
    waiting_lock = threading.Lock()

    def build_longest_waiting() -> None:
        with waiting_lock:
            build = heapq.heappop(waiting)[2]
        native_then(build)

    ordered = sorted(groups.values(), key=lambda g: -sum(expected_seconds(t) for t in g))  # stable
    builds_may_run()  # an earlier run in this process may have been interrupted
    pool = ThreadPoolExecutor(max_workers=workers) if workers > 1 else None
    builds: list[TargetBuild] = []
    futures: list[Future[None]] = []
    try:
        for group in ordered:
            first = group[0]
            try:
                compiled = compile_kernel(fn, signature, constexprs, presets[first].props(), spirv_options, divisible)
            except BaseException as exc:  # Triton raises anything: each target of the group records it
                if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                    raise
                builds += [TargetBuild(t, presets[t], None, first, error=exc) for t in group]
                continue
            ready = [TargetBuild(t, presets[t], compiled, first) for t in group]
            builds += ready
            for build in sorted(ready, key=lambda b: -expected_seconds(b.target)):
                if pool is None:  # in this thread: Ctrl-C stops the build where it runs
                    native_then(build)
                else:
                    with waiting_lock:
                        heapq.heappush(waiting, (-expected_seconds(build.target), len(futures), build))
                    futures.append(pool.submit(build_longest_waiting))
        for future in futures:
            future.result()
        for future in analysed:  # every build is done: nothing appends to it any more
            future.result()
    except BaseException:
        stop_builds()  # an interrupt reaches this thread only: kill the workers' ocloc runs
        if rows is not None:
            rows.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
        if rows is not None:
            rows.shutdown(wait=True)
    order = {t: i for i, t in enumerate(presets)}
    builds.sort(key=lambda b: order[b.target])  # the order the user gave
    return builds


def shared_spirv_note(builds: Sequence[TargetBuild]) -> str:
    """One line saying which targets shared one SPIR-V ("" when every target had its own)."""
    shared: dict[str, list[str]] = {}
    for b in builds:
        shared.setdefault(b.spirv_from, []).append(b.target)
    if len(shared) == len(builds):
        return ""
    groups = "; ".join(", ".join(ts) for ts in shared.values())
    return f"SPIR-V compiled {len(shared)} time(s) for {len(builds)} targets (same code for: {groups})"


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    fn: Any
    name: str
    path: Path
    signature: str | None
    constexprs: dict[str, Any]
    snapshot: bytes = b""  # the file's bytes the kernel was imported (and is compiled) from
    imported_at: float = 0.0  # time.time() before that read: a file saved after it is not what compiled

    @property
    def snapshot_sha256(self) -> str:
        return hashlib.sha256(self.snapshot).hexdigest()

    def changed_since_import(self) -> bool:
        """The file on disk is not the text that was compiled (saved meanwhile, or deleted)."""
        try:
            return self.path.read_bytes() != self.snapshot
        except OSError:
            return True


_SNAPSHOT = "__xpukit_snapshot__"  # the module attribute holding the bytes it was executed from
_IMPORTED_AT = "__xpukit_imported_at__"  # and the time before they were read
_USER_MODULES = "__xpukit_user_modules__"  # {module name: file} of the user's modules its import imported


def _user_modules(names: Collection[str]) -> dict[str, str]:
    """Of the modules ``names``, those that are the user's own files: not the standard library, an
    installed package or the kit (a fresh import reads these again; a watch follows their saves)."""
    paths = sysconfig.get_paths()
    libraries = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    libraries |= {str(REPO_ROOT / "xpukit")}  # the kit's own package
    roots = tuple(str(Path(p).resolve()) + os.sep for p in libraries)
    found = {}
    for name in names:
        where = getattr(sys.modules.get(name), "__file__", None)
        if where and where.endswith(".py") and not str(Path(where).resolve()).startswith(roots):
            found[name] = str(Path(where).resolve())
    return found


def jit_function(fn: Any) -> Any:
    """The JITFunction under ``triton.autotune`` / ``triton.heuristics`` wrappers: what compiles, and
    whose ``params`` say which arguments a launch does not specialize."""
    while not hasattr(fn, "src") and hasattr(fn, "fn"):
        fn = fn.fn
    return fn


def load_kernel(spec: str, *, fresh: bool = False) -> KernelSpec:
    """Import ``path.py:function`` and return the function with any declared signature/constexprs.
    ``fresh``: import the file again (it changed since the last import)."""
    file_part, sep, func_name = spec.rpartition(":")
    if not sep or not file_part or not func_name:
        raise XpukitError(f"malformed kernel {spec!r}", "write path/to/file.py:kernel_name")
    path = Path(file_part).expanduser().resolve()
    if not path.is_file():
        raise XpukitError(f"kernel file {file_part} not found", "give the path to a .py file")
    module_name = _module_name(path)
    if fresh:  # the kernel's file and the user's modules it imported, all read again
        old = sys.modules.pop(module_name, None)
        for name in getattr(old, _USER_MODULES, {}):
            sys.modules.pop(name, None)
    module = sys.modules.get(module_name)
    if module is None:
        module = _import_snapshot(module_name, path)
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
    return KernelSpec(
        fn, func_name, path, declared.get("signature"), dict(constexprs),
        getattr(module, _SNAPSHOT, b""), getattr(module, _IMPORTED_AT, 0.0),
    )  # fmt: skip


def _module_name(path: Path) -> str:
    return f"xpukit_kernels_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"


def imported_user_files(kernel_file: Path) -> tuple[Path, ...]:
    """The user's modules the kernel file's last import imported; () when it is not imported (its
    import failed): nothing is imported here."""
    module = sys.modules.get(_module_name(kernel_file.expanduser().resolve()))
    return tuple(Path(f) for f in getattr(module, _USER_MODULES, {}).values())


def _import_snapshot(module_name: str, path: Path) -> Any:
    """Import ``path`` from one read of its bytes, kept on the module: Triton reads a kernel's source
    through linecache, which is primed with the same bytes, so the code compiled, the text the report
    shows and the hash it stores are one version of the file even when an editor saves meanwhile."""
    imported_at = time.time()  # before the read: the helpers it imports are read after it too
    try:
        snapshot = path.read_bytes()
    except OSError as exc:
        raise XpukitError(
            f"cannot read {path}: {exc.strerror or exc}", "give the path to a readable .py file"
        ) from None
    import_spec = importlib.util.spec_from_file_location(module_name, path)
    if import_spec is None or import_spec.loader is None:
        raise XpukitError(f"cannot import {path}", "give a Python source file")
    module = importlib.util.module_from_spec(import_spec)
    setattr(module, _SNAPSHOT, snapshot)
    setattr(module, _IMPORTED_AT, imported_at)
    text = snapshot.decode(errors="replace")
    # mtime None: linecache.checkcache keeps the entry instead of rereading the file from disk
    linecache.cache[str(path)] = (len(snapshot), None, text.splitlines(keepends=True), str(path))
    sys.modules[module_name] = module
    before = set(sys.modules)
    try:
        exec(compile(snapshot, str(path), "exec", dont_inherit=True), module.__dict__)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise XpukitError(f"importing {path} failed: {type(exc).__name__}: {exc}", "fix the kernel file") from None
    setattr(module, _USER_MODULES, _user_modules(set(sys.modules) - before))
    return module


def parse_constexprs(items: Sequence[str], words: Collection[str] = ()) -> dict[str, Any]:
    """``["BLOCK=1024", "ACT='relu'"]`` -> ``{"BLOCK": 1024, "ACT": "relu"}`` (Python literals).
    ``words``: names whose value may also be a bare word (``grf_mode=large``): options Triton takes as
    strings, not constexprs, which nobody quotes on a command line."""
    result: dict[str, Any] = {}
    for item in items:
        for part in filter(None, (p.strip() for p in item.split(","))):
            name, sep, text = (s.strip() for s in part.partition("="))
            if not sep or not name.isidentifier() or not text:
                raise XpukitError(f"malformed constexpr {part!r}", "write NAME=VALUE, e.g. BLOCK=1024")
            try:
                result[name] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                if name in words and text.isidentifier():
                    result[name] = text
                    continue
                raise XpukitError(
                    f"constexpr {name} value {text!r} is not a Python literal",
                    "use a number, True/False or a quoted string",
                ) from None
    return result


def _json_default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def writable_out_dir(out_dir: Path) -> Path:
    """--out as a folder this user can write into or make: checked before any compile, and made
    only when every target's files are written (:func:`staged_output`: a failed compile leaves
    nothing behind)."""
    out_dir = Path(out_dir)
    existing = out_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    problem = None
    if existing.exists() and not existing.is_dir():
        problem = f"{existing} is not a folder"
    elif not os.access(existing, os.W_OK | os.X_OK):
        problem = "read-only file system" if _read_only_fs(existing) else "permission denied"
    if problem:
        raise UsageError(f"--out {out_dir}: {problem}", "choose a folder you can write to")
    return out_dir


def _read_only_fs(path: Path) -> bool:
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)


def run_compile(
    kernel: str,
    targets: list[str],
    out_dir: Path,
    signature: str | None,
    constexprs: list[str],
    num_warps: int | None = None,
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
    jit = jit_function(spec.fn)  # as kernel-report compiles it: the same variant
    sig, special = for_signature(sig_text, getattr(jit, "params", ()))
    cex = {**spec.constexprs, **parse_constexprs(constexprs), **special.constants()}
    for name in list(cex):
        sig.pop(name, None)  # a constexpr given on the command line overrides a declared type
    full_signature = {n: ("constexpr" if n in cex else sig.get(n, "?")) for n in jit.arg_names}
    tool = find_ocloc()
    presets = resolve_targets(tool, split_targets(targets))  # fail before compiling anything
    options: dict[str, Any] = {}
    if num_warps is not None:
        # invoke hands untyped options over as strings
        try:
            options["num_warps"] = int(num_warps)
        except ValueError:
            raise XpukitError(f"num_warps {num_warps!r} is not an integer", "pass e.g. --num-warps 4") from None

    out_dir = writable_out_dir(out_dir)
    divisible = [n for n in special.divisibility if n not in cex]
    builds = build_targets(jit, sig, cex, presets, options, tool, asm, divisible=divisible)
    for build in builds:  # every target built, or nothing is written
        if build.error is None:
            continue
        if isinstance(build.error, XpukitError):
            raise build.error
        # Triton's own reason in one line; the whole text stays chained for --debug.
        raise KernelCompileError(
            f"{spec.name} failed to compile for {build.target}: {root_cause(build.error)[:120]}",
            "fix the kernel or its signature/constexprs (--debug shows Triton's full message)",
        ) from build.error
    rows = []
    status = 0
    with staged_output(out_dir) as stage:  # moved into out_dir only once every target's files are written
        for build in builds:
            row, layout_error = _write_target(stage, build, spec, full_signature, cex, special, tool)
            rows.append(row)
            if layout_error:
                status = 1
                print(f"{build.target}: {layout_error}", file=sys.stderr)

    exts = "spv,zebin,json" + (",isa" if asm else "")
    print(f"{spec.name} -> {out_dir}/<target>/{spec.name}.{{{exts}}}  ({tool.describe()})")
    if note := shared_spirv_note(builds):
        print(note)
    # scratch B/thr is the zebin's per-thread spill space; spill traffic (sends) needs the ISA (--asm).
    header = ["target", "size B", "SIMD", "GRF", "scratch B/thr"]
    print(text_table(header + (["instr", "spill st/ld", "DPAS", "FMA"] if asm else []), rows))
    print(f"specialization {special.describe()}")
    return status


def _write_target(
    stage: Path, build: TargetBuild, spec: KernelSpec, full_signature: dict[str, str],
    cex: dict[str, Any], special: Any, tool: Ocloc,
) -> tuple[list[Any], str | None]:  # fmt: skip
    """One target's .spv, .zebin, .isa and .json in ``stage/<target>/``; its table row and its layout
    error (the payload disagrees with the signature: the files are written all the same, exit 1)."""
    target = build.target
    compiled = build.compiled
    zebin_bytes = build.zebin
    info = read_zebin(zebin_bytes).kernel(compiled.metadata.name)
    try:
        layout = [dataclasses.asdict(s) for s in check_layout(info, full_signature)]
        layout_error = None
    except ZebinError as exc:
        layout, layout_error = [], exc.one_line()
    target_dir = stage / target
    target_dir.mkdir()  # a private folder: the files need no write_whole until they move out of it
    (target_dir / f"{spec.name}.spv").write_bytes(compiled.asm["spv"])
    (target_dir / f"{spec.name}.zebin").write_bytes(zebin_bytes)
    counts = None
    if build.isa is not None:  # <kernel>.isa next to the zebin (ocloc disasm through IGA)
        (target_dir / f"{spec.name}.isa").write_bytes(build.isa.encode())
        counts = count_isa(build.isa)
    meta = compiled.metadata._asdict()
    meta["target"] = build.preset.props()  # the SPIR-V may come from a target of the same codegen
    meta["build_flags"] = build.ocloc.build_flags if build.ocloc else meta.get("build_flags")
    meta["binary_ext"] = "zebin"  # as Triton's zebin stage records it
    record = {
        "kernel": spec.name,
        "source": str(spec.path),
        "target": target,
        "signature": full_signature,
        "constexprs": cex,
        "specialization": special.to_dict(),
        "ocloc": {"path": tool.path, "version": tool.version, "device": build.preset.ocloc_device},
        "spirv_from": build.spirv_from,
        "zebin": {k: v for k, v in dataclasses.asdict(info).items() if k != "payload_args"},
        "arguments": layout,
        "layout_error": layout_error,
        "launch": {"local_size": [meta["num_warps"] * meta["threads_per_warp"], 1, 1]},
        "metadata": meta,
    }
    text = json.dumps(record, indent=2, default=_json_default)
    (target_dir / f"{spec.name}.json").write_bytes((text + "\n").encode())
    row: list[Any] = [target, len(zebin_bytes), info.simd_size, info.grf_count, info.spill_size]
    if counts is not None:
        spills = f"{counts.sends['scratch_spill']}/{counts.sends['scratch_fill']}"
        row += [counts.instructions, spills, counts.dpas, counts.fma]
    return row, layout_error


def text_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [list(map(str, header))] + [["-" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)
