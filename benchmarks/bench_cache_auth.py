#!/usr/bin/env python3
"""What authenticating cache entries costs per entry: HMAC-SHA256 (xpukit.runtime.cache_auth)
against the SHA-256 checksum the caches already computed, for the sizes a cache holds.

  seal / open     a shared-cache value (xpukit.runtime.triton.kernel_cache): HMAC over name + content
  sha256          the checksum alone (what every entry already paid)
  program record  the local program cache's extra work: HMAC over its JSON record (~0.3 KB)

    python benchmarks/bench_cache_auth.py [--reps 2000] [--json F] [FILE ...]

FILEs (a .zebin, a .spv, a program-cache .bin) are measured at their real size; without them,
random bytes of typical sizes: the scale kernel's SPIR-V (~6 KB), its pvc zebin (~13 KB), its CPU
native binary (~12.5 KB), a large kernel (256 KB) and 1 MB. Standard library only: runs anywhere.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import timeit
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from xpukit.runtime.cache_auth import MacKey  # noqa: E402

SIZES = {
    "spirv ~6 KB": 6 * 1024,
    "pvc zebin ~13 KB": 13110,
    "cpu binary ~12.5 KB": 12522,
    "256 KB": 256 * 1024,
    "1 MB": 1 << 20,
}


def best_us(fn, reps: int) -> float:
    """The best of 5 rounds of ``reps`` calls, per call, in microseconds."""
    return min(timeit.repeat(fn, number=reps, repeat=5)) / reps * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    key = MacKey(os.urandom(32))
    payloads = {f.name: f.read_bytes() for f in args.files} or {k: os.urandom(n) for k, n in SIZES.items()}
    rows = []
    name = "triton:" + "A" * 52 + ":kernel.zebin"
    for label, data in payloads.items():
        sealed = key.seal(name, data)
        reps = max(20, args.reps * 16384 // max(len(data), 16384))
        rows.append(
            {
                "entry": label,
                "bytes": len(data),
                "seal_us": round(best_us(lambda d=data: key.seal(name, d), reps), 2),
                "open_us": round(best_us(lambda s=sealed: key.open(name, s), reps), 2),
                "sha256_us": round(best_us(lambda d=data: hashlib.sha256(d).hexdigest(), reps), 2),
            }
        )
    record = json.dumps(
        {"format": 2, "size": 12522, "sha256": "0" * 64, "device": "opencl|cpu|x" * 4, "ur_release": "2025.3.3"}
    ).encode()
    record_us = round(best_us(lambda: key.tag("program-cache", "0" * 40, record), args.reps), 2)
    result = {
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "python": platform.python_version(),
        "entries": rows,
        "program_record_hmac_us": record_us,
    }
    width = max(len(r["entry"]) for r in rows)
    print(f"{'entry':{width}}  {'bytes':>8}  {'seal us':>8}  {'open us':>8}  {'sha256 us':>9}")
    for r in rows:
        print(f"{r['entry']:{width}}  {r['bytes']:>8}  {r['seal_us']:>8}  {r['open_us']:>8}  {r['sha256_us']:>9}")
    print(f"program cache record HMAC: {record_us} us per entry")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
