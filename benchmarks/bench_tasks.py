"""Task overhead: `invoke demo-ur` warm and `invoke build` with nothing to build, their wall time and
their round trips (Docker API requests, processes spawned), in this checkout and, with --baseline, in
another one (e.g. a worktree of main before a change), alternating so that a loaded machine weighs
on both alike.

    python benchmarks/bench_tasks.py [--baseline DIR] [--rounds 5] [--json OUT]

Both checkouts' images must exist (run `invoke build` in each first): the figures are of the warm
path. Each round also times `docker run --rm IMAGE true` and `invoke --list`, the floor under any
task that runs a container and the cost of starting invoke. Round trips are counted once per checkout
and task, by running the task under a wrapper that counts the docker SDK's HTTP requests and every
subprocess it starts (the docker CLI, git, ...); wall times are of plain `invoke` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASKS = {"demo-ur": ["demo-ur"], "build (no-op)": ["build"]}

# Run as `python WRAPPER TASK ARGS...` in a checkout: invoke's own entry point, with the docker SDK's
# requests and subprocess spawns counted and written as JSON to $BENCH_TRACE_OUT at exit.
WRAPPER = """\
import atexit, json, os, subprocess, sys
import requests
calls = {"api": [], "spawn": []}
request = requests.Session.request
def counted_request(self, method, url, *args, **kwargs):
    calls["api"].append(method + " " + url.split("/v1.", 1)[-1].split("?")[0][:80])
    return request(self, method, url, *args, **kwargs)
requests.Session.request = counted_request
popen_init = subprocess.Popen.__init__
def counted_popen(self, args, *rest, **kwargs):
    calls["spawn"].append(" ".join(map(str, args if isinstance(args, (list, tuple)) else [args]))[:80])
    return popen_init(self, args, *rest, **kwargs)
subprocess.Popen.__init__ = counted_popen
atexit.register(lambda: open(os.environ["BENCH_TRACE_OUT"], "w").write(json.dumps(calls)))
sys.argv = ["invoke", *sys.argv[1:]]
from invoke.main import program
program.run()
"""


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} in {cwd} failed:\n{result.stdout[-1500:]}{result.stderr[-1500:]}")
    if "is missing; building it" in result.stdout:  # `invoke build` always runs the (no-op) build
        sys.exit(f"{' '.join(cmd)} in {cwd} built the image: build it first, the figures are of the warm path")
    return elapsed


def image_of(checkout: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "invoke", "demo-ur", "--dry-run"], cwd=checkout,
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    line = out.strip().splitlines()[-1].split()
    return next(part for part in line if part.startswith("xpukit:"))


def round_trips(checkout: Path, task: list[str], wrapper: Path) -> dict[str, list[str]]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = {**os.environ, "BENCH_TRACE_OUT": out.name}
        run([sys.executable, str(wrapper), *task], checkout, env)
        return json.loads(Path(out.name).read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with (e.g. main's worktree)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    checkouts = {"this": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    invoke = [sys.executable, "-m", "invoke"]
    images = {name: image_of(path) for name, path in checkouts.items()}
    times: dict[str, dict[str, list[float]]] = {name: {} for name in checkouts}
    docker = os.environ.get("XPUKIT_DOCKER_CLI", "docker")
    for _ in range(args.rounds):
        for name, path in checkouts.items():
            for label, task in TASKS.items():
                times[name].setdefault(label, []).append(run([*invoke, *task], path))
            times[name].setdefault("invoke --list", []).append(run([*invoke, "--list"], path))
            times[name].setdefault("docker run --rm IMAGE true", []).append(
                run([docker, "run", "--rm", images[name], "true"], path)
            )
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = Path(tmp) / "counted_invoke.py"
        wrapper.write_text(WRAPPER)
        trips = {name: {label: round_trips(path, task, wrapper) for label, task in TASKS.items()}
                 for name, path in checkouts.items()}  # fmt: skip
    load = os.getloadavg()
    print(f"machine: {platform.node()} {os.cpu_count()} CPUs, load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"rounds: {args.rounds}, alternating {' / '.join(checkouts)}; medians (min-max) in s")
    for label in [*TASKS, "invoke --list", "docker run --rm IMAGE true"]:
        row = []
        for name in checkouts:
            values = times[name][label]
            row.append(f"{name} {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
        if len(checkouts) == 2:
            ratio = statistics.median(times["this"][label]) / statistics.median(times["baseline"][label])
            row.append(f"ratio {ratio:.2f}")
        print(f"  {label}: " + ", ".join(row))
    for label in TASKS:
        for name in checkouts:
            found = trips[name][label]
            print(f"  {label} [{name}]: {len(found['api'])} API requests, {len(found['spawn'])} processes")
            for kind in ("api", "spawn"):
                for call in found[kind]:
                    print(f"      {kind}: {call}")
    if args.json:
        args.json.write_text(json.dumps({"times": times, "round_trips": trips, "load": load}, indent=2))


if __name__ == "__main__":
    main()
