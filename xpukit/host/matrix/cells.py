"""`invoke matrix`: the cells of env/matrix.toml, each run as one shell script that runs the image
by its exact ID, writes its log and its own result file; the run ends with one table.

A run lives in ``<out-dir>/<run-id>/``: ``cells.json`` (what was asked), ``cells/<cell>/run.sh``
(the exact commands), ``cells/<cell>/log`` and ``cells/<cell>/result.json``. A cell counts as
passed only when its result file says so: a task that was cancelled or whose node died has none.
The schedulers (xpukit/host/matrix/schedule.py) only decide where the scripts run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import shlex
import time
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from xpukit import layout
from xpukit.errors import XpukitError
from xpukit.host.versions import pins as pins_mod
from xpukit.targets import preset, split_targets

MATRIX_FILE = layout.REPO_ROOT / "env" / "matrix.toml"
DEFAULT_OUT = layout.REPO_ROOT / ".xpukit" / "matrix"
AXES = ("ur", "target", "triton", "suite")
PINNED = "pinned"
DEFAULT_TRITON = "default"
RESULTS = "/results"  # the cell's own folder, mounted read-write in the container

# Built-in suites: the command in the image ({src}: the kit's source there) and the axes it varies over.
BUILTIN_SUITES: dict[str, dict[str, Any]] = {
    "demo": {"command": ["python", "{src}/examples/xpu_triton_ur.py"], "axes": ["ur", "triton"]},
    "compile": {
        "command": [
            "python", "-m", "xpukit", "compile", "{src}/examples/kernels.py:scale_kernel",
            "--target", "{target}", "--out", f"{RESULTS}/zebin",
        ],
        "axes": ["target", "triton"],
    },
    "kernel-report": {
        "command": [
            "python", "-m", "xpukit", "kernel-report", "{src}/examples/kernels.py:scale_kernel",
            "--target", "{target}", "--format", "md",
        ],
        "axes": ["target", "triton"],
    },
    "container-tests": {
        "command": [
            "python", "-m", "pytest", "-m", "container or gpu", "-p", "no:cacheprovider", "-q",
            "--rootdir", "{src}", f"--junitxml={RESULTS}/junit.xml", "{src}/tests",
        ],
        "axes": ["ur", "triton"],
    },
    "bench-launch": {  # pyopencl is not in the image: pip puts it beside it, as docs/benchmarks/launch.md says
        "command": [
            "bash", "-c",
            "export XDG_CACHE_HOME=/tmp/cache PYTHONPATH=/tmp/pyopencl:$PYTHONPATH && "
            "pip install --quiet --disable-pip-version-check --no-cache-dir --target /tmp/pyopencl pyopencl && "
            f'exec python "$0/benchmarks/bench_launch.py" --rounds 5 --json {RESULTS}/bench.json',
            "{src}",
        ],
        "axes": ["ur", "triton"],
    },
}  # fmt: skip
SUITE_KEYS = {"command", "axes"}
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell: a suite at one value of each axis it varies over (the others are "")."""

    suite: str
    command: tuple[str, ...]  # the suite's command, placeholders still in
    ur: str = ""
    target: str = ""
    triton: str = ""

    @property
    def name(self) -> str:
        parts = [self.suite]
        if self.ur:
            parts.append(f"ur{self.ur}")
        if self.target:
            parts.append(self.target)
        if self.triton and self.triton != DEFAULT_TRITON:
            parts.append(self.triton)
        return "-".join(parts)

    def command_in_image(self, src: str, ur_version: str) -> list[str]:
        """The command with its placeholders filled (``ur_version``: the exact release)."""
        values = {"src": src, "target": self.target, "ur": ur_version, "triton": self.triton or DEFAULT_TRITON}
        try:
            return [part.format(**values) for part in self.command]
        except (KeyError, IndexError, ValueError) as exc:
            raise XpukitError(
                f"suite {self.suite}: bad placeholder in its command ({exc})",
                "use only {src}, {target}, {ur}, {triton} (double braces for a literal brace)",
            ) from None

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "command": list(self.command), "name": self.name}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Cell:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["command"] = tuple(values.get("command", ()))
        return cls(**values)


@dataclasses.dataclass
class Matrix:
    path: Path
    axes: dict[str, list[str]]
    suites: dict[str, dict[str, Any]]


def _strings(value: Any, key: str, path: Path) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise XpukitError(f"{path}: {key} must be a non-empty list of strings", f'e.g. {key} = ["..."]')
    return list(value)


def load_matrix(path: Path | str | None = None) -> Matrix:
    """Read and check a matrix file (default env/matrix.toml)."""
    path = Path(path) if path else MATRIX_FILE
    fix = "see env/matrix.toml and docs/cluster.md for the format"
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise XpukitError(f"matrix file {path} does not exist", "pass --file PATH or restore env/matrix.toml") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise XpukitError(f"{path} is not valid TOML ({exc})", fix) from None
    unknown = set(data) - {"schema", "axes", "suites"}
    if unknown or data.get("schema") != 1:
        problem = f"unknown keys {sorted(unknown)}" if unknown else "schema must be 1"
        raise XpukitError(f"{path}: {problem}", fix)
    raw_axes = data.get("axes")
    if not isinstance(raw_axes, dict) or set(raw_axes) != set(AXES):
        raise XpukitError(f"{path}: [axes] must set exactly {', '.join(AXES)}", fix)
    axes = {name: _strings(raw_axes[name], f"axes.{name}", path) for name in AXES}
    suites = {name: dict(spec) for name, spec in BUILTIN_SUITES.items()}
    for name, spec in (data.get("suites") or {}).items():
        if not NAME_RE.match(name) or not isinstance(spec, dict) or not set(spec) <= SUITE_KEYS:
            keys = ", ".join(sorted(SUITE_KEYS))
            raise XpukitError(f"{path}: [suites.{name}] needs a name of letters, digits, .-_ and only {keys}", fix)
        command = _strings(spec.get("command"), f"suites.{name}.command", path)
        suite_axes = spec.get("axes", [])
        if not isinstance(suite_axes, list) or not set(suite_axes) <= {"ur", "target", "triton"}:
            raise XpukitError(f"{path}: suites.{name}.axes may name only ur, target, triton", fix)
        suites[name] = {"command": command, "axes": list(suite_axes)}
    return Matrix(path, axes, suites)


def _split(values: str | Iterable[str] | None) -> list[str] | None:
    if not values:
        return None
    items = [values] if isinstance(values, str) else list(values)
    found = [v.strip() for item in items for v in item.split(",") if v.strip()]
    return list(dict.fromkeys(found)) or None


def ur_releases(profile: pins_mod.Profile) -> tuple[str, list[str]]:
    """(the pinned UR release, the releases of the UR matrix) of a profile."""
    ur = profile.table["ur"]
    return ur.get("version", ""), list(ur.get("matrix", []))


def resolve_ur(value: str, profile: pins_mod.Profile) -> str:
    """The exact release for an axis value: "pinned" is the profile's, any other must be in its UR matrix."""
    pinned, releases = ur_releases(profile)
    if value == PINNED:
        return pinned or PINNED
    if value not in releases:
        raise XpukitError(
            f"UR release {value} is not in {profile.name}.ur.matrix ({', '.join(releases) or 'empty'})",
            f"pass --ur {PINNED} or one of {profile.name}.ur.matrix in env/pins.toml",
        )
    return value


def expand(
    matrix: Matrix,
    profile: pins_mod.Profile,
    suites: str | Iterable[str] | None = None,
    targets: str | Iterable[str] | None = None,
    urs: str | Iterable[str] | None = None,
    tritons: str | Iterable[str] | None = None,
) -> list[Cell]:
    """The cells: for each suite, the product of the axes it varies over, narrowed by the flags."""
    chosen = {
        "suite": _split(suites) or matrix.axes["suite"],
        "target": _split(targets) or matrix.axes["target"],
        "ur": _split(urs) or matrix.axes["ur"],
        "triton": _split(tritons) or matrix.axes["triton"],
    }
    for suite in chosen["suite"]:
        if suite not in matrix.suites:
            known = ", ".join(matrix.suites)
            raise XpukitError(f"unknown suite {suite!r}", f"use one of: {known} (or add [suites.{suite}])")
    chosen["target"] = split_targets(chosen["target"])
    for target in chosen["target"]:
        preset(target)  # an unknown target is an error here, not in every cell
    chosen["ur"] = list(dict.fromkeys(resolve_ur(v, profile) for v in chosen["ur"]))
    variants = list(profile.table["triton"].get("variants", {}))
    for triton in chosen["triton"]:
        if triton != DEFAULT_TRITON and triton not in variants:
            raise XpukitError(
                f"Triton variant {triton!r} is not one of the {profile.name} profile's",
                f"use {DEFAULT_TRITON}" + (f" or one of {', '.join(variants)}" if variants else ""),
            )
    cells: list[Cell] = []
    for suite in chosen["suite"]:
        spec = matrix.suites[suite]
        combos: list[dict[str, str]] = [{}]
        for axis in ("ur", "target", "triton"):
            if axis in spec["axes"]:
                combos = [{**c, axis: v} for c in combos for v in chosen[axis]]
        cells += [Cell(suite, tuple(spec["command"]), **combo) for combo in combos]
    names = [c.name for c in cells]
    if len(set(names)) != len(names):
        raise XpukitError("two cells would have the same name", "give every [suites.NAME] its own name")
    return cells


# ---------------------------------------------------------------- runs on disk


def run_id() -> str:
    """A run's name: its time plus a random suffix (a run folder's, an Indexed Job's)."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def new_run_dir(out_dir: Path) -> Path:
    """A fresh ``<out_dir>/<run-id>``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if out_dir == DEFAULT_OUT and not (DEFAULT_OUT.parent / ".gitignore").exists():
        (DEFAULT_OUT.parent / ".gitignore").write_text("*\n")  # runs never land in a commit
    run = out_dir / run_id()
    run.mkdir()
    return run


def mark_last(out_dir: Path, run: Path) -> None:
    staged = out_dir / ".last.tmp"
    staged.write_text(run.name + "\n")
    os.replace(staged, out_dir / "last")


def last_run(out_dir: Path) -> Path:
    marker = out_dir / "last"
    if not marker.is_file():
        raise XpukitError(f"no earlier run in {out_dir}", "run `invoke matrix` once before --only-failed")
    run = out_dir / marker.read_text().strip()
    if not (run / "cells.json").is_file():
        raise XpukitError(f"the last run {run} has no cells.json", "run `invoke matrix` again without --only-failed")
    return run


def cell_dir(run: Path, cell: Cell) -> Path:
    return run / "cells" / cell.name


def write_cells(run: Path, cells: list[Cell], meta: Mapping[str, Any]) -> None:
    (run / "cells.json").write_text(json.dumps({**meta, "cells": [c.to_json() for c in cells]}, indent=2) + "\n")


def read_cells(run: Path) -> tuple[list[Cell], dict[str, Any]]:
    data = json.loads((run / "cells.json").read_text())
    return [Cell.from_json(c) for c in data.pop("cells")], data


@dataclasses.dataclass(frozen=True)
class SchedulerRecord:
    """What the scheduler itself says of a cell's task (Slurm: ``squeue -t all``)."""

    state: str  # Slurm's job state: COMPLETED, FAILED, CANCELLED, NODE_FAIL, PENDING, ...
    node: str = ""  # where it ran (Slurm's NodeList), "" when it never started


# Slurm's states for a task whose node died under it: the cell is lost, never passed or failed.
LOST_STATES = ("NODE_FAIL", "BOOT_FAIL")


@dataclasses.dataclass
class Outcome:
    cell: Cell
    result: str  # passed | failed | cancelled | lost | no result
    seconds: float | None
    log: Path
    exit_code: int | None = None
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.result == "passed"


def read_outcome(run: Path, cell: Cell, record: SchedulerRecord | None = None) -> Outcome:
    """What the cell's own result file says. No file (cancelled, node lost, never started) is no
    result, or ``lost`` when the scheduler's ``record`` says the task's node failed."""
    folder = cell_dir(run, cell)
    log = folder / "log"
    try:
        data = json.loads((folder / "result.json").read_text())
    except FileNotFoundError:
        started = (folder / "started").read_text().strip() if (folder / "started").exists() else ""
        where = f" on {started}" if started else ""
        why = f"started{where}, never finished (cancelled or its node died)" if started else "never started"
        if record is not None:
            on = f" on {record.node}" if record.node else ""
            if record.state in LOST_STATES:
                return Outcome(cell, "lost", None, log, detail=f"Slurm: {record.state}{on}")
            why = f"{why}; Slurm: {record.state}{on}"
        return Outcome(cell, "no result", None, log, detail=why)
    except (OSError, ValueError) as exc:
        return Outcome(cell, "no result", None, log, detail=f"unreadable result file ({exc})")
    result = data.get("result")
    if data.get("cell") != cell.name or result not in ("passed", "failed", "cancelled"):
        return Outcome(cell, "no result", None, log, detail="result file names another cell or no result")
    seconds = data.get("seconds")
    detail = str(data.get("detail") or "")  # the one line a cell gave for its failure (a pull, a refusal)
    return Outcome(cell, result, float(seconds) if seconds is not None else None, log, data.get("exit_code"), detail)


def table(outcomes: list[Outcome], relative_to: Path | None = None) -> str:
    """One markdown table: cell, result, time, log."""

    def show(path: Path) -> str:
        if relative_to is not None:
            try:
                return str(path.relative_to(relative_to))
            except ValueError:
                pass
        return str(path)

    rows = [("cell", "result", "time", "log")]
    for o in outcomes:
        result = o.result if o.exit_code in (None, 0) else f"{o.result} (exit {o.exit_code})"
        if o.detail:
            result += f": {o.detail}"
        rows.append((o.cell.name, result, "-" if o.seconds is None else f"{o.seconds:.1f} s", show(o.log)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["| " + " | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


# ---------------------------------------------------------------- the cell script


def cell_script(
    cell: Cell, folder: Path, command: list[str], env: Mapping[str, str], cleanup: str = "", prelude: str = ""
) -> str:
    """The cell's bash script: runs ``command`` (the engine line) with its output in ``log``, then
    writes ``result.json`` (atomically). A TERM/INT (scancel, Ctrl-C) runs ``cleanup`` and writes
    "cancelled", never "passed". ``prelude``: shell lines run first (the runtime's own settings).
    A command that writes one line to ``why`` in the cell's folder has it in result.json's detail."""
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
    d = shlex.quote(str(folder))
    name = shlex.quote(cell.name)
    return f"""#!/usr/bin/env bash
# xpukit matrix cell {cell.name} (written by `invoke matrix`; the exact commands it runs)
set -u
export LC_ALL=C USER="${{USER:-$(id -un)}}"  # ch-run wants USER
{exports}{prelude}cd {d}
rm -f result.json result.json.part why
hostname -s >started
t0=$EPOCHREALTIME
finish() {{  # finish RESULT EXIT_CODE
  local seconds why=""
  seconds=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {{ printf "%.3f", b - a }}')
  [[ -s why ]] && why=$(head -n 1 why | tr -d '"\\\\' | tr -c '[:print:]\\n' ' ')
  printf '{{"cell": "%s", "result": "%s", "exit_code": %d, "seconds": %s, "host": "%s", "detail": "%s"}}\\n' \\
    {name} "$1" "$2" "$seconds" "$(hostname -s)" "$why" >result.json.part
  mv result.json.part result.json
}}
cancel() {{
  {cleanup or ":"}
  finish cancelled 143
  exit 143
}}
trap cancel TERM INT
{shlex.join(command)} >log 2>&1 </dev/null &
wait $!
code=$?
trap - TERM INT
if [[ $code -eq 0 ]]; then finish passed 0; else finish failed "$code"; fi
exit "$code"
"""
