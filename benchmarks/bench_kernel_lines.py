"""`kernel-report --lines` against a plain report, and `--watch` from a save to the new page.

Runs where Triton and ocloc live (the image):

    docker run --rm -v "$PWD:/workspace" -w /workspace xpukit:cpu python benchmarks/bench_kernel_lines.py

1. Warm (Triton's cache holds the zebins): build_report with and without ``lines`` in one process,
   alternated, median of --repeat; the ratio is the cost of the per-line view.
2. --watch: a watch server in a child process on a copy of the kernel; each save edits the kernel's
   body (a real recompile); the time from the write to the server announcing the new page on /events.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SEVEN = "pvc,bmg,acm-g10,arl-h,mtl,lnl,ptl"
SMALL = "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,num_warps=4"


def warm_ratio(repeat: int) -> None:
    from xpukit.runtime.kernels.kernel_report import build_report

    kernel = str(ROOT / "examples" / "matmul.py:matmul_kernel")
    for targets, configs in (("pvc", []), (SEVEN, [SMALL])):
        build_report(kernel, [targets], configs, lines=True)  # fill Triton's cache
        plain, lines = [], []
        for _ in range(repeat):
            for with_lines, into in ((False, plain), (True, lines)):
                started = time.perf_counter()
                build_report(kernel, [targets], configs, lines=with_lines)
                into.append(time.perf_counter() - started)
        a, b = statistics.median(plain), statistics.median(lines)
        print(f"warm {targets} {configs or 'declared'}: plain {a:.2f} s, --lines {b:.2f} s, ratio {b / a:.2f}")


def watch_latency(targets: str, configs: list[str], saves: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="xpukit-bench-watch-"))
    kernel = work / "matmul.py"
    shutil.copy(ROOT / "examples" / "matmul.py", kernel)
    port = 0
    args = [sys.executable, "-m", "xpukit", "kernel-report", f"{kernel}:matmul_kernel", "--target", targets, "--watch"]
    for config in configs:
        args += ["--config", config]
    server = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert server.stderr is not None
        for line in server.stderr:
            if "http://127.0.0.1:" in line:
                port = int(line.rsplit(":", 1)[1].split("/")[0])
                break
        events = urllib.request.urlopen(f"http://127.0.0.1:{port}/events", timeout=120)
        first = _next_version(events)
        times = []
        for n in range(saves):
            source = kernel.read_text().replace(
                "    pid_n = tl.program_id(1)", f"    pid_n = tl.program_id(1) + {n} * 0", 1
            )
            kernel.write_text(source)
            started = time.perf_counter()
            first = _wait_past(events, first)
            times.append(time.perf_counter() - started)
            kernel.write_text((ROOT / "examples" / "matmul.py").read_text())
            first = _wait_past(events, first)  # the revert compiles too; not timed
        label = f"{targets} {configs[0] if configs else 'declared'}"
        print(
            f"watch {label}: save -> page median {statistics.median(times):.2f} s, "
            f"max {max(times):.2f} s ({saves} saves)"
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


def _next_version(events) -> int:
    while True:
        line = events.readline().decode()
        if line.startswith("data:"):
            return int(line.split(":", 1)[1])


def _wait_past(events, version: int) -> int:
    while True:
        current = _next_version(events)
        if current != version:
            return current


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--saves", type=int, default=5)
    args = parser.parse_args()
    warm_ratio(args.repeat)
    for targets, configs in (("pvc", []), ("pvc", [SMALL]), (SEVEN, [SMALL])):
        watch_latency(targets, configs, args.saves)
    return 0


if __name__ == "__main__":
    sys.exit(main())
