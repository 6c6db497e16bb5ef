"""`invoke compile` of examples/kernels.py for the seven Intel GPU families against one family, as a
user runs it: a fresh process per command, an empty Triton cache each time (cold), alternating.

The kit compiles Triton's SPIR-V once per distinct set of codegen properties (three for the seven
families: pvc/bmg/lnl/ptl, acm-g10/arl-h, mtl) and runs ocloc per target, as many at once as there
are cores. Target: seven families cost at most 2x one family.

    python benchmarks/bench_families.py [--repeat 3] [--where host|container] [--json out.json]
    python benchmarks/bench_families.py --in-process    # run_compile in this process: no invoke, no imports
"""

from __future__ import annotations

import argparse
import ast
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
EXAMPLE = ROOT / "examples" / "kernels.py"
SEVEN = "pvc,bmg,acm-g10,arl-h,mtl,lnl,ptl"
TARGET_RATIO = 2.0


def _kernels() -> list[str]:
    """The kernels examples/kernels.py declares in XPUKIT_KERNELS (read without importing Triton)."""
    tree = ast.parse(EXAMPLE.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "XPUKIT_KERNELS":
            return list(ast.literal_eval(node.value))
    sys.exit(f"{EXAMPLE} declares no XPUKIT_KERNELS")


def _compile_all(targets: str, where: str) -> float:
    """Every declared kernel compiled for ``targets``, one `invoke compile` each, caches empty."""
    cache = Path(tempfile.mkdtemp(prefix="xpukit-bench-families-"))
    env = {**os.environ, "XPUKIT_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "triton-cache")}
    total = 0.0
    try:
        for kernel in _kernels():
            out = cache / "out"
            command = [sys.executable, "-m", "invoke", "compile", f"examples/kernels.py:{kernel}",
                       "--target", targets, "--out", str(out), "--where", where]  # fmt: skip
            start = time.perf_counter()
            proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
            total += time.perf_counter() - start
            if proc.returncode != 0:
                sys.exit(f"failed ({proc.returncode}): {' '.join(command)}\n{proc.stderr[-2000:]}")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return total


def _compile_in_process(targets: str) -> float:
    """The same in this process (Triton imported already): only the compile work, no start-up."""
    import contextlib
    import io

    from xpukit.runtime.kernels.compile import run_compile

    cache = Path(tempfile.mkdtemp(prefix="xpukit-bench-families-"))
    os.environ["TRITON_CACHE_DIR"] = str(cache / "triton-cache")
    try:
        start = time.perf_counter()
        for kernel in _kernels():
            with contextlib.redirect_stdout(io.StringIO()):
                run_compile(f"{EXAMPLE}:{kernel}", [targets], cache / "out", None, [])
        return time.perf_counter() - start
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--where", default="container", choices=["container", "host"])
    parser.add_argument("--json", default=None, help="also write the figures here")
    parser.add_argument("--in-process", action="store_true", help="run_compile here instead of invoke")
    args = parser.parse_args(argv)
    measure = _compile_in_process if args.in_process else lambda t: _compile_all(t, args.where)
    if args.in_process:
        sys.path.insert(0, str(ROOT))
        measure("pvc")  # the first compile in a process pays Triton's and LLVM's start-up: not counted
    one, seven = [], []
    for _ in range(args.repeat):  # alternating, so load from other jobs hits both alike
        one.append(measure("pvc"))
        seven.append(measure(SEVEN))
    ratios = [s / o for s, o in zip(seven, one, strict=True)]
    figures = {
        "kernels": len(_kernels()),
        "one_family_s": [round(t, 2) for t in one],
        "seven_families_s": [round(t, 2) for t in seven],
        "ratio_median": round(statistics.median(ratios), 2),
        "target_ratio": TARGET_RATIO,
    }
    how = "run_compile in one process" if args.in_process else f"`invoke compile --where {args.where}`"
    print(
        f"{figures['kernels']} kernels, cold, {how}: one family (pvc) "
        f"{statistics.median(one):.2f} s, seven families {statistics.median(seven):.2f} s (medians of "
        f"{args.repeat}); seven/one {figures['ratio_median']:.2f}x per pair {[round(r, 2) for r in ratios]} "
        f"(target <= {TARGET_RATIO:.0f}x)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"where": args.where, "cpus": os.cpu_count(), **figures}, indent=2))
    return 0 if figures["ratio_median"] <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
