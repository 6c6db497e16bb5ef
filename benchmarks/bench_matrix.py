#!/usr/bin/env python3
"""The kit's own cost per matrix cell (submit, start, collect) against the cell's work.

Runs N cells of a no-op suite (`true` in the image) one at a time through `invoke matrix`, on the
local scheduler and through Slurm, and times:
  wall            `invoke matrix` from start to its table (plan, image check, scripts, submit,
                  polling, collect), per cell
  cell            the cell's own time from its result file (`docker run` of the image: engine start,
                  the command, removal)
  engine floor    a bare `docker run --rm IMAGE true`, the same image, no kit
  kit overhead    wall - cell, per cell: what the kit adds around the engine
and compares the overhead with a container-tests cell (`--container-tests` runs one here; else
`--reference-seconds` is the cell time to compare with).

    python benchmarks/bench_matrix.py [--cells 4] [--schedulers local,slurm] [--container-tests] [--json F]

Slurm: SLURM_CONF names a running one, else (as root) one is started with .ci/slurm.sh and stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGETS = ["pvc", "acm-g10", "bmg", "lnl", "mtl"]
NOOP = """schema = 1
[axes]
ur = ["pinned"]
target = {targets}
triton = ["default"]
suite = ["noop"]
[suites.noop]
command = ["true"]
axes = ["target"]
"""


def invoke_matrix(args: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "matrix", *args], cwd=REPO, env=env, capture_output=True, text=True
    )
    return time.perf_counter() - t, proc


def cell_seconds(out: Path) -> list[float]:
    run = out / (out / "last").read_text().strip()
    return [json.loads(p.read_text())["seconds"] for p in sorted(run.glob("cells/*/result.json"))]


@contextlib.contextmanager
def slurm_conf() -> Iterator[str]:
    if os.environ.get("SLURM_CONF"):
        yield os.environ["SLURM_CONF"]
        return
    folder = Path(tempfile.mkdtemp(prefix="xpk-bench-slurm."))
    script = str(REPO / ".ci" / "slurm.sh")
    try:
        subprocess.run([script, "start", str(folder)], check=True, capture_output=True)
        yield str(folder / "slurm.conf")
    finally:
        subprocess.run([script, "stop", str(folder)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


def engine_floor(image: str, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", image, "true"], check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def measure(scheduler: str, cells: int, env: dict[str, str], tmp: Path) -> dict[str, float]:
    matrix = tmp / f"noop-{scheduler}.toml"
    matrix.write_text(NOOP.format(targets=json.dumps(TARGETS[:cells])))
    out = tmp / f"runs-{scheduler}"
    args = ["--file", str(matrix), "--out-dir", str(out), "--scheduler", scheduler]
    args += ["--jobs", "1"] if scheduler == "local" else ["--throttle", "1"]
    invoke_matrix(args, env)  # warm: the image check, the page cache
    wall, proc = invoke_matrix(args, env)
    if proc.returncode != 0:
        raise SystemExit(f"{scheduler}: invoke matrix failed:\n{proc.stdout}\n{proc.stderr[-2000:]}")
    per_cell = cell_seconds(out)
    return {
        "cells": len(per_cell),
        "wall_s": round(wall, 3),
        "cell_median_s": round(statistics.median(per_cell), 3),
        "overhead_per_cell_s": round((wall - sum(per_cell)) / len(per_cell), 3),
    }


def container_tests_seconds(env: dict[str, str], tmp: Path) -> float:
    out = tmp / "runs-container-tests"
    _, proc = invoke_matrix(["--suite", "container-tests", "--out-dir", str(out)], env)
    (seconds,) = cell_seconds(out)
    if proc.returncode != 0:
        print(f"note: the container-tests cell failed ({proc.stdout.strip().splitlines()[-3:]})", file=sys.stderr)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=4, choices=range(1, len(TARGETS) + 1))
    parser.add_argument("--schedulers", default="local,slurm")
    parser.add_argument("--container-tests", action="store_true", help="run one container-tests cell as reference")
    parser.add_argument("--reference-seconds", type=float, default=0.0, help="a container-tests cell's time")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    env = {**os.environ, "XPUKIT_PROFILE": "cpu"}
    result: dict[str, object] = {
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory(prefix="xpk-bench-matrix.") as tmp:
        for scheduler in args.schedulers.split(","):
            if scheduler == "slurm":
                with slurm_conf() as conf:
                    result["slurm"] = measure("slurm", args.cells, {**env, "SLURM_CONF": conf}, Path(tmp))
            else:
                result[scheduler] = measure(scheduler, args.cells, env, Path(tmp))
        local_run = Path(tmp) / f"runs-{args.schedulers.split(',')[0]}"
        meta = json.loads((local_run / (local_run / "last").read_text().strip() / "cells.json").read_text())
        result["image"] = meta["images"]["default"]["id"]  # what the cells ran, by ID
        result["engine_floor_s"] = round(engine_floor(str(result["image"]), 5), 3)
        reference = container_tests_seconds(env, Path(tmp)) if args.container_tests else args.reference_seconds
    if reference:
        result["container_tests_cell_s"] = round(reference, 1)
        for scheduler in args.schedulers.split(","):
            overhead = result[scheduler]["overhead_per_cell_s"]  # type: ignore[index]
            result[f"{scheduler}_overhead_vs_container_tests"] = round(overhead / reference, 4)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
