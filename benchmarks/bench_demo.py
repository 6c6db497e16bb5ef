"""The demo through invoke beside its floor: `invoke demo-ur` warm against `docker run --rm IMAGE
true` on the same engine, alternating, and where the rest goes (invoke's start, the engine calls the
kit makes, the container's Python imports, UR's start, the program load).

    python benchmarks/bench_demo.py [--checkout DIR] [--baseline DIR] [--rounds 9] [--json OUT]

Each round runs, in turn: `invoke demo-ur`; `docker run --rm IMAGE true`; `docker run --rm IMAGE
python -c pass`; the demo's own `docker run` line (the one `invoke demo-ur --dry-run` prints, so the
container is the demo's, without invoke); `invoke --list`. With --baseline another checkout's
`invoke demo-ur` (e.g. a worktree of main before a change) runs in the same rounds. The image must
be built first (a run that builds stops the benchmark): the figures are of the warm path.

The breakdown, from separate runs (not part of the medians):
- invoke's start: `invoke --list`, and `python -X importtime -c "import tasks"` (the top imports);
- the engine calls: `invoke demo-ur` under a wrapper that times every docker SDK HTTP request and
  every process started, with the time from process start to the first request and after the last;
- the container's Python imports: the demo under `python -X importtime` in the image (its top-level
  imports, cumulative);
- UR's start and the program load: what the demo prints about itself (`total`, each first call);
- in one container of the demo's, the demo's python process by phase, run --phase-runs times: the
  interpreter's start, numpy, Triton and the kit imported, UR's start (`ur.Session`), the rest of
  the demo, the interpreter's exit.

PYTHONDONTWRITEBYTECODE, where set (sandboxes, CI), is left out of the runs as a user's shell does
not set it (--as-is keeps it): with it, every task compiles the kit's host modules from source.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Run as `python WRAPPER TASK ARGS...` in a checkout: invoke's entry point, with each docker SDK
# request and each spawned process timed, written as JSON to $BENCH_TRACE_OUT at exit.
WRAPPER = """\
import time
t0 = time.perf_counter()
import atexit, json, os, subprocess, sys
import requests
calls = {"api": [], "spawn": [], "imported": 0.0, "end": 0.0}
request = requests.Session.request
def timed_request(self, method, url, *args, **kwargs):
    start = time.perf_counter() - t0
    try:
        return request(self, method, url, *args, **kwargs)
    finally:
        path = url.split("/v1.", 1)[-1].split("?")[0][:70]
        calls["api"].append([method + " " + path, start, time.perf_counter() - t0 - start])
requests.Session.request = timed_request
popen_init = subprocess.Popen.__init__
def counted_popen(self, args, *rest, **kwargs):
    line = " ".join(map(str, args if isinstance(args, (list, tuple)) else [args]))[:70]
    calls["spawn"].append([line, time.perf_counter() - t0])
    return popen_init(self, args, *rest, **kwargs)
subprocess.Popen.__init__ = counted_popen
def done():
    calls["end"] = time.perf_counter() - t0
    open(os.environ["BENCH_TRACE_OUT"], "w").write(json.dumps(calls))
atexit.register(done)
sys.argv = ["invoke", *sys.argv[1:]]
from invoke.main import program
calls["imported"] = time.perf_counter() - t0
program.run()
"""


# A user's shell writes bytecode; some (CI, sandboxes) set PYTHONDONTWRITEBYTECODE, and then every task
# compiles the kit's host modules from source. The runs take the user's default unless --as-is.
RUN_ENV: dict[str, str] | None = None


# Run in the demo's container as `python -c DRIVER N`: N times the demo as `python -c PHASES`, each phase
# timed on the monotonic clock the container shares: the interpreter's start (spawn to its first
# line), numpy, Triton and the kit imported, UR's start (ur.Session: loader, adapters, context,
# queue), the rest of the demo (run as `python demo` runs it, to its sys.exit), the interpreter's
# exit (from there to reaped). Medians over the N, in ms, printed as JSON.
PHASES = """\
import time, sys
t = [time.perf_counter()]
demo = DEMO_PATH  # the demo's path in the container, from its own `docker run` line
sys.argv = [demo]
import os; os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy
t.append(time.perf_counter())
import triton, triton.language
t.append(time.perf_counter())
from xpukit.runtime import ur
import xpukit.runtime.triton
t.append(time.perf_counter())
opened = []
init = ur.Session.__init__
def timed(self, *a, **k):
    s = time.perf_counter(); init(self, *a, **k); opened.append(time.perf_counter() - s)
ur.Session.__init__ = timed
import runpy
try:
    runpy.run_path(demo, run_name="__main__")  # as `python demo` runs it, to its sys.exit
except SystemExit as end:
    code = end.code
t.append(time.perf_counter())
sys.stderr.write(repr([*t, opened[0], code]) + chr(10))
"""
DRIVER = """\
import json, statistics, subprocess, sys, time
names = ["interpreter start", "numpy imported", "triton imported", "the kit imported",
         "UR's start (ur.Session)", "the demo's own work (its kernels defined, programs from the cache, launches, "
         "the check, the session closed)", "interpreter exit"]
got = {n: [] for n in names}
for _ in range(int(sys.argv[1])):
    spawn = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", sys.argv[2]], capture_output=True, text=True)
    reaped = time.perf_counter()
    *t, ur_start, code = eval(p.stderr.strip().splitlines()[-1])
    assert code == 0, p.stderr
    parts = [t[0] - spawn, t[1] - t[0], t[2] - t[1], t[3] - t[2], ur_start, t[4] - t[3] - ur_start, reaped - t[4]]
    for n, v in zip(names, parts):
        got[n].append(v * 1e3)
print(json.dumps({n: round(statistics.median(v), 1) for n, v in got.items()}))
"""


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, env=env or RUN_ENV, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{shlex.join(cmd)} in {cwd} failed:\n{result.stdout[-1500:]}{result.stderr[-1500:]}")
    if "is missing; building it" in result.stdout or "exporting to image" in result.stdout + result.stderr:
        sys.exit(f"{shlex.join(cmd)} in {cwd} built the image: build it first, the figures are of the warm path")
    return elapsed, result.stdout + result.stderr


def demo_line(checkout: Path) -> list[str]:
    """The `docker run` line `invoke demo-ur` runs (its --dry-run's last line)."""
    out = subprocess.run([sys.executable, "-m", "invoke", "demo-ur", "--dry-run"], cwd=checkout,
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    line = shlex.split(out.strip().splitlines()[-1])
    if "run" not in line[:2]:
        sys.exit(f"`invoke demo-ur --dry-run` in {checkout} would build first: run `invoke build` there")
    return line


def image_in(line: list[str]) -> str:
    return next(part for part in line if part.startswith("xpukit:"))


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def trace(checkout: Path, wrapper: Path, repeats: int) -> list[dict]:
    traces = []
    for _ in range(repeats):
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            env = {**(RUN_ENV or os.environ), "BENCH_TRACE_OUT": out.name}
            wall, _ = run([sys.executable, str(wrapper), "demo-ur"], checkout, env)
            found = json.loads(Path(out.name).read_text())
            found["wall"] = wall
            traces.append(found)
    return traces


def import_times(lines: str, top: int) -> list[tuple[str, float]]:
    """The top-level imports of an `-X importtime` log, cumulative seconds, largest first."""
    found = []
    for ln in lines.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| ( *)(\S+)", ln)
        if m and not m.group(2):
            found.append((m.group(3), int(m.group(1)) / 1e6))
    return sorted(found, key=lambda item: -item[1])[:top]


def demo_timings(output: str) -> dict[str, str]:
    """What the demo prints about itself: its total, each variant's first call."""
    said = {}
    if m := re.search(r"total ([\d.]+) s", output):
        said["demo total (UR start, program load, launches, check)"] = m.group(1) + " s"
    for m in re.finditer(r"(\S[^:\n]*): max abs error.*first call \(compile\+load\+launch\) ([\d.]+ ms)", output):
        said[f"first call, {m.group(1).strip()}"] = m.group(2)
    for m in re.finditer(r"(\S[^:\n]*): program loaded from (.*)", output):
        said[f"program, {m.group(1).strip()}"] = m.group(2)
    return said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--baseline", type=Path, help="another checkout whose `invoke demo-ur` alternates with it")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--traces", type=int, default=3, help="traced `invoke demo-ur` runs for the engine calls")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--phase-runs", type=int, default=7, help="demo runs in one container, timed by phase")
    parser.add_argument("--as-is", action="store_true", help="keep PYTHONDONTWRITEBYTECODE if it is set here")
    args = parser.parse_args()
    global RUN_ENV
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not args.as_is:
        RUN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        print("note: PYTHONDONTWRITEBYTECODE is set here; the runs leave it out, as a user's shell does (--as-is)")
    checkout = args.checkout.resolve()
    invoke = [sys.executable, "-m", "invoke"]
    docker = os.environ.get("XPUKIT_DOCKER_CLI", "docker")
    line = demo_line(checkout)
    image = image_in(line)
    cases: dict[str, tuple[list[str], Path]] = {
        "invoke demo-ur": ([*invoke, "demo-ur"], checkout),
        "docker run --rm IMAGE true": ([docker, "run", "--rm", image, "true"], checkout),
        "docker run --rm IMAGE python -c pass": ([docker, "run", "--rm", image, "python", "-c", "pass"], checkout),
        "the demo's docker run line (no invoke)": (line, checkout),
        "invoke --list": ([*invoke, "--list"], checkout),
    }
    if args.baseline:
        demo_line(args.baseline.resolve())  # its image is there, or stop now
        cases["invoke demo-ur [baseline]"] = ([*invoke, "demo-ur"], args.baseline.resolve())
    for cmd, cwd in cases.values():  # one warm-up each
        run(cmd, cwd)
    times: dict[str, list[float]] = {label: [] for label in cases}
    demo_out = ""
    for _ in range(args.rounds):
        for label, (cmd, cwd) in cases.items():
            elapsed, out = run(cmd, cwd)
            times[label].append(elapsed)
            if label == "the demo's docker run line (no invoke)":
                demo_out = out
    load = os.getloadavg()

    with tempfile.TemporaryDirectory() as tmp:
        wrapper = Path(tmp) / "timed_invoke.py"
        wrapper.write_text(WRAPPER)
        traces = trace(checkout, wrapper, args.traces)
    host_imports = subprocess.run([sys.executable, "-X", "importtime", "-c", "import tasks"], cwd=checkout, env=RUN_ENV,
                                  capture_output=True, text=True, check=True).stderr  # fmt: skip
    py = line.index(image) + 1
    in_image = [*line[:py], "python", "-X", "importtime", *line[py + 1 :]]
    container_imports = subprocess.run(in_image, capture_output=True, text=True, check=True).stderr
    phases_code = PHASES.replace("DEMO_PATH", repr(line[py + 1]))
    phases_line = [*line[:py], "python", "-c", DRIVER, str(args.phase_runs), phases_code]
    phases = json.loads(subprocess.run(phases_line, capture_output=True, text=True, check=True).stdout)

    print(f"machine: {platform.node()} {os.cpu_count()} CPUs, {platform.platform()}; "
          f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end of the rounds")  # fmt: skip
    print(f"checkout: {checkout}; image {image}")
    print(f"rounds: {args.rounds}, alternating; median (min-max) in s")
    floors = times["docker run --rm IMAGE true"]
    floor = statistics.median(floors)
    print("  (x the floor: ratio of the medians; per round: the median of each round's ratio to that round's floor,")
    print("  which a load that drifts between rounds moves less)")
    for label, values in times.items():
        per_round = statistics.median(v / f for v, f in zip(values, floors, strict=True))
        print(f"  {label}: {median(values)}  = {statistics.median(values) / floor:.2f}x the floor, "
              f"{per_round:.2f}x per round")  # fmt: skip

    print(f"\nengine calls, {len(traces)} traced `invoke demo-ur` runs (per run; times from process start, s)")
    for i, found in enumerate(traces):
        api = found["api"]
        first = api[0][1] if api else found["end"]
        last = max((start + took for _, start, took in api), default=first)
        container = [c for c in api if "/containers/" in c[0] or c[0].endswith("containers/create")]
        before = sum(took for name, _, took in api if c_before(name))
        print(f"  run {i + 1}: wall {found['wall']:.3f}; invoke imported {found['imported']:.3f}; "
              f"first request at {first:.3f}; {len(api)} requests ({sum(c[2] for c in api):.3f} s), "
              f"{len(found['spawn'])} processes; requests before the container {before:.3f}; "
              f"container create..remove {sum(c[2] for c in container):.3f}; "
              f"after the last request {found['end'] - last:.3f}")  # fmt: skip
    for name, start, took in traces[-1]["api"]:
        print(f"      api {start:7.3f} +{took:.3f}  {name}")
    for name, start in traces[-1]["spawn"]:
        print(f"      spawn {start:7.3f}  {name}")

    print("\ninvoke's start: `python -X importtime -c 'import tasks'` top imports (cumulative s)")
    for name, took in import_times(host_imports, 6):
        print(f"  {name}: {took:.3f}")
    print("\nthe container's Python imports: the demo under -X importtime in the image, top imports (cumulative s)")
    for name, took in import_times(container_imports, 8):
        print(f"  {name}: {took:.3f}")
    print(f"\nin one demo container, the demo run {args.phase_runs} times by phase (medians, ms; the phases sum to")
    print("one run of the demo's python process, the container's own start and removal not included)")
    for name, took in phases.items():
        print(f"  {name}: {took:.1f}")
    print(f"  sum: {sum(phases.values()):.1f}")
    print("\nthe demo's own timings (its last run in the rounds)")
    for key, value in demo_timings(demo_out).items():
        print(f"  {key}: {value}")
    if args.json:
        args.json.write_text(json.dumps({"times": times, "traces": traces, "load": load, "phases": phases}, indent=2))


def c_before(name: str) -> bool:
    """A request the kit makes before it creates the demo's container."""
    return "containers/" not in name


if __name__ == "__main__":
    main()
