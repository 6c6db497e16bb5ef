"""The generated devcontainer: the committed default equals what the kit generates, GPU options.

The tests that run against a container engine; the others are in tests/host/test_devcontainer.py.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.support.devcontainer import CLI, run_cli
from xpukit.host.run import devcontainer
from xpukit.layout import REPO_ROOT


@pytest.mark.docker
def test_devcontainer_cli_runs_the_demo_and_the_container_tests(docker_client, test_image, tmp_path):
    """The devcontainer CLI brings the committed devcontainer up on the tested image and runs the
    demo and the image's smoke tests (marker sharing_smoke) in it: the container phase ran every
    test on this image already; this proves the devcontainer's setup (user, mounts, env) runs them."""
    if not CLI.exists():
        message = "needs the devcontainer CLI: npm ci --prefix env/npm"
        if os.environ.get("XPUKIT_REQUIRE_DOCKER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    override = tmp_path / "devcontainer.json"
    override.write_text(json.dumps(devcontainer.config(test_image, "cpu", "xpukit-test-devcontainer")))
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    up = run_cli("up", "--override-config", str(override), env=env)
    try:
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
        result = json.loads(up.stdout.strip().splitlines()[-1])
        assert result["outcome"] == "success"
        demo = run_cli(
            "exec", "--override-config", str(override), "python", "examples/xpu_triton_ur.py", "--n", "4099", env=env
        )
        assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
        assert "max abs error 0 (exact)" in demo.stdout
        tests = run_cli(
            "exec", "--override-config", str(override),
            "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "container and sharing_smoke", "tests",
            env=env,
        )  # fmt: skip
        assert tests.returncode == 0, tests.stdout[-3000:]
        passed = re.search(r"(\d+) passed", tests.stdout)
        assert passed and int(passed.group(1)) >= 10 and " failed" not in tests.stdout, tests.stdout[-3000:]
    finally:
        for c in docker_client.containers.list(all=True, filters={"label": f"devcontainer.local_folder={REPO_ROOT}"}):
            c.remove(force=True)
        for v in docker_client.volumes.list(filters={"name": "xpukit-test-devcontainer"}):
            v.remove(force=True)
