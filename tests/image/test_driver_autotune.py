"""``triton.autotune`` through xpukit's UR driver: configurations timed with UR event profiling."""

from __future__ import annotations

import math

import numpy as np
import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from xpukit.runtime.triton import URDriver, activate, do_bench, empty, from_numpy  # noqa: E402
from xpukit.runtime.triton.launch import ProgramCache  # noqa: E402

pytestmark = pytest.mark.container

CONFIGS = [triton.Config({"BLOCK": 64}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=4)]


@triton.jit
def _add_body(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


# Decorated at import, outside any activate(), naming the UR benchmarker explicitly.
@triton.autotune(configs=CONFIGS, key=["n"], do_bench=do_bench)
@triton.jit
def add_tuned(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    _add_body(x_ptr, y_ptr, out_ptr, n, BLOCK)


# As Triton's tutorials write them: decorated at import, before any session exists, no do_bench.
# Triton asks its active driver for a benchmarker here; with no Triton driver active (no torch XPU)
# that is xpukit's stand-in, which hands out the UR benchmarker.
@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def add_tutorial(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    _add_body(x_ptr, y_ptr, out_ptr, n, BLOCK)


@triton.heuristics({"BLOCK": lambda args: 1024 if args["n"] >= 4096 else 64})
@triton.jit
def add_heuristic(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    _add_body(x_ptr, y_ptr, out_ptr, n, BLOCK)


@pytest.fixture(scope="module")
def drv(tmp_path_factory):
    return URDriver(cache=ProgramCache(tmp_path_factory.mktemp("programs")))


def grid(meta):
    return (triton.cdiv(meta["n"], meta["BLOCK"]),)


def test_autotune_picks_a_config_and_reuses_it(session, drv):
    n = 200_000
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    with activate(session, driver=drv), from_numpy(x) as dx, from_numpy(y) as dy, empty(n, np.float32) as out:
        add_tuned[grid](dx, dy, out, n)
        session.synchronize()
        np.testing.assert_array_equal(out.to_numpy(), x + y)
        assert drv.stats.benchmarks == len(CONFIGS)  # one UR-profiled timing per configuration
        assert add_tuned.best_config in CONFIGS
        timings = add_tuned.configs_timings
        assert set(timings) == set(CONFIGS)
        assert all(0 < t[0] < 1e4 and math.isfinite(t[0]) for t in timings.values())
        assert add_tuned.best_config == min(timings, key=timings.get)
        variants, benches = drv.stats.variants, drv.stats.benchmarks
        for _ in range(3):  # same key: the cached choice, no benchmarking, no compiling
            add_tuned[grid](dx, dy, out, n)
        session.synchronize()
        assert (drv.stats.benchmarks, drv.stats.variants) == (benches, variants)
        np.testing.assert_array_equal(out.to_numpy(), x + y)
        add_tuned[grid](dx, dy, out, 1000)  # a new key value: tuned again
        assert drv.stats.benchmarks == benches + len(CONFIGS)
        assert len(add_tuned.cache) == 2


def test_tutorial_style_autotune_and_heuristics_defined_at_import(session, drv):
    """No do_bench given at import: the kit's UR benchmarker tunes once a session is active."""
    assert add_tutorial.do_bench is do_bench
    n = 6000
    x = np.arange(n, dtype=np.float32)
    with activate(session, driver=drv), from_numpy(x) as dx, empty(n, np.float32) as out:
        benches = drv.stats.benchmarks
        add_tutorial[grid](dx, dx, out, n)
        session.synchronize()
        np.testing.assert_array_equal(out.to_numpy(), 2 * x)
        assert drv.stats.benchmarks == benches + len(CONFIGS)
        add_heuristic[grid](dx, dx, out, n)
        session.synchronize()
        np.testing.assert_array_equal(out.to_numpy(), 2 * x)


def test_autotune_decorated_inside_activate_uses_the_driver_benchmarker(session, drv):
    with activate(session, driver=drv):

        @triton.autotune(configs=CONFIGS, key=["n"])
        @triton.jit
        def add_inner(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
            _add_body(x_ptr, y_ptr, out_ptr, n, BLOCK)

        # The module's do_bench times on the calling thread's session with its driver.
        assert add_inner.do_bench is do_bench
        n = 5000
        x = np.arange(n, dtype=np.float32)
        with from_numpy(x) as dx, empty(n, np.float32) as out:
            benches = drv.stats.benchmarks
            add_inner[grid](dx, dx, out, n)
            session.synchronize()
            np.testing.assert_array_equal(out.to_numpy(), 2 * x)
            assert drv.stats.benchmarks == benches + len(CONFIGS)


def test_do_bench_contract(session, drv):
    n = 4096
    with activate(session, driver=drv), empty(n, np.float32) as a, empty(n, np.float32) as b:
        call = lambda: _add_body[(4,)](a, a, b, n, BLOCK=1024)  # noqa: E731
        med, lo, hi = drv.do_bench(call, quantiles=(0.5, 0.2, 0.8), rep=5)
        assert 0 < lo <= med <= hi
        assert drv.do_bench(call, rep=5, return_mode="min") > 0
        assert isinstance(drv.do_bench(call, rep=5, return_mode="all"), list)
        with pytest.raises(Exception, match="launched no kernel"):
            drv.do_bench(lambda: None, rep=1)
