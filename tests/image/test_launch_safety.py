"""The launch path under threads and bad pointers, through both public APIs and both launcher
implementations (the compiled one and its Python twin, XPUKIT_PURE_PYTHON=1). Every probe runs in
a fresh subprocess (tests/support/launch_probe.py), so a crash shows up as a signal in its return code
instead of killing the test run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

pytest.importorskip("triton")

from tests.support.runtime_required import ur_session_or_skip

pytestmark = pytest.mark.container
PROBE = ROOT / "tests" / "support" / "launch_probe.py"
IMPLEMENTATIONS = {"compiled": {}, "pure": {"XPUKIT_PURE_PYTHON": "1"}}


@pytest.fixture(scope="module", autouse=True)
def _device():
    with ur_session_or_skip("cpu"):
        pass


def probe(tmp_path: Path, *args: str, impl: str = "compiled", timeout: int = 600) -> dict:
    env = {**os.environ, **IMPLEMENTATIONS[impl], "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    env.pop("XPUKIT_PURE_PYTHON", None) if impl == "compiled" else None
    proc = subprocess.run(
        [sys.executable, str(PROBE), *args], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )
    if proc.returncode < 0:
        pytest.fail(f"probe {args} died of {signal.Signals(-proc.returncode).name}: {proc.stderr[-2000:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    want = "compiled" if impl == "compiled" else "pure Python"
    assert result["implementation"].startswith(want), result["implementation"]
    return result


def test_the_image_has_the_compiled_launcher():
    """The image builds _xpukit_launcher and _xpukit_dispatch; without them every launch would take the slower twins."""
    from xpukit.runtime.triton import dispatch
    from xpukit.runtime.ur import launcher

    assert launcher.COMPILED, "the image must ship the compiled launch path (Dockerfile stage 'launcher')"
    assert dispatch.COMPILED, "the image must ship Triton's compiled dispatch (Dockerfile stage 'launcher')"


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("sessions", ["shared", "own"])
@pytest.mark.parametrize("api", ["triton", "explicit"])
def test_threads_never_see_each_others_arguments(tmp_path, api, sessions, impl):
    """8 threads x 500 launches, every result checked against numpy; shared: one session and
    one loaded kernel for all threads, own: a session per thread."""
    r = probe(tmp_path, "threads", "--api", api, "--sessions", sessions, impl=impl)
    assert r["errors"] == []
    assert r["launches"] == 8 * 500
    assert r["wrong"] == 0


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("api", ["triton", "explicit"])
def test_every_bad_pointer_is_a_clear_error(tmp_path, api, impl):
    r = probe(tmp_path, "bad-pointers", "--api", api, impl=impl)
    results = r["results"]
    assert len(results) >= 16
    for case, outcome in results.items():
        assert outcome.startswith("KernelArgumentError: "), f"{case}: {outcome}"
        if case.startswith("typed-first/"):
            assert "is a typed pointer in the kernel" in outcome and "'x_ptr'" in outcome, f"{case}: {outcome}"
        elif case.startswith("address-first/"):
            assert "is cast to a pointer by the kernel" in outcome and "'in_addr'" in outcome, f"{case}: {outcome}"
            assert ("null" if "null" in case or "None" in case else "not in any live allocation") in outcome, case
        elif "/closed" in case:
            assert "freed" in outcome, f"{case}: {outcome}"
        elif "/foreign" in case:
            assert "another session" in outcome, f"{case}: {outcome}"
        elif "/stale" in case:
            assert "freed" in outcome, f"{case}: {outcome}"
        elif "/null" in case or "/None" in case:
            assert "null" in outcome, f"{case}: {outcome}"
        else:
            assert "not in any live allocation" in outcome, f"{case}: {outcome}"
    assert r["good_launch_exact"], "a good launch after the refused ones must still be exact"


def test_first_compile_from_eight_threads(tmp_path):
    """Eight threads launch a kernel nobody compiled yet (empty Triton cache), at once."""
    r = probe(tmp_path, "first-compile")
    assert r["errors"] == [] and r["exact"] == 8
    assert r["cache"].startswith(str(tmp_path))


def test_activation_is_per_thread(tmp_path):
    """Two threads each inside their own activate() see only their own session; a thread that
    left its block gets NoActiveSession, not another thread's session, from current_session()
    and from a Triton launch (not Triton's "0 active drivers")."""
    r = probe(tmp_path, "activation")
    assert r["probes"] == 8000
    assert r["foreign"] == 0
    assert r["outsider"] == ["NoActiveSession", "NoActiveSession"]
