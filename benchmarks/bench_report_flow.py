"""What "why" costs: `kernel-report --lines` with live registers, loops and stall sources against
the same report without them (the counts per line only), and against a plain report.

Runs where Triton and ocloc live (the image):

    docker run --rm -v "$PWD:/workspace" -w /workspace --tmpfs /tmp:exec --entrypoint python \
        xpukit:cpu benchmarks/bench_report_flow.py

Cold: each report in a fresh process with an empty Triton cache (Triton, the SPIR-V, ocloc and the
analysis all run), the three kinds alternated, median of --repeat. "no flow" replaces the join of
``kernel_flow`` (its one iga64 run and the three analyses) with nothing, in that process only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RUN = """
import sys, time
sys.path.insert(0, {root!r})
from xpukit.runtime.kernels import kernel_report
from xpukit.runtime.offline.report_model import ReportOptions
if {no_flow!r}:
    kernel_report.add_flow = lambda *a, **k: None
started = time.perf_counter()
kernel_report.build_report(ReportOptions({kernel!r}, targets=({target!r},), configs={configs!r}, lines={lines!r}))
print(time.perf_counter() - started)
"""


def one(kernel: str, target: str, configs: tuple[str, ...], lines: bool, no_flow: bool) -> float:
    """Seconds of one cold report in its own process (its imports not counted)."""
    with tempfile.TemporaryDirectory(prefix="bench-flow-") as cache:
        code = RUN.format(root=str(ROOT), kernel=kernel, target=target, configs=configs, lines=lines, no_flow=no_flow)
        env = {**os.environ, "TRITON_CACHE_DIR": cache}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--target", default="pvc")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    kernel = str(ROOT / "examples" / "matmul.py:matmul_kernel")
    kinds = {"plain": (False, False), "lines, no flow": (True, True), "lines with flow": (True, False)}
    cases = {"declared tile": (), "64x64x32": ("BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,num_warps=4",)}
    results = {}
    for case, configs in cases.items():
        times: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(args.repeat):
            for kind, (lines, no_flow) in kinds.items():
                times[kind].append(one(kernel, args.target, configs, lines, no_flow))
        medians = {k: statistics.median(v) for k, v in times.items()}
        ratio = medians["lines with flow"] / medians["lines, no flow"]
        results[case] = {**medians, "flow / no flow": ratio}
        shown = ", ".join(f"{k} {v:.2f} s" for k, v in medians.items())
        print(f"cold {args.target} {case}: {shown}; with flow / without: {ratio:.2f}x", flush=True)
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
