"""What ``kernel-report --launched-by SCRIPT`` costs: against the same report with the specialization
typed in (``--signature``/``--config``) plus one run of the script alone.

Issue 46's target: ``--launched-by`` costs at most one CPU-device run of the script on top of the
report, i.e. ``launched-by / (report + script) <= 1``. Runs where Triton, ocloc and the CPU device live
(the image):

    docker run --rm -v "$PWD:/workspace:ro" -e PYTHONPATH=/workspace -w /workspace --tmpfs /tmp:exec \\
        --entrypoint python xpukit:cpu benchmarks/bench_launched_by.py --repeat 5

Each measurement is a whole command in its own process, as a user runs it (the interpreter, imports,
Triton's compile, ocloc, the script's CPU-device run). The three kinds alternate within a round, so
a load that comes and goes falls on all three. "cold": every command with empty Triton and kit caches
(Triton's compile, ocloc and the CPU device's program build all run); "warm": the caches of one
earlier run of each, as on a second try.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MATMUL = ROOT / "examples" / "matmul.py"
# What examples/matmul.py's own launch is (its run(): 64x64x32 tiles, Triton's default 4 warps),
# typed in with the hints that launch gets.
SIGNATURE = (
    "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp32:16,M:i32:16,N:i32:16,K:i32:16,"
    "stride_am:i32:16,stride_ak:i32:1,stride_bk:i32:16,stride_bn:i32:1,stride_cm:i32:16,stride_cn:i32:1"
)
CONFIG = "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,num_warps=4"


def commands(target: str) -> dict[str, list[str]]:
    report = [sys.executable, "-m", "xpukit", "kernel-report", f"{MATMUL}:matmul_kernel", "--target", target]
    return {
        "launched-by": [*report, "--launched-by", str(MATMUL), "--format", "json"],
        "report": [*report, "--signature", SIGNATURE, "--config", CONFIG, "--format", "json"],
        "script": [sys.executable, str(MATMUL)],
    }


def timed(command: list[str], cache: Path) -> tuple[float, str]:
    """Wall seconds of one command with ``cache`` holding its Triton cache and the kit's (the CPU
    device's built programs), and its stdout."""
    env = {
        **os.environ,
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "XPUKIT_CACHE_DIR": str(cache / "kit"),
        "PYTHONPATH": str(ROOT),
    }
    started = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    if out.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({out.returncode}): {out.stderr.strip()[-400:]}")
    return seconds, out.stdout


def counts(stdout: str) -> list[tuple[str, int]]:
    """(target, instructions) of each row of a JSON report: both reports must compile the same zebin."""
    return [(row["target"], row["counts"]["instructions"]) for row in json.loads(stdout)["rows"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--target", default="pvc")
    parser.add_argument("--json", action="store_true", help="print the medians as JSON")
    args = parser.parse_args()
    kinds = commands(args.target)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-launched-by-") as tmp:
        warm = {kind: Path(tmp) / f"warm-{kind}" for kind in kinds}
        first = {kind: timed(command, warm[kind])[1] for kind, command in kinds.items()}  # fills the warm caches
        if counts(first["launched-by"]) != counts(first["report"]):
            raise SystemExit(f"not the same compile: {counts(first['launched-by'])} vs {counts(first['report'])}")
        for mode in ("cold", "warm"):
            times: dict[str, list[float]] = {kind: [] for kind in kinds}
            for round_ in range(args.repeat):
                for kind, command in kinds.items():
                    cache = warm[kind] if mode == "warm" else Path(tmp) / f"cold-{kind}-{round_}"
                    times[kind].append(timed(command, cache)[0])
                    if mode == "cold":
                        shutil.rmtree(cache, ignore_errors=True)
            medians = {kind: statistics.median(values) for kind, values in times.items()}
            medians["ratio"] = medians["launched-by"] / (medians["report"] + medians["script"])
            results[mode] = medians
    if args.json:
        print(json.dumps(results, indent=2))
    for mode, m in results.items():
        print(
            f"{mode}: --launched-by {m['launched-by']:.2f} s; report {m['report']:.2f} s + script "
            f"{m['script']:.2f} s = {m['report'] + m['script']:.2f} s; ratio {m['ratio']:.2f} (target <= 1)"
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
