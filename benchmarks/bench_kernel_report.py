"""Warm kernel-report time: one kernel, one target, one config, Triton's cache already holding it.

In-process: ``build_report`` after a first call has filled the cache (the compile is a cache hit;
the ocloc disasm and the counting run every time). Command: the whole
``python -m xpukit kernel-report`` process, interpreter and Triton import included.

    python benchmarks/bench_kernel_report.py [--kernel examples/kernels.py:scale_kernel]
        [--target pvc] [--config BLOCK=1024,num_warps=4] [--repeat 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.dont_write_bytecode = True  # the source tree may be read-only

from xpukit.runtime.offline.kernel_report import build_report  # noqa: E402

TARGET_S = 0.5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default=f"{ROOT}/examples/kernels.py:scale_kernel")
    parser.add_argument("--target", default="pvc")
    parser.add_argument("--config", default="BLOCK=1024,num_warps=4")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="xpukit-bench-report-"))

    start = time.perf_counter()
    first = build_report(args.kernel, [args.target], [args.config])
    cold = time.perf_counter() - start
    if first["rows"][0]["error"]:
        print(f"the report failed: {first['rows'][0]['error']}", file=sys.stderr)
        return 1
    warm = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        build_report(args.kernel, [args.target], [args.config])
        warm.append(time.perf_counter() - start)
    command = [sys.executable, "-m", "xpukit", "kernel-report", args.kernel, "--target", args.target]
    command += ["--config", args.config]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    whole = []
    for _ in range(max(3, args.repeat // 3)):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=env)
        whole.append(time.perf_counter() - start)
    figures = {
        "kernel": args.kernel.rpartition(":")[2],
        "target": args.target,
        "config": args.config,
        "first_call_s": round(cold, 3),
        "warm_median_s": round(statistics.median(warm), 3),
        "warm_max_s": round(max(warm), 3),
        "command_median_s": round(statistics.median(whole), 3),
        "repeat": args.repeat,
        "cpus": os.cpu_count(),
    }
    print(
        f"{figures['kernel']} on {args.target} ({args.config}): first call {cold * 1000:.0f} ms, "
        f"warm median {figures['warm_median_s'] * 1000:.0f} ms (max {figures['warm_max_s'] * 1000:.0f} ms, "
        f"target <= {TARGET_S * 1000:.0f} ms), whole command warm {figures['command_median_s'] * 1000:.0f} ms"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0 if figures["warm_median_s"] <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
