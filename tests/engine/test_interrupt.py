"""Ctrl-C in a task that runs a container: one line, exit 130, and the container is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from xpukit.layout import REPO_ROOT

pytestmark = pytest.mark.docker


def test_ctrl_c_stops_the_container(docker_client, test_image, tmp_path):
    """`invoke compile` of a kernel file that sleeps while it is imported in the container: SIGINT
    to invoke must stop and remove that container, print one line and exit 130."""
    kernels = tmp_path / "slow_kernels.py"
    kernels.write_text("import time\n\ntime.sleep(300)\n\n\ndef k():\n    pass\n")
    before = {c.id for c in docker_client.containers.list(all=True)}
    env = {**os.environ, "XPUKIT_PROFILE": "cpu", "XPUKIT_IMAGE": os.environ.get("XPUKIT_IMAGE", "xpukit")}
    env.pop("CI", None)
    cmd = [sys.executable, "-m", "invoke", "compile", f"{kernels}:k", "--where", "container", "--out", str(tmp_path)]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started = []
        for _ in range(600):  # the container appears once the image exists (built first when missing)
            # The engine is shared: ours is the one whose command names this test's kernel file.
            started = [
                c
                for c in docker_client.containers.list()
                if c.id not in before and any(str(kernels) in part for part in c.attrs["Config"]["Cmd"] or [])
            ]
            if started or proc.poll() is not None:
                break
            time.sleep(0.5)
        assert started, proc.communicate(timeout=30)
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-1000:]
    assert "Traceback" not in out + err
    assert err.strip().splitlines()[-1] == "xpukit: interrupted"
    left = [c for c in docker_client.containers.list(all=True) if c.id in {s.id for s in started}]
    assert not left, f"containers left behind: {[c.name for c in left]}"


def test_a_container_killed_from_outside_is_one_line_and_its_exit_code(docker_client, test_image, tmp_path):
    """`docker kill` (SIGKILL, as the OOM killer sends) of the container `invoke compile` runs: invoke
    says so in one line naming the signal and the fix, exits 137 as the container did, and the `--out`
    folder it made is gone. Before: exit 137 and no line at all."""
    kernels = tmp_path / "slow_kernels.py"
    kernels.write_text("import time\n\ntime.sleep(300)\n\n\ndef k():\n    pass\n")
    out = tmp_path / "new" / "out"
    before = {c.id for c in docker_client.containers.list(all=True)}
    env = {**os.environ, "XPUKIT_PROFILE": "cpu", "XPUKIT_IMAGE": os.environ.get("XPUKIT_IMAGE", "xpukit")}
    env.pop("CI", None)
    cmd = [sys.executable, "-m", "invoke", "compile", f"{kernels}:k", "--where", "container", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        started = []
        for _ in range(600):
            started = [
                c
                for c in docker_client.containers.list()
                if c.id not in before and any(str(kernels) in part for part in c.attrs["Config"]["Cmd"] or [])
            ]
            if started or proc.poll() is not None:
                break
            time.sleep(0.5)
        assert started, proc.communicate(timeout=30)
        started[0].kill()  # SIGKILL
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 137, err[-1000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "xpukit: error: the container was killed by signal 9 (SIGKILL, exit 137): docker kill, or out of memory "
        "(fix: rerun; if memory ran out, give the engine more)"
    )
    assert not (tmp_path / "new").exists(), "the killed run's --out folder is left"
    left = [c for c in docker_client.containers.list(all=True) if c.id in {s.id for s in started}]
    assert not left, f"containers left behind: {[c.name for c in left]}"
