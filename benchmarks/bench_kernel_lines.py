"""`kernel-report --lines` against a plain report, and `--watch` from a save to the new page.

Runs where Triton and ocloc live (the image):

    docker run --rm -v "$PWD:/workspace" -w /workspace xpukit:cpu python benchmarks/bench_kernel_lines.py

1. Warm (Triton's cache holds the SPIR-V; ocloc runs, as in a report's own process): build_report
   with and without ``lines`` in one process, alternated, median of --repeat; the ratio is the cost
   of the per-line view. Then ocloc one device at a time against one ``-device a,b,c`` run, and
   a seven-family build's CPU seconds against its wall time (the floor on this machine's cores).
2. --watch: a watch server in a child process on a copy of the kernel; each save edits the kernel's
   body (new SPIR-V: a real recompile); the time from the write to the server announcing the new
   page on /events. ``--before DIR`` runs a second server from another checkout, saves alternated.
"""

from __future__ import annotations

import argparse
import os
import queue
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SEVEN = "pvc,bmg,acm-g10,arl-h,mtl,lnl,ptl"
SMALL = "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,num_warps=4"


def warm_ratio(repeat: int) -> None:
    from tests.support.reports import report_of as build_report
    from xpukit.runtime.kernels import compile as compile_module

    kernel = str(ROOT / "examples" / "matmul.py:matmul_kernel")
    for targets, configs in (("pvc", []), (SEVEN, [SMALL])):
        build_report(kernel, [targets], configs, lines=True)  # fill Triton's cache
        plain, lines = [], []
        for _ in range(repeat):
            for with_lines, into in ((False, plain), (True, lines)):
                compile_module.NATIVE_MEMORY = compile_module.NativeMemory()  # a report's own process has none
                started = time.perf_counter()
                build_report(kernel, [targets], configs, lines=with_lines)
                into.append(time.perf_counter() - started)
        a, b = statistics.median(plain), statistics.median(lines)
        print(f"warm {targets} {configs or 'declared'}: plain {a:.2f} s, --lines {b:.2f} s, ratio {b / a:.2f}")


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def edited(source: str, n: int) -> str:
    """examples/matmul.py with an edit no earlier one made (the constant the accumulator starts
    from): new SPIR-V, so Triton and every family's ocloc build again."""
    changed = source.replace("dtype=tl.float32)\n", f"dtype=tl.float32) + {n}.0\n", 1)
    if changed == source:
        raise SystemExit("bench_kernel_lines: examples/matmul.py no longer has the line the edit changes")
    return changed


def cpu_floor(targets: str = SEVEN) -> None:
    """One build of ``targets`` after an edit, as a watch's save makes it (Triton compiles the new
    SPIR-V; nothing is reused): wall time against the CPU seconds it needs (this process and its
    ocloc children); CPU / cores is the floor any schedule has on this machine."""
    from tests.support.reports import report_of as build_report
    from xpukit.runtime.kernels import compile as compile_module

    work = Path(tempfile.mkdtemp(prefix="xpukit-bench-floor-"))
    try:
        source = (ROOT / "examples" / "matmul.py").read_text()
        copy = work / "matmul.py"
        copy.write_text(source)
        kernel = f"{copy}:matmul_kernel"
        build_report(kernel, [targets], [SMALL], lines=True)  # Triton imported, history learnt
        copy.write_text(edited(source, 1000 + len(targets)))  # unlike any save the watch makes
        reused = compile_module.NATIVE_MEMORY.counts["reused"]
        wall, cpu = time.perf_counter(), _cpu_seconds()
        build_report(kernel, [targets], [SMALL], lines=True, fresh=True)
        wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
        if compile_module.NATIVE_MEMORY.counts["reused"] != reused:
            raise SystemExit("bench_kernel_lines: the floor's rebuild reused a zebin: the edit did not change the code")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cores = os.cpu_count() or 1
    print(f"{targets} {SMALL}: wall {wall:.2f} s, CPU {cpu:.2f} s; floor on {cores} cores {cpu / cores:.2f} s")


def multi_device() -> None:
    """ocloc per device against one ``ocloc compile -device a,b,c`` (an archive of three zebins): the
    three FMA families' SPIR-V, CPU seconds of the ocloc processes (wall is the machine's load)."""
    from xpukit.runtime.kernels.compile import load_kernel
    from xpukit.runtime.offline.ocloc import find_ocloc
    from xpukit.runtime.triton.tritonc import compile_kernel, parse_signature
    from xpukit.targets import PRESETS

    spec = load_kernel(str(ROOT / "examples" / "matmul.py:matmul_kernel"))
    tile = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}
    signature = {k: v for k, v in parse_signature(spec.signature).items() if k not in tile}
    spirv = {
        t: compile_kernel(spec.fn, signature, tile, PRESETS[t].props(), {"num_warps": 4}).asm["spv"]
        for t in SEVEN.split(",")
    }
    print(f"SPIR-V: {len(set(spirv.values()))} distinct for {len(spirv)} families (the rest are byte-equal)")
    tool = find_ocloc()
    devices = ["acm-g10", "arl-h", "mtl"]
    with tempfile.TemporaryDirectory(prefix="xpukit-bench-ocloc-") as tmp:
        spv = Path(tmp, "k.spv")
        spv.write_bytes(spirv["acm-g10"])

        def run(device: str) -> float:
            out = Path(tmp, device.replace(",", "_"))
            out.mkdir(exist_ok=True)
            cpu = _cpu_seconds()
            cmd = tool.command(spv, device, "", out / "k.zebin")
            subprocess.run(cmd, cwd=tmp, capture_output=True, check=True)
            return _cpu_seconds() - cpu

        for _ in range(2):
            each = sum(run(d) for d in devices)
            together = run(",".join(devices))
            print(f"ocloc CPU: {', '.join(devices)} one by one {each:.2f} s, in one -device list {together:.2f} s")


def speculation(repeat: int) -> None:
    """pvc at the declared tile spills: its two ocloc builds one after the other (the pinned retry)
    against both at once (``speculate_large``), alternated; wall seconds and whether the zebins match."""
    from xpukit.runtime.kernels.compile import load_kernel
    from xpukit.runtime.offline.ocloc import find_ocloc
    from xpukit.runtime.triton.tritonc import compile_kernel, parse_signature

    spec = load_kernel(str(ROOT / "examples" / "matmul.py:matmul_kernel"))
    signature = {k: v for k, v in parse_signature(spec.signature).items() if k not in spec.constexprs}
    spirv = compile_kernel(spec.fn, signature, spec.constexprs, "pvc").asm["spv"]
    tool = find_ocloc()
    times: dict[bool, list[float]] = {False: [], True: []}
    zebins = set()
    for _ in range(repeat):
        for at_once in (False, True):
            started = time.perf_counter()
            zebins.add(tool.compile_spirv(spirv, "pvc", speculate_large=at_once).zebin)
            times[at_once].append(time.perf_counter() - started)
    serial, both = statistics.median(times[False]), statistics.median(times[True])
    print(
        f"ocloc pvc declared tile: retry after {serial:.2f} s, both at once {both:.2f} s "
        f"({both / serial:.2f}); {'the same zebin' if len(zebins) == 1 else 'DIFFERENT zebins'}"
    )


class WatchServer:
    """``kernel-report --watch`` in a child process, run from ``code`` (a checkout of the kit), on a
    copy of examples/matmul.py; ``save`` edits the copy and waits for the new page on /events."""

    def __init__(self, code: Path, targets: str, configs: list[str]) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="xpukit-bench-watch-"))
        self.kernel = self.work / "matmul.py"
        self.original = (ROOT / "examples" / "matmul.py").read_text()
        self.kernel.write_text(self.original)
        args = [sys.executable, "-m", "xpukit", "kernel-report", f"{self.kernel}:matmul_kernel"]
        args += ["--target", targets, "--watch"]
        for config in configs:
            args += ["--config", config]
        self.log: queue.Queue[str] = queue.Queue()
        # Its own Triton cache: a server must not find the SPIR-V another one compiled for the same save.
        env = {**os.environ, "TRITON_CACHE_DIR": str(self.work / "triton")}
        self.server = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, cwd=code, env=env)
        assert self.server.stderr is not None
        port = 0
        for line in self.server.stderr:
            if "http://127.0.0.1:" in line:
                port = int(line.rsplit(":", 1)[1].split("/")[0])
                break
        threading.Thread(target=self._read_log, daemon=True).start()
        self.events = urllib.request.urlopen(f"http://127.0.0.1:{port}/events", timeout=300)
        self.version = _next_version(self.events)

    def _read_log(self) -> None:
        assert self.server.stderr is not None
        for line in self.server.stderr:
            self.log.put(line.rstrip())

    def save(self, source: str) -> tuple[float, str]:
        """Write ``source``; the seconds until the page is new, and the server's line about it."""
        self.kernel.write_text(source)
        started = time.perf_counter()
        self.version = _wait_past(self.events, self.version)
        took = time.perf_counter() - started
        line = self.log.get(timeout=60)
        while "compiled in" not in line:
            line = self.log.get(timeout=60)
        return took, line

    def stop(self) -> None:
        self.server.terminate()
        self.server.wait(timeout=30)
        shutil.rmtree(self.work, ignore_errors=True)


def watch_latency(targets: str, configs: list[str], saves: int, codes: dict[str, Path]) -> None:
    """Save -> page for each checkout in ``codes``, saves alternated between them (same minutes).
    Each timed save changes the kernel's code in a way no earlier save did (a constant the
    accumulator starts from), so every family is compiled again; the revert is not timed."""
    servers = {label: WatchServer(code, targets, configs) for label, code in codes.items()}
    times: dict[str, list[float]] = {label: [] for label in codes}
    try:
        for n in range(saves):
            for label, server in servers.items():
                took, line = server.save(edited(server.original, n + 1))
                if "reused" in line:  # the server counts the zebins it did not build again
                    raise SystemExit(f"{label}: a timed save reused a zebin, the edit did not change the code: {line}")
                times[label].append(took)
                server.save(server.original)  # the revert compiles too (or is reused); not timed
        label = f"{targets} {configs[0] if configs else 'declared'}"
        medians = {k: statistics.median(v) for k, v in times.items()}
        for k, v in times.items():
            print(f"watch {label} [{k}]: save -> page median {medians[k]:.2f} s, max {max(v):.2f} s ({saves} saves)")
        if len(medians) == 2:
            before, after = medians.values()
            print(f"watch {label}: after / before = {after / before:.2f}")
        print(f"load average: {Path('/proc/loadavg').read_text().strip()}")
    finally:
        for server in servers.values():
            server.stop()


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
    parser.add_argument(
        "--before", type=Path, help="a checkout of the kit to time beside this one (git archive REV | tar -x -C DIR)"
    )
    parser.add_argument("--watch-only", action="store_true", help="skip the --lines / plain ratio")
    parser.add_argument("--speculation", action="store_true", help="only the ocloc retry against both builds at once")
    parser.add_argument(
        "--case", action="append", choices=["pvc-declared", "pvc-small", "seven", "all"], help="watch cases"
    )
    parser.add_argument("--floor", action="store_true", help="the CPU floor of one rebuild of seven and all families")
    args = parser.parse_args()
    if args.speculation:
        speculation(args.repeat)
        return 0
    if args.floor:
        cpu_floor(SEVEN)
        cpu_floor("all")
    if not args.watch_only:
        warm_ratio(args.repeat)
        multi_device()
        cpu_floor()
        speculation(args.repeat)
    codes = {"before": args.before.resolve(), "after": ROOT} if args.before else {"this": ROOT}
    cases = {
        "pvc-declared": ("pvc", []),
        "pvc-small": ("pvc", [SMALL]),
        "seven": (SEVEN, [SMALL]),
        "all": ("all", [SMALL]),  # the eleven families
    }
    for name in args.case or list(cases):
        watch_latency(*cases[name], args.saves, codes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
