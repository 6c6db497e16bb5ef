"""The kernel-flow analysis (live GRF bytes, loops, stall sources: xpukit/runtime/offline/kernel_flow.py)
on the pvc matmul and on longer kernels; what it adds to a cold kernel report; IGA's own analysis.

Runs where Triton, ocloc and iga64 live (the image):

    docker run --rm -v "$PWD:/workspace:ro" -e PYTHONPATH=/workspace -w /workspace --tmpfs /tmp:exec \\
        --entrypoint python xpukit:cpu benchmarks/bench_flow.py [--repeat 7] [--iga-defs]

1. Compiles examples/matmul.py for pvc with its declared hints: the declared 128x128x32 tile at 4 warps
   (what ``kernel-report examples/matmul.py:matmul_kernel --target pvc`` compiles), the 64x64x32
   tile, and the 256x256x32 tile at 4 warps (the same kernel, ~5x the instructions: it spills).
2. Cold: a fresh Python process per run imports the analysis and runs it on the kernel's ``.text``
   (iga64, parse, loops, liveness, stalls), median and best of --repeat processes.
3. Warm: the same in one process, best of --repeat, per phase and per instruction: iga64 in wall
   seconds, the analysis' phases in this process' CPU seconds (less of the shared machine's load in
   them). The rounds alternate the kernels (a load change hits them alike).
4. The declared matmul's listing repeated 4 times (PCs and labels shifted): 4x the instructions
   with the same content, to separate length from what the instructions are (spill code keeps more
   registers live: a longer set per operation).
5. A cold ``kernel-report`` of the matmul on pvc (fresh process, empty Triton cache): what the
   analysis would add to it. ``--iga-defs``: IGA's own ``-Xprint-json -Xprint-defs`` on the kernels
   of at most 3,000 instructions.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KERNELS = {  # name: (tile, num_warps)
    "matmul 64x64x32 4w": ((64, 64, 32), 4),
    "matmul 128x128x32 4w (declared)": ((128, 128, 32), 4),
    "matmul 256x256x32 4w": ((256, 256, 32), 4),
}
IGA_DEFS_MAX = 3000  # --iga-defs skips longer kernels: IGA took 303 s on an 8,699-instruction one
PHASES = ("iga64", "parse", "loops", "liveness", "stalls")
_COLD = """
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
from xpukit.runtime.offline import flow, liveness, stalls
t1 = time.perf_counter()
text = flow.iga_listing(Path(sys.argv[1]), "pvc")
t2 = time.perf_counter()
listing = flow.parse_listing(text, "pvc")
t3 = time.perf_counter()
loops = flow.find_loops(listing)
t4 = time.perf_counter()
live = liveness.analyze_liveness(listing, loops)
t5 = time.perf_counter()
stalls.analyze_stalls(listing)
t6 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "iga64": t2 - t1, "parse": t3 - t2, "loops": t4 - t3,
                  "liveness": t5 - t4, "stalls": t6 - t5, "total": t6 - t0, "n": len(listing.instructions)}))
"""


def compile_pvc(tile: tuple[int, int, int], num_warps: int, out: Path) -> Path:
    """examples/matmul.py for pvc with its declared hints at ``tile``: the kernel's .text in ``out``."""
    from elftools.elf.elffile import ELFFile

    from xpukit.runtime.kernels.compile import build_targets, load_kernel, resolve_targets
    from xpukit.runtime.offline.ocloc import find_ocloc
    from xpukit.runtime.offline.specialization import for_signature

    spec = load_kernel(str(ROOT / "examples" / "matmul.py:matmul_kernel"))
    types, special = for_signature(spec.signature)
    consts = {"BLOCK_M": tile[0], "BLOCK_N": tile[1], "BLOCK_K": tile[2], **special.constants()}
    tool = find_ocloc()
    (build,) = build_targets(
        spec.fn, {k: v for k, v in types.items() if k not in consts}, consts, resolve_targets(tool, ["pvc"]),
        {"generate_native_code": True, "num_warps": num_warps}, tool,
        divisible=[n for n in special.divisibility if n not in consts],
    )  # fmt: skip
    if build.error is not None:
        raise SystemExit(f"compile failed: {build.error}")
    elf = ELFFile(io.BytesIO(build.zebin))
    path = out / f"matmul_{'x'.join(map(str, tile))}_{num_warps}.text"
    path.write_bytes(elf.get_section_by_name(f".text.{build.compiled.metadata.name}").data())
    return path


def cold(path: Path) -> dict[str, float]:
    """One fresh process: import the analysis, run it; its phases' seconds."""
    proc = subprocess.run([sys.executable, "-c", _COLD, str(path)], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def warm(path: Path) -> dict[str, float]:
    """One run in this process (modules imported, the register-set cache emptied)."""
    from xpukit.runtime.offline import flow, liveness, stalls

    flow.reg_set.cache_clear()
    t1 = time.perf_counter()
    text = flow.iga_listing(path, "pvc")
    t2 = time.perf_counter()
    c2 = time.process_time()  # the analysis' own CPU seconds: other jobs on the machine count less
    listing = flow.parse_listing(text, "pvc")
    c3 = time.process_time()
    loops = flow.find_loops(listing)
    c4 = time.process_time()
    liveness.analyze_liveness(listing, loops)
    c5 = time.process_time()
    stalls.analyze_stalls(listing)
    c6 = time.process_time()
    return dict(zip(PHASES, (t2 - t1, c3 - c2, c4 - c3, c5 - c4, c6 - c5), strict=True))


def repeated(listing: str, copies: int) -> str:
    """The listing ``copies`` times over, each copy's PCs and labels moved past the previous one's:
    the same instructions, ``copies`` times as many (copies after the first follow an EOT)."""
    pcs = [int(m.group(1), 16) for m in re.finditer(r"^/\*\s*\[([0-9A-Fa-f]+)\]", listing, re.M)]
    step = (max(pcs) // 0x1000 + 1) * 0x1000
    out = []
    for copy in range(copies):
        shift = copy * step

        def pc(m: re.Match[str], shift: int = shift) -> str:
            return f"/* [{int(m.group(1), 16) + shift:05X}]"

        def label(m: re.Match[str], shift: int = shift) -> str:
            return f"L{int(m.group(1)) + shift}"

        text = re.sub(r"^/\*\s*\[([0-9A-Fa-f]+)\]", pc, listing, flags=re.M)
        out.append(re.sub(r"\bL(\d+)\b", label, text))
    return "\n".join(out)


def analysis_only(listing: str) -> float:
    from xpukit.runtime.offline import flow, liveness, stalls

    flow.reg_set.cache_clear()
    started = time.process_time()
    parsed = flow.parse_listing(listing, "pvc")
    liveness.analyze_liveness(parsed, flow.find_loops(parsed))
    stalls.analyze_stalls(parsed)
    return time.process_time() - started


def iga_defs(path: Path) -> float:
    started = time.perf_counter()
    cmd = ["iga64", "-d", "-p=xehpc", str(path), "-Xprint-pc", "-Xprint-json", "-Xprint-defs"]
    subprocess.run(cmd, capture_output=True, check=True)
    return time.perf_counter() - started


def cold_report(work: Path) -> float:
    env = {**os.environ, "TRITON_CACHE_DIR": str(work / "triton-report"), "XPUKIT_CACHE_DIR": str(work / "kit")}
    cmd = [sys.executable, "-m", "xpukit", "kernel-report", "examples/matmul.py:matmul_kernel", "--target", "pvc"]
    started = time.perf_counter()
    subprocess.run([*cmd, "--format", "none"], cwd=ROOT, env=env, capture_output=True, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--iga-defs", action="store_true", help="also time IGA's own liveness (-Xprint-defs)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="xpukit-bench-flow-"))
    os.environ.setdefault("TRITON_CACHE_DIR", str(work / "triton"))
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; python {sys.version.split()[0]}")
    paths = {name: compile_pvc(tile, nw, work) for name, (tile, nw) in KERNELS.items()}
    # Rounds alternate the kernels, so a change in the machine's load hits each of them alike; the
    # best of the rounds is taken per kernel and phase.
    colds: dict[str, list[dict[str, float]]] = {name: [] for name in paths}
    warms: dict[str, dict[str, float]] = {name: dict.fromkeys(PHASES, float("inf")) for name in paths}
    per_round: dict[str, list[float]] = {name: [] for name in paths}  # each round's analysis seconds
    for _ in range(args.repeat):
        for name, path in paths.items():
            colds[name].append(cold(path))
            took = warm(path)
            per_round[name].append(sum(took[p] for p in PHASES[1:]))
            for phase in PHASES:
                warms[name][phase] = min(warms[name][phase], took[phase])
    rows = {}
    for name, path in paths.items():
        runs, best = colds[name], warms[name]
        n = int(runs[0]["n"])
        analysis = sum(best[p] for p in PHASES[1:])
        rows[name] = (n, analysis)
        total = [r["total"] for r in runs]
        print(
            f"{name}: {n} instructions; cold process (import + iga64 + analysis) median "
            f"{statistics.median(total):.3f} s, best {min(total):.3f} s (import {min(r['import'] for r in runs):.3f} s)"
        )
        phases = ", ".join(f"{p} {best[p] * 1e3:.1f} ms" for p in PHASES)
        print(f"  warm best: {phases}; analysis {analysis * 1e3:.1f} ms = {analysis / n * 1e6:.1f} us/instruction")
        if args.iga_defs and n <= IGA_DEFS_MAX:
            print(f"  IGA's own liveness (-Xprint-json -Xprint-defs): {iga_defs(path):.2f} s")
    names = list(rows)
    (n0, t0), (n1, t1) = rows[names[1]], rows[names[2]]
    paired = statistics.median(b / a for a, b in zip(per_round[names[1]], per_round[names[2]], strict=True))
    print(
        f"scaling: {n1 / n0:.2f}x the instructions -> {t1 / t0:.2f}x the analysis time (best against best), "
        f"{paired:.2f}x (median of the rounds' ratios)"
    )
    from xpukit.runtime.offline.flow import iga_listing

    listing = iga_listing(paths[names[1]], "pvc")
    once, four = repeated(listing, 1), repeated(listing, 4)
    rounds = [(analysis_only(once), analysis_only(four)) for _ in range(args.repeat)]
    a, b = min(r[0] for r in rounds), min(r[1] for r in rounds)
    print(
        f"the declared matmul's listing 4 times over (same instructions, 4x as many): analysis "
        f"{a * 1e3:.1f} -> {b * 1e3:.1f} ms ({b / a:.2f}x; median of the rounds' ratios "
        f"{statistics.median(y / x for x, y in rounds):.2f}x)"
    )
    report = cold_report(work)
    added = statistics.median(cold(paths[names[1]])["total"] for _ in range(5))
    print(f"cold kernel-report, matmul, pvc: {report:.2f} s; the analysis in a fresh process after it: {added:.3f} s")


if __name__ == "__main__":
    main()
