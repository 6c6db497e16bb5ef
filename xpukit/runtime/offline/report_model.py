"""The kernel report as typed records: what the compile fills in, the line join adds to, every format
reads and the watch compares.

One record per noun (a report, a row, a line, its counts, spills, occupancy, the kernel's source,
a config) and one codec: ``to_dict`` writes the JSON the kit prints and stores, ``from_dict`` reads
it back and checks every field against the record's type hints, so a stored report that does not
fit is a ``ReportSchemaError`` (the host's cache treats it as a miss), never a ``KeyError`` deep in
a formatter. A new column is a field on its record: the codec, the cache check and the JSON follow.
The JSON carries ``schema``; a report of another schema is refused as a whole.

``ReportOptions`` is the one record of what a user asks a report for: it gives the in-image
command line (``argv``), the stored report's cache key (``key_fields``) and the in-image parser
(``add_arguments`` / ``from_args``), so the three never disagree on a flag.

Plain Python (no Triton): the host reads stored reports with it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import types
import typing
from typing import Any, TypeVar

from xpukit.errors import XpukitError
from xpukit.runtime.offline.counts import IsaCounts
from xpukit.runtime.offline.specialization import Specialization

SCHEMA = 1  # kernel-report JSON: bump when a field changes meaning or a required one is added


class ReportSchemaError(XpukitError):
    """A report's JSON does not fit the records (damaged, or written by another kit version)."""


# --------------------------------------------------------------------------- the codec

T = TypeVar("T")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fail(where: str, expected: str, value: Any) -> ReportSchemaError:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return ReportSchemaError(
        f"report field {where or '(top)'}: expected {expected}, found {shown}",
        "compile the report again (the stored one is from another kit version or damaged)",
    )


def _decode(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        last: ReportSchemaError | None = None
        for option in options:
            if option is type(None):
                continue
            try:
                return _decode(option, value, where)
            except ReportSchemaError as exc:
                last = exc
        raise last or _fail(where, str(tp), value)
    if origin is list or origin is tuple:
        if not isinstance(value, list | tuple):
            raise _fail(where, "a list", value)
        args = typing.get_args(tp)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise _fail(where, f"{len(args)} items", value)
            return tuple(_decode(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
        item = args[0] if args else Any
        items = [_decode(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise _fail(where, "an object", value)
        _, item = typing.get_args(tp) or (str, Any)
        return {k: _decode(item, v, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return from_dict(tp, value, where)
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                return float(value)
            except OverflowError:  # an integer beyond a float's range: no count or share is that large
                raise _fail(where, "a number", value) from None
        raise _fail(where, "a number", value)
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _fail(where, "an integer", value)
    if tp in (str, bool):
        if isinstance(value, tp):
            return value
        raise _fail(where, tp.__name__, value)
    raise TypeError(f"report_model cannot decode {tp!r} at {where}")  # a record's own type: the kit's bug


def from_dict(cls: type[T], data: Any, where: str = "") -> T:
    """``cls`` from its JSON form, every field checked against ``cls``'s type hints; keys the record
    does not have (derived ones, such as counts' ``send_total``) are ignored. A record whose fields
    must also agree with each other says how in a ``shape_problem()`` method (what every format
    reads without checking: each send kind's count, a table's rows as long as its headings)."""
    if not isinstance(data, dict):
        raise _fail(where, f"an object ({cls.__name__})", data)
    hints = _hints(cls)  # type: ignore[arg-type]  # a record class: hashable
    values = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = field.name
        if name in data:
            values[name] = _decode(hints[name], data[name], f"{where}.{name}" if where else name)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise _fail(f"{where}.{name}" if where else name, "a value", "nothing")
    record = cls(**values)
    check = getattr(record, "shape_problem", None)
    problem = check() if check is not None else None
    if problem:
        raise ReportSchemaError(
            f"report field {where or '(top)'}: {problem}",
            "compile the report again (the stored one is from another kit version or damaged)",
        )
    return record


def to_json(value: Any) -> Any:
    """A record (or a list, dict or scalar of them) in its JSON form."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        if to_dict is not None:
            return to_dict()
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


class Record:
    """``to_dict``/``from_dict`` for a dataclass record."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: to_json(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls: type[T], data: Any) -> T:
        return from_dict(cls, data)


# --------------------------------------------------------------------------- the records


@dataclasses.dataclass
class Spills(Record):
    bytes_per_thread: int  # the zebin's per-thread scratch space
    n_spills: int  # upstream's unit (#7950): bytes / (4 x sub-group size), truncated
    rule: str = ""  # the GRF retry rule the compile followed


@dataclasses.dataclass
class WhatIfStep(Record):
    """The nearest change along one axis that changes the row's occupancy."""

    change: str  # "slm_bytes" or "num_warps"
    to: int
    work_groups_per_xe_core: int
    occupancy_pct: float
    limited_by: str


@dataclasses.dataclass
class WhatIf(Record):
    """Work-groups per Xe core across num_warps (rows) and SLM per work-group (columns), the row's
    SIMD, GRF and barriers held (``xpukit.targets.occupancy_what_if``): Intel's calculator's table."""

    simd: int
    grf: int
    barriers: int
    num_warps: list[int]
    slm_bytes: list[int]
    work_groups_per_xe_core: list[list[int]]
    occupancy_pct: list[list[float]]
    limited_by: list[list[str]]
    row: dict[str, int] | None = None  # the row's own cell: num_warps, slm_bytes
    next: list[WhatIfStep] = dataclasses.field(default_factory=list)
    assumes: str = ""

    def shape_problem(self) -> str | None:
        """Each table one row per num_warps and one column per SLM size, as the formats read them."""
        for name in ("work_groups_per_xe_core", "occupancy_pct", "limited_by"):
            table: list[list[Any]] = getattr(self, name)
            if len(table) != len(self.num_warps) or any(len(row) != len(self.slm_bytes) for row in table):
                return f"{name} is not {len(self.num_warps)} x {len(self.slm_bytes)} (num_warps x slm_bytes)"
        return None


@dataclasses.dataclass
class Calculator(Record):
    """Where Intel's GPU Occupancy Calculator shows the family: its entry, or its page pre-filled."""

    url: str
    entry: str | None = None
    prefilled: bool = False


@dataclasses.dataclass
class NRegs(Record):
    """Xe3/Xe3P: the zebin's GRF count beside the n_regs upstream's launcher reports (IXB #7416)."""

    grf_count: int
    upstream_n_regs: int | None
    differs: bool
    why: str = ""


@dataclasses.dataclass
class Occupancy(Record):
    """Static occupancy on one Xe core (``xpukit.targets.occupancy``)."""

    threads_per_xve: float  # resident, on average
    threads_per_xve_max: int  # at this GRF count
    work_groups_per_xe_core: int
    limited_by: str
    cannot_launch: str | None = None  # why 0 work-groups fit
    figures: list[str] = dataclasses.field(default_factory=list)  # the figures used where sources disagree
    occupancy_pct: float | None = None  # resident threads of the Xe core's thread slots
    what_if: WhatIf | None = None
    calculator: Calculator | None = None
    n_regs: NRegs | None = None


@dataclasses.dataclass
class LineLive(Record):
    """Live GRF bytes on one line (the kit's liveness over IGA's def/use ranges, ``liveness.py``)."""

    peak_bytes: int  # the most live before any of the line's instructions
    bytes: list[int] = dataclasses.field(default_factory=list)  # before each of the line's ``asm``, in order


@dataclasses.dataclass
class Line(Record):
    """One source line's share of a row: its counts and its instructions in program order."""

    file: str | None
    line: int | None
    source: str
    counts: IsaCounts
    asm: list[tuple[int, str]]  # (pc, instruction)
    via: list[str] = dataclasses.field(default_factory=list)  # Triton's own lines folded in (``standard.py:286``)
    live: LineLive | None = None
    in_loop: IsaCounts | None = None  # the part of ``counts`` inside a loop (runs every iteration)
    loop_depth: list[int] = dataclasses.field(default_factory=list)  # per ``asm`` entry: 0 outside every loop
    stalls: dict[str, int] = dataclasses.field(default_factory=dict)  # static stall sources by kind (stalls.py)
    delta: IsaCounts | None = None  # this minus the baseline's line of the same text (--baseline-*)
    live_delta: int | None = None  # peak live bytes, this minus the baseline's


@dataclasses.dataclass
class RowLive(Record):
    """Where the row's register pressure peaks, and whose values are live there."""

    peak_bytes: int
    peak_pc: int
    peak_line: int | None  # the kernel file's line of the peak's instruction (None: no line)
    live_from_lines: list[int]  # the lines whose writes are live at the peak, most bytes first
    grf_bytes: int  # the GRF file's size at the row's GRF count: what the peak is measured against
    exact: bool = True  # False where IGA's own analysis is known to differ (liveness.py)


@dataclasses.dataclass
class LoopSpan(Record):
    """A loop in program order (natural loop of a back edge): for the ISA view."""

    start_pc: int
    end_pc: int
    header_pc: int
    depth: int


@dataclasses.dataclass
class Baseline(Record):
    """The compile a row is compared with (--baseline-config / --baseline-target)."""

    target: str
    config: str
    counts: IsaCounts | None
    live: RowLive | None = None
    error: str | None = None


@dataclasses.dataclass
class KernelSource(Record):
    """The kernel's own lines as compiled (the file's bytes read before the import)."""

    file: str
    sha256: str
    first: int
    lines: list[str]


@dataclasses.dataclass(frozen=True)
class KernelConfig(Record):
    label: str
    constexprs: dict[str, Any]
    options: dict[str, Any]  # num_warps, num_stages, grf_mode
    specialization: Specialization | None = None  # None: the signature's (declared hints or the default)
    signature: dict[str, str] | None = None  # a launch's own argument types (None: the given signature)


@dataclasses.dataclass
class Row(Record):
    """One target x config cell."""

    target: str
    config: str
    error: str | None = None
    simd: int | None = None
    grf: int | None = None
    grf_mode: str = "default"  # as requested (triton's grf_mode option)
    grf_retry: bool = False  # ocloc was rerun with -cl-intel-256-GRF-per-thread after spills
    sub_group: int | None = None  # threads_per_warp
    work_group: int | None = None  # num_warps x threads_per_warp work-items
    scratch_bytes: int | None = None  # per-thread scratch space (the zebin's), not spill traffic
    private_bytes: int | None = None
    slm_bytes: int | None = None  # per work-group
    build_flags: str = ""
    counts: IsaCounts | None = None
    # the target limits this row exceeds; None: a device without the kit's figures (not checked)
    limits: list[str] | None = dataclasses.field(default_factory=list)
    grf_rule: str = ""  # which GRF rule decided the row's GRF count
    spills: Spills | None = None
    occupancy: Occupancy | None = None
    lines: list[Line] | None = None  # with --lines: per source line
    line_info: str = ""  # why a --lines row has no lines ("no line information")
    specialization: Specialization | None = None  # what the compile knew of the arguments
    warnings: list[str] = dataclasses.field(default_factory=list)  # what the row's code suggests is off
    live: RowLive | None = None  # with --lines: the register pressure peak
    stalls: dict[str, int] | None = None  # with --lines: static stall sources by kind, the lines' sum
    loops: list[LoopSpan] = dataclasses.field(default_factory=list)  # with --lines
    labels: list[tuple[int, str]] = dataclasses.field(default_factory=list)  # with --lines: (pc, ISA label)
    flow_info: str = ""  # why a --lines row has no live registers, loops or stalls
    baseline: Baseline | None = None  # with --baseline-*: what the deltas are against

    @property
    def ok(self) -> bool:
        """Compiled and counted (an error row has no counts)."""
        return self.counts is not None


@dataclasses.dataclass
class Report(Record):
    kernel: str
    source: str  # the kernel's file
    ocloc: str  # the compiler that built every row
    targets: list[str]
    configs: list[KernelConfig]
    rows: list[Row]
    kernel_source: KernelSource | None = None
    lines: bool = False  # rows carry per-line counts
    source_changed: bool = False  # the file was saved during the compile: lines show the text compiled
    stored_at: str | None = None  # the host's cache: when it was stored
    schema: int = SCHEMA

    @classmethod
    def from_dict(cls, data: Any) -> Report:
        if isinstance(data, dict) and data.get("schema") != SCHEMA:
            raise ReportSchemaError(
                f"a kernel report of schema {data.get('schema')!r}; this kit reads schema {SCHEMA}",
                "compile the report again with this kit",
            )
        return from_dict(cls, data)

    def row(self, target: str, config: str) -> Row | None:
        return next((r for r in self.rows if r.target == target and r.config == config), None)

    @property
    def failed(self) -> list[Row]:
        return [r for r in self.rows if r.error]


# --------------------------------------------------------------------------- what a user asks for


def _option(flag: str, help: str, repeat: bool = False) -> Any:
    return dataclasses.field(default=() if repeat else None, metadata={"flag": flag, "help": help, "repeat": repeat})


@dataclasses.dataclass(frozen=True)
class ReportOptions:
    """What a report is asked for: the kernel and every option that changes what it compiles.
    Output choices (format, --save, --watch, --diff) are not here: they do not change the report."""

    kernel: str  # path.py:function (as the side that runs it sees the path)
    targets: tuple[str, ...] = _option("--target", "target(s), comma-separated or repeated", repeat=True)
    configs: tuple[str, ...] = _option("--config", "NAME=VALUE,... (constexprs, num_warps, ...); repeatable", True)
    signature: str | None = _option("--signature", "e.g. 'x_ptr:*fp16:16,n:i32:16' (Triton's AOT hints)")
    constexprs: tuple[str, ...] = _option("--constexpr", "NAME=VALUE for every config; repeatable", repeat=True)
    lines: bool = dataclasses.field(
        default=False, metadata={"flag": "--lines", "help": "also count per source line", "switch": True}
    )
    launched_by: str | None = _option("--launched-by", "SCRIPT.py: report the kernel as this script launches it")
    script_args: str | None = _option("--script-args", "--launched-by: the script's arguments, one string")
    baseline_config: str | None = _option("--baseline-config", "NAME=VALUE,...: compare every row with this config")
    baseline_target: str | None = _option("--baseline-target", "FAMILY: compare every row with this family's")

    def argv(self) -> list[str]:
        """The in-image command line (``python -m xpukit kernel-report ...``) for these options."""
        args = ["kernel-report", self.kernel]
        for field in dataclasses.fields(self):
            flag, value = field.metadata.get("flag"), getattr(self, field.name)
            if flag is None or value in (None, (), False, ""):
                continue
            if field.metadata.get("switch"):
                args.append(flag)
            elif field.metadata.get("repeat"):
                values = [",".join(value)] if field.name == "targets" else list(value)
                for item in values:
                    args += [flag, item]
            else:
                args += [flag, str(value)]
        return args

    def key_fields(self) -> dict[str, Any]:
        """What the report cache keys on besides the kernel's file and the toolchain. A script's
        launches are not in it: a ``--launched-by`` report is never stored."""
        return {
            "targets": list(self.targets),
            "configs": list(self.configs),
            "signature": self.signature,
            "constexprs": list(self.constexprs),
            "lines": self.lines,
            "baseline_config": self.baseline_config,
            "baseline_target": self.baseline_target,
        }

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """The in-image parser's arguments, one per field."""
        parser.add_argument("kernel", help="path.py:function")
        for field in dataclasses.fields(cls):
            meta = field.metadata
            if "flag" not in meta:
                continue
            if meta.get("switch"):
                parser.add_argument(meta["flag"], dest=field.name, action="store_true", help=meta["help"])
            elif meta.get("repeat"):
                parser.add_argument(meta["flag"], dest=field.name, action="append", default=[], help=meta["help"])
            else:
                parser.add_argument(meta["flag"], dest=field.name, default=None, help=meta["help"])

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReportOptions:
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            value = getattr(args, field.name)
            values[field.name] = tuple(value) if isinstance(value, list) else value
        return cls(**values)
