"""Launch-path probes that tests run in a fresh subprocess (a crash there is a test failure, not
a dead test run), each printing one JSON object on its last line.

    python tests/support/launch_probe.py threads --api triton --sessions shared [--threads 8 --launches 500]
    python tests/support/launch_probe.py bad-pointers --api explicit
    python tests/support/launch_probe.py first-compile [--threads 8]
    python tests/support/launch_probe.py activation

XPUKIT_PURE_PYTHON=1 in the environment selects the launcher's Python twin.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import triton

from examples.kernels import scale_kernel as scale_ptr
from tests.support.kernels import scale_raw as scale_addr  # 64-bit addresses the kernel casts to pointers
from xpukit.runtime import ur
from xpukit.runtime.triton import URDriver, activate, current_session
from xpukit.runtime.triton.launch import TritonKernel
from xpukit.runtime.ur import launcher
from xpukit.runtime.ur.objects import DeviceArray

BLOCK = 64


def _launcher(api: str, session: ur.Session):
    """launch(x, y, a, n) on ``session`` through one of the two public APIs."""
    if api == "explicit":
        bound = TritonKernel(scale_ptr, "x_ptr:*fp32,y_ptr:*fp32,a:fp32,n:i32", {"BLOCK": BLOCK}, cache=False).bind(
            session
        )
        return lambda x, y, a, n: bound[(triton.cdiv(n, BLOCK),)](x, y, a, n)
    return lambda x, y, a, n: scale_ptr[(triton.cdiv(n, BLOCK),)](x, y, a, n, BLOCK=BLOCK)


def threads(args: argparse.Namespace) -> dict:
    wrong, errors, done = [0], [], [0]
    shared = ur.Session("cpu") if args.sessions == "shared" else None
    drv = URDriver(cache=False)
    start = threading.Barrier(args.threads)
    lock = threading.Lock()
    # One session: every thread launches the same loaded kernel (explicit API) or the same
    # JITFunction (Triton's API), so their argument setting would interleave if it could.
    run_shared = _launcher(args.api, shared) if shared is not None else None

    def work(tid: int) -> None:
        session = shared or ur.Session("cpu")
        try:
            with activate(session, driver=drv):
                run = run_shared or _launcher(args.api, session)
                rng = np.random.default_rng(tid)
                x = rng.standard_normal(1000, dtype=np.float32)
                a = np.float32(tid + 1)
                with session.from_numpy(x) as dx, session.alloc(x.nbytes) as dy:
                    tx, ty = DeviceArray(dx, np.float32), DeviceArray(dy, np.float32)
                    start.wait()
                    for i in range(args.launches):
                        n = 500 + (i * 7 + tid) % 500  # the arguments change on every launch
                        run(tx, ty, float(a), n)
                        session.finish()
                        got = ty.to_numpy()[:n]
                        bad = int(np.count_nonzero(got != x[:n] * a))
                        with lock:
                            wrong[0] += bad > 0
                            done[0] += 1
        except BaseException as exc:
            with lock:
                errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            if shared is None:
                session.close()

    pool = [threading.Thread(target=work, args=(t,)) for t in range(args.threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if shared is not None:
        shared.close()
    return {"wrong": wrong[0], "launches": done[0], "errors": errors}


class ForeignTensor:
    """Anything with ``ptr``/``data_ptr()`` and ``dtype``: how Triton's API passes typed memory."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr
        self.dtype = np.dtype(np.float32)

    def data_ptr(self) -> int:
        return self.ptr


def bad_pointers(args: argparse.Namespace) -> dict:
    out: dict[str, str] = {}
    with ur.Session("cpu") as s, ur.Session("cpu") as other, activate(s, driver=URDriver(cache=False)):
        x = np.arange(256, dtype=np.float32)
        live, y = s.from_numpy(x), s.alloc(x.nbytes)
        # Both before the free below, so neither can reuse that address (CPU USM is host memory).
        foreign = other.alloc(x.nbytes)
        host = np.zeros(256, dtype=np.float32)
        stale = s.alloc(x.nbytes)
        stale_ptr = stale.ptr
        stale.close()
        addresses = {
            "stale address": stale_ptr,
            "null": 0,
            "0x1000": 0x1000,
            "host address": host.ctypes.data,
            "foreign session": foreign.ptr,
            "past the end": live.ptr + x.nbytes,
        }
        objects = {"closed allocation": stale, "foreign allocation": foreign}
        if args.api == "explicit":
            cases = {**addresses, **objects, "None": None}
            typed = TritonKernel(scale_ptr, "x_ptr:*fp32,y_ptr:*fp32,a:fp32,n:i32", {"BLOCK": BLOCK}, cache=False)
            raw = TritonKernel(scale_addr, "in_addr:i64,out_addr:i64,scale:fp32,n:i32", {"BLOCK": BLOCK}, cache=False)
            styles = {"typed": (typed.bind(s).launch, y), "address": (raw.bind(s).launch, y)}
            for style, (launch, out_arg) in styles.items():
                for name, bad in cases.items():
                    try:
                        launch((4,), bad, out_arg, 2.0, 256)
                        s.finish()
                        out[f"{style}/{name}"] = "launched"
                    except Exception as exc:
                        out[f"{style}/{name}"] = f"{type(exc).__name__}: {exc}"
            styles["typed"][0]((4,), live, y, 2.0, 256)
        else:
            # Triton's API: typed memory is an object with dtype; the blog's addresses are ints.
            typed_cases = {name: ForeignTensor(p) for name, p in addresses.items()}
            typed_cases |= {name: DeviceArray(o, np.float32) for name, o in objects.items()}
            addr_cases = {**addresses, **objects}
            ty = DeviceArray(y, np.float32)
            # Before any variant is compiled: what Triton would type as i32, None or an untyped
            # address, where the kernel's source uses a pointer, is refused by name (it used to
            # fail inside Triton's compiler).
            first = {
                "address-first/null": (scale_addr, 0, y.ptr),
                "address-first/0x1000": (scale_addr, 0x1000, y.ptr),
                "address-first/None": (scale_addr, None, y.ptr),
                "typed-first/None": (scale_ptr, None, ty),
                "typed-first/int 0x1000": (scale_ptr, 0x1000, ty),
                "typed-first/USMAllocation": (scale_ptr, live, ty),
            }
            for name, (fn, bad, out_arg) in first.items():
                try:
                    fn[(4,)](bad, out_arg, 2.0, 256, BLOCK=BLOCK)
                    s.finish()
                    out[name] = "launched"
                except Exception as exc:
                    out[name] = f"{type(exc).__name__}: {exc}"
            for style, fn, good, out_arg, cases in (
                ("typed", scale_ptr, DeviceArray(live, np.float32), ty, typed_cases),
                ("address", scale_addr, live.ptr, y.ptr, addr_cases),
            ):
                fn[(4,)](good, out_arg, 2.0, 256, BLOCK=BLOCK)  # compiled once with good arguments
                for name, bad in cases.items():
                    try:
                        fn[(4,)](bad, out_arg, 2.0, 256, BLOCK=BLOCK)
                        s.finish()
                        out[f"{style}/{name}"] = "launched"
                    except Exception as exc:
                        out[f"{style}/{name}"] = f"{type(exc).__name__}: {exc}"
        s.finish()
        ok = np.array_equal(y.to_numpy(np.float32), x * 2)
    return {"results": out, "good_launch_exact": bool(ok)}


def first_compile(args: argparse.Namespace) -> dict:
    errors: list[str] = []
    results: list[bool] = []
    start = threading.Barrier(args.threads)
    with ur.Session("cpu") as s:
        drv = URDriver(cache=False)

        def work(tid: int) -> None:
            try:
                with activate(s, driver=drv):
                    x = np.full(300, tid, dtype=np.float32)
                    with s.from_numpy(x) as dx, s.alloc(x.nbytes) as dy:
                        start.wait()
                        scale_addr[(5,)](dx.ptr, dy.ptr, 3.0, 300, BLOCK=BLOCK)
                        s.finish()
                        results.append(bool(np.array_equal(dy.to_numpy(np.float32), x * 3)))
            except BaseException as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

        pool = [threading.Thread(target=work, args=(t,)) for t in range(args.threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    return {"errors": errors, "exact": results.count(True), "cache": os.environ.get("TRITON_CACHE_DIR", "")}


def activation(args: argparse.Namespace) -> dict:
    drv = URDriver(cache=False)
    seen_foreign, probes, no_session = [0], [0], []
    with ur.Session("cpu") as a, ur.Session("cpu") as b:
        barrier = threading.Barrier(2)

        def work(mine: ur.Session) -> None:
            with activate(mine, driver=drv):
                barrier.wait()
                for _ in range(4000):
                    probes[0] += 1
                    if current_session() is not mine or drv.session is not mine:
                        seen_foreign[0] += 1

        def outsider() -> None:
            with activate(a, driver=drv):
                pass
            try:
                current_session()
                no_session.append("no error")
            except Exception as exc:
                no_session.append(type(exc).__name__)
            try:  # a Triton launch with no activate() in this thread: the kit's error, not Triton's
                scale_addr[(1,)](0, 0, 1.0, 1, BLOCK=BLOCK)
                no_session.append("launched")
            except Exception as exc:
                no_session.append(type(exc).__name__)

        pool = [threading.Thread(target=work, args=(s,)) for s in (a, b)]
        for t in pool:
            t.start()
        t = threading.Thread(target=outsider)
        t.start()
        t.join()
        for t in pool:
            t.join()
    return {"foreign": seen_foreign[0], "probes": probes[0], "outsider": no_session}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("probe", choices=("threads", "bad-pointers", "first-compile", "activation"))
    ap.add_argument("--api", choices=("explicit", "triton"), default="triton")
    ap.add_argument("--sessions", choices=("shared", "own"), default="shared")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--launches", type=int, default=500)
    args = ap.parse_args()
    probe = {"threads": threads, "bad-pointers": bad_pointers, "first-compile": first_compile}
    probe["activation"] = activation
    result = probe[args.probe](args)
    result["implementation"] = launcher.IMPLEMENTATION
    print(json.dumps(result))


if __name__ == "__main__":
    main()
