"""Per-stage compile times (ttir, ttgir, llir, spv, zebin) for the example kernels, cold and warm.

Cold: an empty TRITON_CACHE_DIR, so every stage runs (in a process that has already compiled once,
so imports and LLVM initialisation are not counted). Warm: the same call again, served from Triton's
cache (no stage runs). Stage times come from timing each stage callable the backend registers.

    python benchmarks/bench_compile_stages.py [--target pvc] [--repeat 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.dont_write_bytecode = True  # the source tree may be read-only

from xpukit.runtime.kernels.compile import load_kernel  # noqa: E402
from xpukit.runtime.offline.ocloc import find_ocloc  # noqa: E402
from xpukit.runtime.triton.tritonc import compile_kernel, parse_signature, xpu_backend  # noqa: E402

KERNELS = ("scale_kernel", "add_kernel", "axpy_fp16_kernel", "row_sum_kernel")
STAGES = ("ttir", "ttgir", "llir", "spv", "zebin")
_times: dict[str, float] = {}


def _instrument() -> None:
    """Wrap the backend's add_stages so each registered stage records its wall time."""
    backend = xpu_backend()
    original = backend.add_stages

    def add_stages(self, stages, options, *args, **kwargs):
        original(self, stages, options, *args, **kwargs)
        for name, fn in list(stages.items()):

            def timed(src, metadata, _fn=fn, _name=name):
                start = time.perf_counter()
                try:
                    return _fn(src, metadata)
                finally:
                    _times[_name] = time.perf_counter() - start

            stages[name] = timed

    backend.add_stages = add_stages


def _machine() -> str:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import triton

    return (
        f"{platform.platform()}, {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"triton {triton.__version__}, {find_ocloc().describe()}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="pvc")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    _instrument()
    options = {"generate_native_code": True}
    specs = {k: load_kernel(f"{ROOT / 'examples' / 'kernels.py'}:{k}") for k in KERNELS}
    with tempfile.TemporaryDirectory(prefix="xpukit-bench-") as tmp:
        os.environ["TRITON_CACHE_DIR"] = str(Path(tmp, "warmup"))
        first = specs[KERNELS[0]]
        start = time.perf_counter()
        compile_kernel(first.fn, parse_signature(first.signature), first.constexprs, args.target, options)
        first_in_process = time.perf_counter() - start

        results = []
        for name, spec in specs.items():
            sig = parse_signature(spec.signature)
            cold_total, warm_total, per_stage = [], [], {s: [] for s in STAGES}
            for rep in range(args.repeat):
                os.environ["TRITON_CACHE_DIR"] = str(Path(tmp, f"{name}-{rep}"))
                _times.clear()
                start = time.perf_counter()
                compile_kernel(spec.fn, sig, spec.constexprs, args.target, options)
                cold_total.append(time.perf_counter() - start)
                for s in STAGES:
                    per_stage[s].append(_times.get(s, float("nan")))
                for _ in range(5):
                    _times.clear()
                    start = time.perf_counter()
                    compile_kernel(spec.fn, sig, spec.constexprs, args.target, options)
                    warm_total.append(time.perf_counter() - start)
                    assert not _times, "warm compile ran a stage: cache miss"
            row = {
                "kernel": name,
                **{s: statistics.median(v) * 1e3 for s, v in per_stage.items()},
                "cold": statistics.median(cold_total) * 1e3,
                "warm": statistics.median(warm_total) * 1e3,
            }
            row["warm/cold"] = row["warm"] / row["cold"]
            results.append(row)

    machine = _machine()
    command = "python benchmarks/bench_compile_stages.py " + " ".join(sys.argv[1:])
    print(f"machine: {machine}")
    print(f"command: {command.strip()}")
    print(f"target: {args.target}; median of {args.repeat} cold and {5 * args.repeat} warm compiles; ms")
    print(f"first compile in a fresh process (imports, LLVM init): {first_in_process * 1e3:.0f} ms")
    cols = [*STAGES, "cold", "warm", "warm/cold"]
    print("| kernel | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for r in results:
        cells = [f"{r[c]:.3f}" if c == "warm/cold" else f"{r[c]:.1f}" for c in cols]
        print(f"| {r['kernel']} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "command": command, "results": results}, indent=2))
    worst = max(r["warm/cold"] for r in results)
    print(f"worst warm/cold: {worst:.3f} (target <= 0.05): {'OK' if worst <= 0.05 else 'MISSED'}")
    return 0 if worst <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
